import Foundation
import XferCore
import XferProtocol

/// The keys of end-to-end encrypted containers on one device (docs/SECURITY.md, "End-to-end
/// encryption"): making a container encrypted, unlocking it with its passphrase, changing the
/// passphrase, and the recovery key. The container key never leaves the device unwrapped; the
/// server keeps it wrapped by the passphrase, with the key's public id.
///
/// A device keeps each unlocked key in its state directory (``ContainerKeyFile``, mode 0600).
public struct EncryptedContainers: Sendable {
    /// The server and container.
    public let remote: Remote

    /// Key management for `remote`'s container.
    public init(remote: Remote) {
        self.remote = remote
    }

    /// What this device knows of the container's encryption.
    public struct Status: Sendable, Hashable, Codable {
        /// Whether the container is end-to-end encrypted.
        public var encrypted: Bool
        /// The container key's id (the server's record), if encrypted.
        public var keyID: String?
        /// Whether this device holds the key (unlocked), and it is the container's.
        public var unlocked: Bool
        /// The key file on this device, if any.
        public var keyFile: String?
    }

    /// The container's encryption and whether this device holds its key.
    /// - Throws: The server's errors.
    public func status() async throws -> Status {
        let info = try await remote.connection.containerKey(container: remote.container)
        let file = remote.containerKeyFile
        let held = try file.read()
        return Status(
            encrypted: info.encrypted, keyID: info.keyID, unlocked: info.encrypted && held?.current.id == info.keyID,
            keyFile: held == nil ? nil : file.path)
    }

    /// Makes the container end-to-end encrypted under a new random key wrapped by `passphrase`,
    /// and keeps the key on this device.
    /// - Parameters:
    ///   - passphrase: What other devices unlock it with.
    ///   - parameters: scrypt's cost.
    /// - Returns: The new key (show its ``ContainerKey/recoveryText`` to the user once).
    /// - Throws: `encrypted_container` if the container already holds plain data,
    ///   `already_exists` if it is encrypted already; nothing is changed then.
    public func create(passphrase: String, parameters: ScryptParameters = .default) async throws -> ContainerKey {
        let key = ContainerKey.generate()
        let wrapped = try ContainerKeyWrap.wrap(
            key, passphrase: passphrase, container: remote.container.name.value, parameters: parameters)
        _ = try await remote.connection.setContainerKey(
            container: remote.container, ContainerKeyWrite(wrapped: wrapped, previous: nil, keyID: key.id))
        try remote.containerKeyFile.write(ContainerKeyRing(single: key))
        return key
    }

    /// Unlocks the container on this device with its passphrase and keeps the key.
    /// - Returns: The key.
    /// - Throws: `unauthorized` for a wrong passphrase, `not_found` if the container is not
    ///   encrypted, `internal` if the server's wrapped key does not match its key id.
    public func unlock(passphrase: String) async throws -> ContainerKey {
        let (wrapped, keyID, links) = try await encryptedKey()
        let key = try ContainerKeyWrap.unwrap(wrapped, passphrase: passphrase, container: remote.container.name.value)
        try Self.check(key, against: keyID)
        try keep(try ring(from: key, links: links))
        return key
    }

    /// Wraps the container's key with a new passphrase. The data is not touched: the key stays.
    /// - Parameters:
    ///   - newPassphrase: The new passphrase.
    ///   - currentPassphrase: The current one, needed if this device does not hold the key.
    ///   - parameters: scrypt's cost.
    /// - Throws: `unauthorized` for a wrong current passphrase, `conflict` if another device
    ///   changed it meanwhile (nothing is changed: unlock again and retry).
    public func changePassphrase(
        to newPassphrase: String, currentPassphrase: String? = nil,
        parameters: ScryptParameters = .default
    ) async throws {
        let (wrapped, keyID, links) = try await encryptedKey()
        let key: ContainerKey
        if let currentPassphrase {
            key = try ContainerKeyWrap.unwrap(
                wrapped, passphrase: currentPassphrase, container: remote.container.name.value)
        } else if let held = try remote.containerKeyFile.read(), held.current.id == keyID {
            key = held.current
        } else {
            throw XferError(
                .unauthorized,
                "this device does not hold the key of container \(remote.container): give the current passphrase, or unlock it first"
            )
        }
        try Self.check(key, against: keyID)
        try await replace(
            wrapped, with: try ring(from: key, links: links), passphrase: newPassphrase, parameters: parameters)
    }

    /// Restores the container's key from its recovery key, sets a new passphrase, and keeps the
    /// key on this device.
    /// - Throws: `invalid_configuration` for a mistyped recovery key, or one of another container.
    public func recover(recoveryText: String, newPassphrase: String, parameters: ScryptParameters = .default)
        async throws -> ContainerKey
    {
        let key = try ContainerKey(recoveryText: recoveryText)
        let (wrapped, keyID, links) = try await encryptedKey()
        guard key.id == keyID else {
            throw XferError(
                .invalidConfiguration,
                "this recovery key is of key \(key.id), and container \(remote.container)'s key is \(keyID); nothing was changed"
            )
        }
        try await replace(
            wrapped, with: try ring(from: key, links: links), passphrase: newPassphrase, parameters: parameters)
        return key
    }

    /// The key this device holds for the container: the newest it knows.
    /// - Throws: `unauthorized` if it holds none (unlock first).
    public func heldKey() throws -> ContainerKey {
        guard let key = try remote.containerKeyFile.read()?.current else {
            throw XferError(
                .unauthorized,
                "this device does not hold the key of container \(remote.container): run `xfer key unlock` first")
        }
        return key
    }

    /// Forgets the key on this device (the container stays encrypted; unlock again to use it).
    /// - Returns: Whether a key was kept.
    public func forget() throws -> Bool {
        try remote.containerKeyFile.remove()
    }

    private func replace(
        _ wrapped: [UInt8], with ring: ContainerKeyRing, passphrase: String, parameters: ScryptParameters
    ) async throws {
        let key = ring.current
        let rewrapped = try ContainerKeyWrap.wrap(
            key, passphrase: passphrase, container: remote.container.name.value, parameters: parameters)
        _ = try await remote.connection.setContainerKey(
            container: remote.container, ContainerKeyWrite(wrapped: rewrapped, previous: wrapped, keyID: key.id))
        try keep(ring)
    }

    /// Keeps `ring` (and a member's checked owner key) on this device, if it carries on the keys
    /// held there: a server that drops old links or answers with older keys loses none of them.
    /// - Throws: `conflict` if it does not, keeping what is held.
    func keep(_ ring: ContainerKeyRing, owner: AccountPublicKey? = nil) throws {
        let file = remote.containerKeyFile
        if let held = try file.read(), !ring.extends(held) {
            throw XferError(
                .conflict,
                """
                the keys the server gives for container \(remote.container) (\(ring)) do not carry on the ones this device \
                holds (\(held)); nothing was kept. If the container was really made again, run `xfer key forget` first
                """)
        }
        try file.write(ring, owner: owner)
    }

    /// The ring whose newest key is `key`, through the server's links.
    func ring(from key: ContainerKey, links: [[UInt8]]) throws -> ContainerKeyRing {
        try ContainerKeyRing.walking(from: key, links: links, container: remote.container.name.value)
    }

    func encryptedKey() async throws -> (wrapped: [UInt8], keyID: String, links: [[UInt8]]) {
        let info = try await remote.connection.containerKey(container: remote.container)
        guard info.encrypted, let wrapped = try info.wrappedBytes(), let keyID = info.keyID else {
            throw XferError(
                .notFound,
                "container \(remote.container) is not end-to-end encrypted (create one with `xfer container create NAME --encrypted`)"
            )
        }
        return (wrapped, keyID, try info.linkBytes())
    }

    /// A key unwrapped or recovered must be the one the server records: a server that sends a
    /// wrapped key of another container's is not believed.
    static func check(_ key: ContainerKey, against keyID: String) throws {
        guard key.id == keyID else {
            throw XferError(
                .internal,
                "the server's wrapped key opens to key \(key.id), but it records key \(keyID) for the container; nothing was kept"
            )
        }
    }
}

/// Where a device keeps an unlocked container key: a file of the user's choosing (`keyFile`,
/// `xfer --key-file`), else `STATE/keys/<hash>.key` in a directory of mode 0700, named by SHA-256
/// of the server and container (one key per container name and server on a device). Either is
/// mode 0600 and refused when others can read it; a key is always checked against the
/// container's key id before use. It holds a comment naming them and the key as its recovery text.
public struct ContainerKeyFile: Sendable {
    /// The file's path.
    public let path: String
    let comment: String
    /// Whether it is the state directory's own (whose directory this makes, mode 0700); a file
    /// of the user's choosing goes in a directory that exists, left as it is.
    let inState: Bool

    /// The key file of `container` on `server`: `keyFile` when given, else the state directory's.
    public init(stateDirectory: String, server: String, container: ContainerName, keyFile: String? = nil) {
        if let keyFile {
            path = keyFile
        } else {
            let name = ChunkID.of(Array("\(server)\n\(container)".utf8)).hex.prefix(32)
            path = "\(stateDirectory)/keys/\(name).key"
        }
        inState = keyFile == nil
        comment = "# xfer container key of \(container) on \(server). Anyone with this file can read the container.\n"
    }

    /// The keys kept, if any (a file of one key, from before rotations, is a ring of one).
    /// - Throws: `invalid_configuration` if the file is readable by others or is not a key.
    public func read() throws -> ContainerKeyRing? { try held()?.ring }

    /// The keys kept and, for a member's container, the owner's public key it checked.
    /// - Throws: `invalid_configuration` if the file is readable by others or does not hold keys.
    public func held() throws -> (ring: ContainerKeyRing, owner: AccountPublicKey?)? {
        guard let data = try FileSystem.readSecret(path, what: "the key file") else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").filter {
            !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace)
        }
        do {
            var keys: [ContainerKey] = []
            var owner: AccountPublicKey?
            for line in lines {
                if line.hasPrefix(Self.ownerPrefix) {
                    guard let bytes = Data(base64Encoded: String(line.dropFirst(Self.ownerPrefix.count))) else {
                        throw XferError(.invalidConfiguration, "not a public key")
                    }
                    owner = try AccountPublicKey(bytes: Array(bytes))
                } else {
                    keys.append(try ContainerKey(recoveryText: String(line)))
                }
            }
            return (try ContainerKeyRing(keys), owner)
        } catch {
            throw XferError(
                .invalidConfiguration, "the key file \(path) does not hold a container key; remove it and unlock again")
        }
    }

    static let ownerPrefix = "owner-key "

    /// Keeps `ring` (newest key first, one line each) and the owner's public key a member
    /// checked, replacing the file atomically.
    /// - Throws: `io` if it cannot be written.
    public func write(_ ring: ContainerKeyRing, owner: AccountPublicKey? = nil) throws {
        var text = comment + ring.keys.map { $0.recoveryText + "\n" }.joined()
        if let owner { text += Self.ownerPrefix + Data(owner.bytes).base64EncodedString() + "\n" }
        try FileSystem.writeSecret(Array(text.utf8), to: path, makingDirectory: inState)
    }

    /// Removes the file. Returns whether there was one.
    public func remove() throws -> Bool {
        switch Syscall.unlink(path) {
        case 0: return true
        case ENOENT: return false
        case let err: throw XferError(.io, "cannot remove the key file \(path)", cause: SystemErrno(err))
        }
    }
}
