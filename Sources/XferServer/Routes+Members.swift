import Foundation
import Hummingbird
import XferCore
import XferProtocol

/// Containers shared with other accounts over /v1 (docs/SHARING.md): the account's containers
/// and those shared with it; a container's members, added, changed and removed by its owner.
extension Routes {
    func registerMembers(on v1: RouterGroup<XferRequestContext>) {
        v1.get("containers", use: scoped(.read, containerList))
        v1.get("containers/:container/members", use: scoped(.read, memberList))
        v1.put("containers/:container/members/:account", use: scoped(.manage, setMember))
        // The owner removes anyone; a member may leave (``removeMember(_:context:)``).
        v1.delete("containers/:container/members/:account", use: scoped(.read, removeMember))
    }

    @Sendable func containerList(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        // A token of one container sees only that one.
        let all = try await metadata.containerList(account: principal.accountID)
        return Self.json(
            ContainerList(containers: all.filter { principal.scope.container ?? $0.container == $0.container }))
    }

    @Sendable func memberList(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        return Self.json(
            MemberList(members: try await metadata.members(owner: target.accountID, container: target.container)))
    }

    @Sendable func setMember(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let member = try Self.memberName(context)
        let body = try await Self.decode(MemberWrite.self, request)
        return Self.json(
            try await metadata.setMember(
                owner: target.accountID, container: target.container, member: member, role: body.role))
    }

    /// The owner removes a member; a member removes itself (leaves). Either way the member's
    /// access ends with this answer, and its waiting feeds are answered (``ContainerTarget/holds(in:)``).
    @Sendable func removeMember(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let member = try Self.memberName(context)
        if target.isMember && member.value != target.principal.name {
            try target.check(.manage)
        }
        guard try await metadata.removeMember(owner: target.accountID, container: target.container, member: member)
        else {
            throw XferError(.notFound, "container \(target.named) is not shared with account \(member)")
        }
        changes.notify(account: target.accountID, container: target.container)
        return Response(status: .noContent)
    }

    private static func memberName(_ context: XferRequestContext) throws -> AccountName {
        try AccountName(context.parameters.get("account") ?? "")
    }
}
