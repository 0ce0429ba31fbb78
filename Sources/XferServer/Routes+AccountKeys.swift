import Foundation
import Hummingbird
import XferCore
import XferProtocol

/// Sharing end-to-end encrypted containers over /v1 (docs/SHARING.md, "Encrypted containers"):
/// accounts' public keys, and the container key wrapped to a member by the owner. The server
/// keeps and hands these out; it can open none of them.
extension Routes {
    func registerAccountKeys(on v1: RouterGroup<XferRequestContext>) {
        v1.get("account/key", use: scoped(.read, ownAccountKey))
        v1.put("account/key", use: scoped(.manage, setAccountKey))
        v1.get("accounts/:account/key", use: scoped(.read, accountKey))
        v1.put("containers/:container/members/:account/key", use: scoped(.manage, setMemberKey))
    }

    @Sendable func ownAccountKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        return try await Self.json(publicKeyInfo(try AccountName(principal.name)))
    }

    @Sendable func accountKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.json(await publicKeyInfo(try AccountName(context.parameters.get("account") ?? "")))
    }

    /// An account's key is the account's alone: a token of one container cannot set it.
    @Sendable func setAccountKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        guard principal.scope.container == nil else {
            throw XferError(
                .forbidden, "a token of one container cannot set the account's key; use the account's token")
        }
        let body = try await Self.decode(AccountKeyWrite.self, request)
        try await metadata.setAccountKey(
            account: principal.accountID, publicKey: body.publicKey.bytes, replace: body.replace ?? false)
        return try await Self.json(publicKeyInfo(try AccountName(principal.name)))
    }

    @Sendable func setMemberKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let member = try AccountName(context.parameters.get("account") ?? "")
        let body = try await Self.decode(MemberKeyWrite.self, request)
        try await metadata.setMemberKey(
            owner: target.accountID, container: target.container, member: member, wrapped: try body.wrappedBytes(),
            keyID: body.keyID)
        return Self.json(
            MemberList(members: try await metadata.members(owner: target.accountID, container: target.container)))
    }

    private func publicKeyInfo(_ name: AccountName) async throws -> AccountKeyInfo {
        let bytes = try await metadata.accountKey(named: name)
        return AccountKeyInfo(account: name.value, publicKey: try bytes.map { try AccountPublicKey(bytes: $0) })
    }
}
