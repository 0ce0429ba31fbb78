import Foundation
import XferCore
import XferProtocol

/// An account's key pair on this device (docs/SHARING.md, "Encrypted containers"): made on the
/// first device that needs it, its public half put on the server, its private half kept in the
/// state directory (``AccountKeyFile``, mode 0600) and carried to the account's other devices by
/// `xfer account key export` and `import`. Also the public keys of other accounts this device
/// checked by fingerprint (``pinned(_:)``): a key the server later hands out for them is
/// believed only if it is the same.
public struct AccountKeys: Sendable {
    /// The server.
    public let connection: ServerConnection
    /// Where keys are kept.
    public let stateDirectory: String

    /// The account keys of `connection`'s account on this device.
    public init(connection: ServerConnection, stateDirectory: String) {
        self.connection = connection
        self.stateDirectory = stateDirectory
    }

    /// The account's key as the server and this device know it.
    public struct Status: Sendable, Hashable, Codable {
        /// The account.
        public var account: String
        /// The fingerprint of the public key the server keeps (computed here), if any.
        public var fingerprint: String?
        /// Whether this device holds the private key of that public key.
        public var held: Bool
        /// The key file on this device.
        public var keyFile: String
    }

    /// What the server keeps for the account and whether this device holds the private key.
    public func status() async throws -> Status {
        let info = try await connection.ownAccountKey()
        let file = try self.file(try AccountName(info.account))
        let held = try file.read()
        return Status(
            account: info.account, fingerprint: info.publicKey?.fingerprint,
            held: held != nil && held?.publicKey == info.publicKey, keyFile: file.path)
    }

    /// The account's key pair on this device: the one it holds (put on the server if the server
    /// has none), else a new one, unless the server keeps another made elsewhere.
    /// - Parameter replace: Replace the server's public key with a new pair even so (keys
    ///   wrapped to the old one stop opening on every device).
    /// - Returns: The pair and whether it was made now.
    /// - Throws: `conflict` if the account has a key made on another device and `replace` is false.
    public func create(replace: Bool = false) async throws -> (key: AccountKey, made: Bool) {
        let info = try await connection.ownAccountKey()
        let file = try self.file(try AccountName(info.account))
        if let held = try file.read(), !replace || held.publicKey == info.publicKey {
            if info.publicKey != held.publicKey {
                _ = try await connection.setAccountKey(held.publicKey, replace: false)
            }
            return (held, false)
        }
        guard info.publicKey == nil || replace else {
            throw XferError(
                .conflict,
                """
                account \(info.account) has a key made on another device (\(info.publicKey!.fingerprint)); carry it here with \
                `xfer account key export` there and `xfer account key import` here, or make a new one with --replace \
                (keys wrapped to the old one stop opening)
                """)
        }
        let key = AccountKey.generate()
        _ = try await connection.setAccountKey(key.publicKey, replace: replace)
        try file.write(key)
        return (key, true)
    }

    /// Keeps the private key `text` (from `xfer account key export`) on this device.
    /// - Throws: `invalid_configuration` for text that is not a key; `conflict` if it is not the
    ///   account's key on the server and `replace` is false.
    public func importKey(_ text: String, replace: Bool = false) async throws -> AccountKey {
        let key = try AccountKey(privateText: text)
        let info = try await connection.ownAccountKey()
        if info.publicKey != key.publicKey {
            _ = try await connection.setAccountKey(key.publicKey, replace: replace)
        }
        try file(try AccountName(info.account)).write(key)
        return key
    }

    /// The pair this device holds for the account, checked against the server's public key.
    /// - Throws: `unauthorized` if it holds none, or another than the server's.
    public func held() async throws -> (account: AccountName, key: AccountKey) {
        let info = try await connection.ownAccountKey()
        let account = try AccountName(info.account)
        guard let key = try file(account).read(), key.publicKey == info.publicKey else {
            throw XferError(
                .unauthorized,
                """
                this device does not hold account \(account)'s key; run `xfer account key` (or import it from the device \
                that made it with `xfer account key import`)
                """)
        }
        return (account, key)
    }

    /// The key file of `account` on this server.
    public func file(_ account: AccountName) throws -> AccountKeyFile {
        let name = ChunkID.of(Array("\(connection.server)\n\(account.value)".utf8)).hex.prefix(32)
        return AccountKeyFile(
            path: "\(stateDirectory)/account-keys/\(name).key",
            comment:
                "# xfer account key of \(account) on \(connection.server). Anyone with this file can open what is shared with it.\n"
        )
    }

    // MARK: Checked keys of other accounts

    /// The public key of `account` this device checked by fingerprint, if any.
    public func pinned(_ account: AccountName) throws -> AccountPublicKey? {
        try pins()[account.value].flatMap { Data(base64Encoded: $0) }.map { try AccountPublicKey(bytes: Array($0)) }
    }

    /// Records that `key` is `account`'s, as checked by its fingerprint.
    public func pin(_ account: AccountName, _ key: AccountPublicKey) throws {
        var all = try pins()
        all[account.value] = Data(key.bytes).base64EncodedString()
        try FileSystem.writeSecret(
            WireJSON.encode(all.sorted { $0.key < $1.key }.map { [$0.key, $0.value] }), to: pinsPath)
    }

    private var pinsPath: String {
        "\(stateDirectory)/account-keys/\(ChunkID.of(Array(connection.server.utf8)).hex.prefix(32)).checked"
    }

    private func pins() throws -> [String: String] {
        guard let data = FileManager.default.contents(atPath: pinsPath) else { return [:] }
        guard let pairs = try? WireJSON.decode([[String]].self, from: Array(data)), pairs.allSatisfy({ $0.count == 2 })
        else {
            throw XferError(
                .invalidConfiguration, "\(pinsPath) is damaged; remove it and check the members' keys again")
        }
        return Dictionary(pairs.map { ($0[0], $0[1]) }, uniquingKeysWith: { $1 })
    }
}

/// Where a device keeps an account's private key: mode 0600 in a directory of mode 0700, as
/// Crockford base32 text with a check (``AccountKey/privateText``).
public struct AccountKeyFile: Sendable {
    /// The file's path.
    public let path: String
    let comment: String

    /// The pair kept, if any.
    /// - Throws: `invalid_configuration` if the file is readable by others or is not a key.
    public func read() throws -> AccountKey? {
        guard let data = try FileSystem.readSecret(path, what: "the account key file") else { return nil }
        let text = String(decoding: data, as: UTF8.self).split(separator: "\n").filter { !$0.hasPrefix("#") }.joined()
        do {
            return try AccountKey(privateText: text)
        } catch {
            throw XferError(
                .invalidConfiguration, "\(path) does not hold an account key; remove it and import the key again")
        }
    }

    /// Keeps `key`, replacing the file atomically.
    public func write(_ key: AccountKey) throws {
        try FileSystem.writeSecret(Array((comment + key.privateText + "\n").utf8), to: path)
    }
}
