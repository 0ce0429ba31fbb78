import Foundation
import Hummingbird
import XferCore
import XferProtocol

/// Share links over /v1 (docs/PROTOCOL.md): made, listed and revoked for one container with the
/// account's token, by the rules the web view follows (``ShareLinks``); opened at `/s/SECRET`,
/// which the web view serves.
extension Routes {
    func registerShares(on v1: RouterGroup<XferRequestContext>) {
        // Making a link hands the document to whoever holds it: the owner's to do, with a
        // token that may write.
        v1.post("containers/:container/shares", use: scoped(.manage, createShare))
        v1.get("containers/:container/shares", use: scoped(.manage, listShares))
        v1.delete("containers/:container/shares/:id", use: scoped(.manage, revokeShare))
    }

    @Sendable func createShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard limits.features.contains(.web) else {
            throw XferError(
                .notFound, "this server serves no web view (started without the web feature), so no link would open")
        }
        let principal = try context.requireAccount()
        let body = try await Self.decode(ShareCreateRequest.self, request)
        let seconds = body.expiresIn ?? 7 * 86_400
        let (link, secret) = try await ShareLinks(metadata: metadata, passwords: passwords).make(
            for: principal, container: try context.requireTarget().container, path: body.path, version: body.version,
            lifetime: seconds == 0 ? nil : seconds * 1_000_000_000, password: body.password)
        var made = link
        made.url = ShareLinks.url(request, secret: secret, secure: limits.secureCookies)
        return Self.json(made, status: .created)
    }

    @Sendable func listShares(_ request: Request, context: XferRequestContext) async throws -> Response {
        Self.json(ShareList(shares: try await containerShares(context)))
    }

    @Sendable func revokeShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard let id = context.parameters.get("id").flatMap({ Int64($0) }) else {
            throw XferError(.badRequest, "a share link's id is a number (xfer share list shows them)")
        }
        let account = try context.requireAccount().accountID
        // Only a link of this container: a token of one container ends no other's links.
        guard try await containerShares(context).contains(where: { $0.id == id }),
            try await metadata.revokeShare(account: account, id: id)
        else { throw XferError(.notFound, "no share link \(id) in container \(try context.requireTarget().named)") }
        return Response(status: .noContent)
    }

    /// The account's links in the container the request names, newest first.
    private func containerShares(_ context: XferRequestContext) async throws -> [ShareLink] {
        let container = try context.requireTarget().container
        return try await metadata.shares(account: context.requireAccount().accountID)
            .filter { $0.container == container.value }
    }
}
