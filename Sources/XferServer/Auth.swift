import Foundation
import Hummingbird
import NIOCore
import XferCore
import XferProtocol

/// Access tokens: 256 random bits, shown once, stored only as their SHA-256.
public enum TokenHash {
    /// A new token: `xfer_` and 64 hex digits.
    public static func generate() -> String {
        var random = SystemRandomNumberGenerator()
        let words = (0..<4).map { _ in random.next() as UInt64 }
        return "xfer_"
            + words.map { word in
                let hex = String(word, radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined()
    }

    /// The stored form of a token.
    public static func hash(_ token: String) -> [UInt8] { ChunkID.of(Array(token.utf8)).bytes }

    /// A token's public id: the first 8 bytes of its stored hash, in hex (``TokenSummary/id``).
    public static func publicID(ofHash hash: [UInt8]) -> String {
        hash.prefix(TokenSummary.idLength / 2).map(ChunkID.hexDigits).joined()
    }

    /// `text` checked as a public id: 16 hex digits, lowercased.
    /// - Throws: `bad_request` for anything else.
    public static func publicID(_ text: String) throws -> String {
        guard text.utf8.count == TokenSummary.idLength, let bytes = Sealing.hexBytes(text) else {
            throw XferError(
                .badRequest,
                "a token id is \(TokenSummary.idLength) hex digits, as `xfer token list` or `xfer account tokens NAME` shows it"
            )
        }
        return bytes.map(ChunkID.hexDigits).joined()
    }

    /// Compares two hashes in time independent of where they differ.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// The request context of xfer's routes: Hummingbird's core storage plus who is asking.
public struct XferRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by ``AuthMiddleware`` for every route but the health check.
    public var principal: Principal?
    /// Set by ``WebSessionMiddleware`` on the web view's routes for a signed-in browser.
    public var web: WebContext?
    /// The container a /v1 route acts on, resolved by ``Routes/scoped(_:_:)``.
    var target: ContainerTarget?
    /// The token's key in the ``TokenLimiter`` (its hash), set with ``principal``.
    var tokenKey: [UInt8]?
    /// The request's connection (where ``presence()`` finds its ``ClientPresenceHandler``).
    let channel: any Channel

    public init(source: Source) {
        coreContext = .init(source: source)
        principal = nil
        web = nil
        target = nil
        tokenKey = nil
        channel = source.channel
    }

    /// Whether the client of this request's connection is still there, for a response that
    /// waits long (``ClientPresence``); `nil` on a connection without the handler (router tests).
    func presence() async -> ClientPresence? {
        try? await channel.pipeline.handler(type: ClientPresenceHandler.self).map { $0.presence }.get()
    }

    /// The authenticated principal (the middleware guarantees one on authenticated routes).
    func requirePrincipal() throws -> Principal {
        guard let principal else { throw XferError(.unauthorized, "this route needs a token") }
        return principal
    }

    /// The container the route acts on (``Routes/scoped(_:_:)`` sets it on every route that
    /// acts for an account).
    func requireTarget() throws -> ContainerTarget {
        guard let target else { throw XferError(.internal, "this route acts on no container") }
        return target
    }

    /// The principal, which must be an account (not the admin token).
    func requireAccount() throws -> Principal {
        let principal = try requirePrincipal()
        guard !principal.isAdmin else {
            throw XferError(.forbidden, "the admin token manages accounts only; use an account's token for documents")
        }
        return principal
    }
}

/// The token an `Authorization` header carries, the one rule every route that takes a token
/// reads it by: `Bearer TOKEN`, or with `basic` (WebDAV) also the password of `Basic`
/// credentials (the user name is not checked); `nil` for none, or one over 256 bytes.
enum Credentials {
    static func token(_ header: String?, basic: Bool = false) -> String? {
        guard let header else { return nil }
        var token: String
        if header.hasPrefix("Bearer ") {
            token = header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
        } else if basic, header.hasPrefix("Basic "), header.utf8.count <= 1024,
            let decoded = Data(base64Encoded: header.dropFirst("Basic ".count).trimmingCharacters(in: .whitespaces)),
            let text = String(data: decoded, encoding: .utf8), let colon = text.firstIndex(of: ":")
        {
            token = String(text[text.index(after: colon)...])
        } else {
            return nil
        }
        guard !token.isEmpty, token.utf8.count <= 256 else { return nil }
        return token
    }

    /// The principal of the header's token, if it is one of this server's.
    static func principal(_ header: String?, basic: Bool = false, _ metadata: any MetadataStore) async throws
        -> Principal?
    {
        try await authenticate(header, basic: basic, metadata)?.principal
    }

    /// The principal of the header's token and the token's hash (its key in the ``TokenLimiter``).
    static func authenticate(_ header: String?, basic: Bool = false, _ metadata: any MetadataStore) async throws
        -> (principal: Principal, key: [UInt8])?
    {
        guard let token = token(header, basic: basic) else { return nil }
        let hash = TokenHash.hash(token)
        guard let principal = try await metadata.principal(tokenHash: hash) else { return nil }
        try refuseExpired(principal)
        return (principal, hash)
    }

    /// Throws `unauthorized` for a token past its expiry, saying when it expired.
    static func refuseExpired(_ principal: Principal) throws {
        guard principal.isExpired, let expiresAt = principal.expiresAt else { return }
        let when = Date(timeIntervalSince1970: TimeInterval(expiresAt / 1_000_000_000)).formatted(.iso8601)
        throw XferError(
            .unauthorized, "this token expired at \(when); get a new one (xfer login, or xfer account new-token)")
    }
}

/// Resolves `Authorization: Bearer TOKEN` to a principal, or answers 401; then takes the
/// request from the token's rate (429 past it, ``TokenLimiter``).
struct AuthMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext
    let metadata: any MetadataStore
    let limiter: TokenLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw XferError(
                .unauthorized,
                "missing token: send Authorization: Bearer TOKEN (xfer reads --token, XFER_TOKEN or the config file)")
        }
        guard let (principal, key) = try await Credentials.authenticate(header, metadata) else {
            throw XferError(.unauthorized, "the token is not valid on this server")
        }
        try limiter.admit(key)
        var context = context
        context.principal = principal
        context.tokenKey = key
        return try await next(request, context)
    }
}
