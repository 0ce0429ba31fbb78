import XferCore
import XferProtocol

/// Who else a container is shared with (docs/SHARING.md): the rows the one access rule
/// (``ContainerTarget``) reads.
public protocol MemberStore: Sendable {
    /// Shares the owner's container with `member` as `role`, or changes its role; the
    /// container is made if it does not exist yet (an empty folder can be shared).
    /// - Throws: `not_found` for no such account; `bad_request` for the owner itself.
    func setMember(owner: Int64, container: ContainerName, member: AccountName, role: ContainerRole) async throws
        -> MemberInfo
    /// Ends `member`'s access to the container; `false` if it had none.
    func removeMember(owner: Int64, container: ContainerName, member: AccountName) async throws -> Bool
    /// The container's members by account name (empty for a container that does not exist).
    func members(owner: Int64, container: ContainerName) async throws -> [MemberInfo]
    /// What `member` may do in `owner`'s container: the owner's account id and the member's
    /// role; `nil` if it is not shared with `member` (or either does not exist).
    func grant(member: Int64, owner: AccountName, container: ContainerName) async throws
        -> (owner: Int64, role: ContainerRole)?
    /// The account's own containers by name, then those shared with it by `OWNER/NAME`.
    func containerList(account: Int64) async throws -> [ContainerEntry]
}
