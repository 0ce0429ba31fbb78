import Foundation
import XferCore
import XferProtocol

/// Rotating an end-to-end encrypted container's key (docs/SHARING.md, "Removing a member"):
/// what is written after a member leaves is sealed under a key that member never had.
extension EncryptedContainers {
    /// What a rotation did.
    public struct Rotation: Sendable, Hashable, Codable {
        /// The new key's id.
        public var keyID: String
        /// How many keys the container has had, the new one included.
        public var generation: Int
        /// The members the new key was wrapped to.
        public var rewrapped: [String]
        /// The members it was not wrapped to, and why: they read nothing new until the owner
        /// shares the container with them again.
        public var waiting: [String: String]
        /// The new key's recovery key: the one to keep from now on (an older one recovers no
        /// data written after this rotation).
        public var recoveryKey: String
    }

    /// Checks `passphrase` against the container's wrapped key, changing nothing: a rotation
    /// asks for it before a member is removed, so a mistyped one stops nothing halfway.
    /// - Throws: `unauthorized` for a wrong passphrase; `not_found` for a plain container.
    public func checkPassphrase(_ passphrase: String) async throws {
        let (wrapped, keyID, _) = try await encryptedKey()
        try Self.check(
            try ContainerKeyWrap.unwrap(wrapped, passphrase: passphrase, container: remote.container.name.value),
            against: keyID)
    }

    /// Gives the container a new key for what is written from now on: wrapped by `passphrase`
    /// (the current one, checked), linked to the keys before it so that everything stays
    /// readable, and wrapped to each member whose account key this device checked.
    /// - Throws: `unauthorized` for a wrong passphrase; `conflict` if another device changed the
    ///   key meanwhile (nothing is changed: run it again).
    public func rotate(passphrase: String, accounts: AccountKeys, parameters: ScryptParameters = .default)
        async throws -> Rotation
    {
        let (wrapped, keyID, links) = try await encryptedKey()
        let current = try ContainerKeyWrap.unwrap(
            wrapped, passphrase: passphrase, container: remote.container.name.value)
        try Self.check(current, against: keyID)
        let walked = try ring(from: current, links: links)
        if let held = try remote.containerKeyFile.read(), !walked.extends(held) {
            throw XferError(
                .conflict,
                "the server's keys of container \(remote.container) do not carry on the ones this device holds; nothing was changed"
            )
        }
        let (rotated, link) = walked.rotated(container: remote.container.name.value)
        let (sealed, waiting) = try await memberKeys(for: rotated.current, accounts: accounts)
        let rewrapped = try ContainerKeyWrap.wrap(
            rotated.current, passphrase: passphrase, container: remote.container.name.value, parameters: parameters)
        _ = try await remote.connection.setContainerKey(
            container: remote.container,
            ContainerKeyWrite(
                wrapped: rewrapped, previous: wrapped, keyID: rotated.current.id, link: link,
                memberKeys: Dictionary(uniqueKeysWithValues: sealed.map { ($0.key.value, $0.value) })))
        try remote.containerKeyFile.write(rotated)
        return Rotation(
            keyID: rotated.current.id, generation: rotated.generation, rewrapped: sealed.keys.map(\.value).sorted(),
            waiting: waiting, recoveryKey: rotated.current.recoveryText)
    }

    /// `key` wrapped to every member whose public key this device checked; the others, and why not.
    private func memberKeys(for key: ContainerKey, accounts: AccountKeys) async throws -> (
        [AccountName: [UInt8]], [String: String]
    ) {
        var checked: [(AccountName, AccountPublicKey)] = []
        var waiting: [String: String] = [:]
        for member in try await remote.connection.members(container: remote.container) {
            let found = try await memberKey(try AccountName(member.account), accounts: accounts)
            if let publicKey = found.key, found.checked {
                checked.append((found.account, publicKey))
            } else {
                waiting[member.account] =
                    found.key == nil ? "it has no account key yet" : "its account key was not checked on this device"
            }
        }
        guard !checked.isEmpty else { return ([:], waiting) }
        let (owner, sender) = try await ownAccount(accounts)
        var sealed: [AccountName: [UInt8]] = [:]
        for (member, publicKey) in checked {
            sealed[member] = try sender.seal(
                key.bytes, context: Self.memberContext(owner: owner, container: remote.container, member: member),
                to: publicKey)
        }
        return (sealed, waiting)
    }
}
