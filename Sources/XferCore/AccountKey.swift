import CCrypto
import Foundation

/// An account's key pair, X25519 (RFC 7748) from libcrypto: what an end-to-end encrypted
/// container's key is wrapped to when it is shared with the account (docs/SECURITY.md,
/// "Sharing an encrypted container"). The private key stays on the account's devices
/// (``AccountKeyFile`` in XferClient); the server keeps the public key, which the owner of a
/// container checks by its ``AccountPublicKey/fingerprint`` before wrapping a key to it.
public struct AccountKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Bytes in a private key.
    public static let byteCount = 32

    let privateBytes: [UInt8]
    /// The public half, which the server keeps and others wrap keys to.
    public let publicKey: AccountPublicKey

    /// The key pair of a private key's 32 bytes.
    /// - Throws: `invalid_configuration` if `privateKey` is not 32 bytes, or libcrypto refuses it.
    public init(privateKey: [UInt8]) throws {
        guard privateKey.count == Self.byteCount else {
            throw XferError(.invalidConfiguration, "an account key is \(Self.byteCount) bytes, not \(privateKey.count)")
        }
        let pair = try X25519.privateKey(privateKey)
        defer { EVP_PKEY_free(pair) }
        privateBytes = privateKey
        publicKey = try AccountPublicKey(bytes: try X25519.publicBytes(of: pair))
    }

    /// A new key pair from libcrypto's DRBG.
    public static func generate() -> AccountKey {
        try! AccountKey(privateKey: Crypto.randomBytes(byteCount))  // 32 random bytes: X25519 takes any
    }

    public var description: String { "AccountKey(\(publicKey.fingerprint))" }
    public var debugDescription: String { description }

    /// The private key as text a person can keep or carry to another device (the same form as
    /// a recovery key: Crockford's base32 with a check, ``ContainerKey/recoveryText``).
    public var privateText: String { RecoveryText.text(privateBytes) }

    /// The key pair whose private key ``privateText`` printed.
    /// - Throws: `invalid_configuration` for text that is not one, or is mistyped.
    public init(privateText: String) throws {
        try self.init(privateKey: try RecoveryText.bytes(privateText, count: Self.byteCount, what: "an account key"))
    }

    /// `plain` sealed from this account to `recipient`, so that only `recipient`'s private key
    /// opens it and it shows it came from this account (an authenticated box, as HPKE's auth
    /// mode): `XFA1`, a fresh ephemeral public key, then `plain` sealed (`XFS1`) under
    /// HKDF-SHA-256 of two X25519 secrets (ephemeral with recipient, this key with recipient),
    /// with the three public keys as salt and `context` bound in. A server, which can seal a box
    /// to anyone, cannot make one that opens as this account's.
    public func seal(_ plain: [UInt8], context: String, to recipient: AccountPublicKey) throws -> [UInt8] {
        let ephemeral = AccountKey.generate()
        let keys = try Self.boxKeys(
            ephemeral: ephemeral.publicKey, sender: publicKey, recipient: recipient,
            secrets: [try ephemeral.agree(recipient), try agree(recipient)])
        return Self.boxMagic + ephemeral.publicKey.bytes + keys.seal(plain, context: Array(context.utf8))
    }

    /// What `sender` sealed to this key with ``seal(_:context:to:)``.
    /// - Throws: `unauthorized` if it was sealed by another sender, to another key, for another
    ///   context, or damaged; `invalid_configuration` if it is not a sealed box.
    public func open(_ box: [UInt8], context: String, from sender: AccountPublicKey) throws -> [UInt8] {
        guard box.count >= Self.boxOverhead, box.prefix(4).elementsEqual(Self.boxMagic) else {
            throw XferError(.invalidConfiguration, "what the server sent is not a key sealed to an account (XFA1)")
        }
        let ephemeral = try AccountPublicKey(bytes: Array(box[4..<36]))
        let keys = try Self.boxKeys(
            ephemeral: ephemeral, sender: sender, recipient: publicKey,
            secrets: [try agree(ephemeral), try agree(sender)])
        guard let plain = try? keys.open(box[36...], context: Array(context.utf8), what: "the sealed key") else {
            throw XferError(
                .unauthorized,
                "the key sealed to this account does not open: it was not sealed by the account whose key was checked, or not to this one"
            )
        }
        return plain
    }

    static let boxMagic: [UInt8] = Array("XFA1".utf8)
    /// Bytes a sealed box adds to what it seals: the magic, the ephemeral public key, the seal.
    public static let boxOverhead = 4 + 32 + Sealing.overhead

    /// The X25519 secret of this key and `peer`.
    func agree(_ peer: AccountPublicKey) throws -> [UInt8] {
        let pair = try X25519.privateKey(privateBytes)
        defer { EVP_PKEY_free(pair) }
        return try X25519.agree(pair, peer.bytes)
    }

    static func boxKeys(
        ephemeral: AccountPublicKey, sender: AccountPublicKey, recipient: AccountPublicKey, secrets: [[UInt8]]
    ) throws -> SealingKeys {
        let key = Crypto.hkdf(
            key: secrets.flatMap { $0 }, salt: ephemeral.bytes + sender.bytes + recipient.bytes,
            info: Array("xfer account box v1".utf8), count: 32)
        return try SealingKeys([try SealingKey(bytes: key)])
    }
}

/// The public half of an ``AccountKey``: 32 bytes.
public struct AccountPublicKey: Sendable, Hashable, Codable {
    /// Its bytes.
    public let bytes: [UInt8]

    /// A public key from its bytes.
    /// - Throws: `invalid_configuration` if they are not 32 bytes or libcrypto refuses them.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 32 else {
            throw XferError(.invalidConfiguration, "an account's public key is 32 bytes, not \(bytes.count)")
        }
        EVP_PKEY_free(try X25519.publicKey(bytes))
        self.bytes = bytes
    }

    /// What a person compares out of band before trusting the key: 160 bits of SHA-256 of the
    /// key (with a label), in Crockford's base32, 8 groups of 4 (`ABCD-EFGH-…`).
    public var fingerprint: String {
        let digest = ChunkID.of(Array("xfer account key v1".utf8) + bytes).bytes.prefix(20)
        return RecoveryText.grouped(RecoveryText.fiveBits(Array(digest)), every: 4)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let data = Data(base64Encoded: text) else {
            throw XferError(.badRequest, "a public key is base64 of 32 bytes")
        }
        try self.init(bytes: Array(data))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Data(bytes).base64EncodedString())
    }
}

/// X25519 on libcrypto's EVP_PKEY.
enum X25519 {
    static func privateKey(_ bytes: [UInt8]) throws -> OpaquePointer {
        guard let key = EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nil, bytes, bytes.count) else {
            throw XferError(.crypto, "libcrypto refused an X25519 private key: \(CryptoErrors.drain())")
        }
        return key
    }

    static func publicKey(_ bytes: [UInt8]) throws -> OpaquePointer {
        guard let key = EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nil, bytes, bytes.count) else {
            throw XferError(.invalidConfiguration, "not an X25519 public key: \(CryptoErrors.drain())")
        }
        return key
    }

    static func publicBytes(of key: OpaquePointer) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length = out.count
        guard EVP_PKEY_get_raw_public_key(key, &out, &length) == 1, length == 32 else {
            throw XferError(.crypto, "libcrypto gave no X25519 public key: \(CryptoErrors.drain())")
        }
        return out
    }

    /// The shared secret of `pair` and `peer`.
    /// - Throws: `unauthorized` for a peer key of small order (the secret would be all zero).
    static func agree(_ pair: OpaquePointer, _ peer: [UInt8]) throws -> [UInt8] {
        let peerKey = try publicKey(peer)
        defer { EVP_PKEY_free(peerKey) }
        guard let context = EVP_PKEY_CTX_new(pair, nil) else {
            throw XferError(.crypto, "libcrypto: \(CryptoErrors.drain())")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = out.count
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peerKey) == 1,
            EVP_PKEY_derive(context, &out, &length) == 1, length == 32, out.contains(where: { $0 != 0 })
        else {
            _ = CryptoErrors.drain()
            throw XferError(.unauthorized, "the X25519 public key is not one a key can be agreed with")
        }
        return out
    }
}
