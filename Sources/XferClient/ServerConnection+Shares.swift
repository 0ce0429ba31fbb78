import Foundation
import XferCore
import XferProtocol

/// Share links (docs/PROTOCOL.md, Share links): read-only links to one document, opened by
/// anyone who has them at the server's `/s/…`.
extension ServerConnection {
    /// Makes a link; its answer alone holds the link's address (the secret is shown once).
    public func createShare(container: ContainerName, _ request: ShareCreateRequest) async throws -> ShareInfo {
        let info = try await json(
            ShareInfo.self, "POST", "/v1/containers/\(container.pathSegment)/shares", body: WireJSON.encode(request))
        guard info.url != nil else {
            throw XferError(.internal, "the server made a share link and did not say its address")
        }
        return info
    }

    /// The account's links in `container`, newest first (expired ones too).
    public func shares(container: ContainerName) async throws -> [ShareInfo] {
        try await json(ShareList.self, "GET", "/v1/containers/\(container.pathSegment)/shares").shares
    }

    /// Ends link `id`.
    /// - Throws: `not_found` if the container has no such link of this account.
    public func revokeShare(container: ContainerName, id: Int64) async throws {
        _ = try await send("DELETE", "/v1/containers/\(container.pathSegment)/shares/\(id)")
    }
}
