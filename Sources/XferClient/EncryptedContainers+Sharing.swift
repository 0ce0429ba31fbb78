import Foundation
import XferCore
import XferProtocol

/// Sharing an end-to-end encrypted container (docs/SHARING.md, "Encrypted containers"): the
/// owner wraps the container's key to each member's account key, from its own account key, so
/// that neither the server nor anyone posing as the owner can hand a member another key; a
/// member unlocks with its account key once it has checked the owner's fingerprint; removing a
/// member rotates the key (``rotate(passphrase:accounts:)``).
extension EncryptedContainers {
    /// What a member's wrapped key is bound to: the container (`OWNER/NAME`) and the member.
    static func memberContext(owner: AccountName, container: ContainerName, member: AccountName) -> String {
        "xfer member key v1 \(owner.value)/\(container.name.value) \(member.value)"
    }

    /// A member's public key as the server gives it, and whether this device checked it before.
    public struct MemberKey: Sendable, Hashable {
        /// The member.
        public var account: AccountName
        /// Its public key; `nil` if it has made none yet.
        public var key: AccountPublicKey?
        /// Whether this device checked this very key by fingerprint before.
        public var checked: Bool
    }

    /// `member`'s public key, and whether this device checked it before.
    public func memberKey(_ member: AccountName, accounts: AccountKeys) async throws -> MemberKey {
        let key = try await remote.connection.accountKey(member).publicKey
        let checked = try key != nil && accounts.pinned(member) == key
        return MemberKey(account: member, key: key, checked: checked)
    }

    /// Wraps the container's current key to `member`'s public key `key`, which the user checked
    /// by its fingerprint (it is recorded as checked), from this account's key (made if this
    /// device has none).
    /// - Throws: `unauthorized` if this device does not hold the container's current key;
    ///   `not_found` if the container is not shared with `member`.
    public func wrap(for member: AccountName, key: AccountPublicKey, accounts: AccountKeys) async throws -> [MemberInfo]
    {
        let (_, keyID, _) = try await encryptedKey()
        guard let ring = try remote.containerKeyFile.read(), ring.current.id == keyID else {
            throw XferError(
                .unauthorized,
                "this device does not hold the current key of container \(remote.container); run `xfer key unlock` first"
            )
        }
        let (owner, sender) = try await ownAccount(accounts)
        try accounts.pin(member, key)
        let wrapped = try sender.seal(
            ring.current.bytes, context: Self.memberContext(owner: owner, container: remote.container, member: member),
            to: key)
        return try await remote.connection.setMemberKey(
            container: remote.container, account: member, MemberKeyWrite(wrapped: wrapped, keyID: keyID))
    }

    /// Unlocks a container shared with this account with the key its owner wrapped to it.
    /// - Parameter confirm: Shown the owner's public key unless this device checked it before;
    ///   returns whether the user confirmed its fingerprint.
    /// - Throws: `not_found` if the owner has not wrapped the key to this account yet;
    ///   `unauthorized` if this device lacks the account's key or the user did not confirm.
    public func unlockAsMember(confirm: (AccountName, AccountPublicKey) throws -> Bool, accounts: AccountKeys)
        async throws -> ContainerKeyRing
    {
        guard let owner = remote.container.owner else {
            throw XferError(.badRequest, "\(remote.container) is yours: unlock it with its passphrase")
        }
        let (member, accountKey) = try await accounts.held()
        guard let ownerKey = try await remote.connection.accountKey(owner).publicKey else {
            throw XferError(.notFound, "\(owner) has no account key, so it cannot have shared the container's key")
        }
        if try accounts.pinned(owner) != ownerKey {
            guard try confirm(owner, ownerKey) else {
                throw XferError(.unauthorized, "\(owner)'s fingerprint was not confirmed; nothing was kept")
            }
            try accounts.pin(owner, ownerKey)
        }
        let info = try await remote.connection.containerKey(container: remote.container)
        let ring = try memberRing(info, account: member, key: accountKey, owner: owner, ownerKey: ownerKey)
        try keep(ring, owner: ownerKey)
        return ring
    }

    /// A member's keys after its owner rotated them: the new key wrapped to this account, from
    /// the owner's key this device checked when it first unlocked, walked back to the keys
    /// held. `nil` where that does not apply (not a member's container, no keys held, none wrapped).
    func refreshedAsMember(held: ContainerKeyRing?, info: ContainerKeyInfo) async throws -> ContainerKeyRing? {
        guard let owner = remote.container.owner, held != nil, info.memberWrapped != nil,
            let (ring, ownerKey) = try remote.containerKeyFile.held(), let ownerKey
        else { return nil }
        let accounts = AccountKeys(connection: remote.connection, stateDirectory: remote.stateDirectory)
        let (member, accountKey) = try await accounts.held()
        let refreshed = try memberRing(info, account: member, key: accountKey, owner: owner, ownerKey: ownerKey)
        guard refreshed.extends(ring) else {
            throw XferError(
                .unauthorized,
                "the server's new key of \(remote.container) does not lead back to the keys this device holds; nothing was kept"
            )
        }
        try remote.containerKeyFile.write(refreshed, owner: ownerKey)
        return refreshed
    }

    private func memberRing(
        _ info: ContainerKeyInfo, account: AccountName, key: AccountKey, owner: AccountName, ownerKey: AccountPublicKey
    ) throws -> ContainerKeyRing {
        guard info.encrypted, let keyID = info.keyID else {
            throw XferError(.notFound, "container \(remote.container) is not end-to-end encrypted")
        }
        guard let wrapped = try info.memberWrappedBytes() else {
            throw XferError(
                .notFound,
                "\(owner) has not given this account the key of \(remote.container) yet: ask them to run `xfer container share \(remote.container.name) \(account)` again"
            )
        }
        let context = Self.memberContext(owner: owner, container: remote.container, member: account)
        let current = try ContainerKey(bytes: try key.open(wrapped, context: context, from: ownerKey))
        try Self.check(current, against: keyID)
        return try ring(from: current, links: try info.linkBytes())
    }

    /// This account's name and key pair, made on this device if the account has none.
    func ownAccount(_ accounts: AccountKeys) async throws -> (AccountName, AccountKey) {
        _ = try await accounts.create()
        return try await accounts.held()
    }
}
