import XferCore
import XferProtocol

/// What sharing an end-to-end encrypted container keeps (docs/SHARING.md, "Encrypted
/// containers"): each account's public key, the container key wrapped to each member, and the
/// links of the container's rotations. The server can open none of it.
public protocol AccountKeyStore: Sendable {
    /// Keeps the account's public key.
    /// - Throws: `conflict` if it has another one and `replace` is false.
    func setAccountKey(account: Int64, publicKey: [UInt8], replace: Bool) async throws
    /// The public key of the account named `name`, `nil` if it has none.
    /// - Throws: `not_found` for no such account.
    func accountKey(named name: AccountName) async throws -> [UInt8]?
    /// Keeps the owner's container key wrapped to `member`, a member of the container.
    /// - Throws: `not_found` if the container is not shared with `member`; `conflict` if
    ///   `keyID` is not the container's current key (it was rotated meanwhile) or it is plain.
    func setMemberKey(owner: Int64, container: ContainerName, member: AccountName, wrapped: [UInt8], keyID: String)
        async throws
    /// The key wrapped to member account `member`, and its id; `nil` if none.
    func memberKey(owner: Int64, container: ContainerName, member: Int64) async throws -> (
        wrapped: [UInt8], keyID: String
    )?
    /// The links of the container's rotations, newest first.
    func containerKeyLinks(account: Int64, container: ContainerName) async throws -> [[UInt8]]
    /// Rotates the container key: the new key wrapped by the passphrase (`wrapped`, replacing
    /// `previous`), its id, the link sealing the old key under it, and the new key wrapped to
    /// each member that is to keep reading (the others' wrapped keys are dropped).
    /// - Throws: `conflict` if the wrapped key kept is not `previous` or `keyID` is the current
    ///   key's; `not_found` if the container is plain, or an account in `memberKeys` is not a member.
    func rotateContainerKey(
        account: Int64, container: ContainerName, wrapped: [UInt8], previous: [UInt8], keyID: String, link: [UInt8],
        memberKeys: [AccountName: [UInt8]]
    ) async throws
}
