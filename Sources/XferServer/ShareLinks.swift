import Foundation
import HTTPTypes
import Hummingbird
import XferCore
import XferProtocol

/// Making a share link (docs/WEB.md, Share links): the one rule the web view and /v1 follow.
/// The document must be one of the account's live documents (a pinned version one of its own)
/// and the account under its 1,000 links, checked before anything costly; a link lasts no
/// longer than the token or session that makes it; a password is hashed (scrypt, through the
/// server's one ``PasswordGate``) only for a link that is then made.
struct ShareLinks: Sendable {
    let metadata: any MetadataStore
    let passwords: PasswordGate

    /// Makes a link to `path` in `container` for `principal`'s account.
    /// - Parameters:
    ///   - version: The one version it shows (`nil`: whatever is current when it is opened).
    ///   - lifetime: Nanoseconds it lasts (`nil`: until revoked).
    ///   - password: What it asks for (`nil` or empty: nothing).
    /// - Returns: The link, and its secret (shown once; the server keeps its hash).
    func make(
        for principal: Principal, container: ContainerName, path: DocumentPath, version: Int64?, lifetime: Int64?,
        password: String?
    ) async throws -> (link: ShareLink, secret: String) {
        let account = principal.accountID
        try await metadata.checkShare(account: account, container: container, path: path, version: version)
        var stored: String? = nil
        if let password, !password.isEmpty {
            stored = try await passwords.run(account: account) { try PasswordHash.make(password) }
        }
        var lifetime = lifetime
        if let expiresAt = principal.expiresAt {
            let left = max(1, expiresAt - principal.authenticatedAt)
            lifetime = min(lifetime ?? left, left)
        }
        let secret = WebSecurity.secret()
        let link = try await metadata.createShare(
            account: account, container: container, path: path, version: version, password: stored,
            hash: Self.hash(secret), lifetime: lifetime)
        return (link, secret)
    }

    /// What the server keeps of a link's secret.
    static func hash(_ secret: String) -> [UInt8] { ChunkID.of(Array("xfer share link v1\0\(secret)".utf8)).bytes }

    /// The address of a link to `secret` on this server, as the client reached it.
    static func url(_ request: Request, secret: String, secure: Bool) -> String {
        let host = request.head.authority ?? request.headers[HTTPField.Name("Host")!] ?? "localhost"
        return (secure ? "https://" : "http://") + host + "/s/" + secret
    }
}
