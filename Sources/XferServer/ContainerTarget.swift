import XferCore
import XferProtocol

/// The container a request acts on, resolved from the name it gives: whose it is and what the
/// asking account may do in it. The one rule of container access (docs/SHARING.md), which the
/// /v1 routes, the web view and WebDAV all apply (``resolve(_:named:for:store:)``).
public struct ContainerTarget: Sendable, Hashable {
    /// Who asks.
    public var principal: Principal
    /// The owner's account id: whose documents, chunks and quota the request reaches.
    public var accountID: Int64
    /// The container's name in its owner's account.
    public var container: ContainerName
    /// The name as the request gave it (`OWNER/NAME` for a member).
    public var named: ContainerName
    /// What the asking account may do here.
    public var role: ContainerRole

    /// Whether a member (not the owner) asks.
    public var isMember: Bool { role != .owner }

    /// The writing device a version records: the token's (``Principal/device(claimed:)``), and
    /// for a member also its account, so the owner sees who wrote.
    public func device(claimed: String?) -> String? {
        let device = principal.device(claimed: claimed)
        guard isMember else { return device }
        return device.map { "\($0) (\(principal.name))" } ?? principal.name
    }

    /// Resolves `named` for `principal` wanting `access`: its own container for a plain name
    /// (or its own name as owner); another account's only when shared with it, as a role that
    /// allows `access`. `nil` names the principal's own chunks (the chunk routes without a
    /// container).
    /// - Throws: `forbidden` for what the token's scope or the role does not allow;
    ///   `not_found` for a container not shared with the principal (whether or not it exists).
    public static func resolve(
        _ principal: Principal, named: ContainerName?, for access: Principal.Access, store: any MemberStore
    ) async throws -> ContainerTarget {
        try principal.check(access, container: named)
        let name = named ?? .default
        guard let owner = name.owner, owner.value != principal.name else {
            return ContainerTarget(
                principal: principal, accountID: principal.accountID, container: name.name, named: name, role: .owner)
        }
        guard let grant = try await store.grant(member: principal.accountID, owner: owner, container: name.name) else {
            throw XferError(.notFound, "no container \(name) is shared with account \(principal.name)")
        }
        let target = ContainerTarget(
            principal: principal, accountID: grant.owner, container: name.name, named: name, role: grant.role)
        try target.check(access)
        return target
    }

    /// Whether the access still holds: always for the owner; for a member, while the container
    /// stays shared with it (checked again by a request that waits, such as a change feed).
    public func holds(in store: any MemberStore) async throws -> Bool {
        guard isMember, let owner = named.owner else { return true }
        return try await store.grant(member: principal.accountID, owner: owner, container: container) != nil
    }

    /// The error for a member whose access ended while its request waited.
    var ended: XferError {
        XferError(.notFound, "container \(named) is no longer shared with account \(principal.name)")
    }

    /// Throws `forbidden` unless the role allows `access`.
    func check(_ access: Principal.Access) throws {
        switch (access, role) {
        case (.read, _), (_, .owner), (.write, .writer): return
        case (.write, _):
            throw XferError(
                .forbidden,
                "account \(principal.name) reads container \(named) but may not change it; its owner can make it a writer"
            )
        case (.manage, _):
            throw XferError(
                .forbidden,
                "only \(named.owner?.value ?? "its owner"), the owner of \(named), shares it or changes its links and key"
            )
        }
    }
}
