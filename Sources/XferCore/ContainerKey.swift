import CCrypto
import Foundation

/// The key of an end-to-end encrypted container (docs/FORMAT.md, "End-to-end keys"): 256
/// random bits that only clients hold. Every key the container's data is protected with is derived from it, one
/// per purpose (``derive(_:count:)``, HKDF-SHA-256), so a key of one purpose reveals nothing of
/// another's. The server keeps it only wrapped by a passphrase (``ContainerKeyWrap``); the user
/// keeps it as a printable recovery key (``recoveryText``).
///
/// The purposes and their labels are listed in docs/FORMAT.md ("End-to-end keys").
public struct ContainerKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Bytes in a container key.
    public static let byteCount = 32

    /// The secret bytes.
    package let bytes: [UInt8]

    /// A key from its 32 bytes.
    /// - Throws: `invalid_configuration` if `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else {
            throw XferError(.invalidConfiguration, "a container key is \(Self.byteCount) bytes, not \(bytes.count)")
        }
        self.bytes = bytes
    }

    /// A new random key (libcrypto's DRBG, seeded by the system).
    public static func generate() -> ContainerKey {
        try! ContainerKey(bytes: Crypto.randomBytes(byteCount))  // exactly 32 bytes: cannot throw
    }

    /// An id that names the key without revealing it: 8 bytes of its derived `key id` key, in
    /// hex. Two devices holding the same container key show the same id.
    public var id: String { derive("key id", count: 8).map { ChunkID.hexDigits($0) }.joined() }

    public var description: String { "ContainerKey(\(id))" }
    public var debugDescription: String { description }

    /// The key of one purpose: HKDF-SHA-256 (RFC 5869) of the container key, no salt, info
    /// `xfer e2e <label> v1`.
    /// - Parameters:
    ///   - label: The purpose (`chunk id`, `gear`, `chunk`, `manifest`, `name`, `kv key`,
    ///     `kv value`, `key id`).
    ///   - count: Bytes wanted, at most 8,160.
    public func derive(_ label: String, count: Int = 32) -> [UInt8] {
        Crypto.hkdf(key: bytes, info: Array("xfer e2e \(label) v1".utf8), count: count)
    }

    /// What content-defined chunking uses in the container: a Gear table and chunk ids both
    /// keyed, so that neither cut points nor ids can be computed without the key.
    public var chunking: KeyedChunking {
        KeyedChunking(gear: KeyedChunking.gearTable(derive("gear", count: 256 * 8)), idKey: derive("chunk id"))
    }

    /// The key chunk payloads are sealed with (in the `XFS1` format; the context binds the
    /// keyed chunk id).
    public var chunkSealing: SealingKeys { Self.sealing(derive("chunk")) }

    /// The key manifests and document metadata are sealed with.
    public var manifestSealing: SealingKeys { Self.sealing(derive("manifest")) }

    /// The key key-value values are sealed with.
    public var valueSealing: SealingKeys { Self.sealing(derive("kv value")) }

    /// What document names are sealed with (``NameSealing``).
    public var names: NameSealing { NameSealing(key: derive("name", count: NameSealing.keySize)) }

    /// A key-value key as the server keeps it: HMAC-SHA-256 under the `kv key` key, in hex, so
    /// equal keys stay equal (last writer wins) without showing the key.
    public func keyValueKey(_ key: String) -> String {
        Sealing.hmac(key: derive("kv key"), Array(key.utf8)).map { ChunkID.hexDigits($0) }.joined()
    }

    private static func sealing(_ bytes: [UInt8]) -> SealingKeys {
        try! SealingKeys([try! SealingKey(bytes: bytes)])  // 32 derived bytes: cannot throw
    }
}

/// Content-defined chunking under a container key: the Gear table and the chunk ids are keyed
/// (``ContainerKey/chunking``).
public struct KeyedChunking: Sendable, Hashable {
    /// The 256 Gear values the chunker rolls with (``Chunker/init(configuration:gear:)``).
    public let gear: [UInt64]
    let idKey: [UInt8]

    /// A chunk's id: HMAC-SHA-256 of its plain bytes under the `chunk id` key.
    public func id(of bytes: UnsafeRawBufferPointer) -> ChunkID {
        ChunkID(bytes: Crypto.hmac(key: idKey, bytes))!
    }

    /// ``id(of:)`` of any bytes.
    public func id(of bytes: some ContiguousBytes) -> ChunkID {
        bytes.withUnsafeBytes { id(of: $0) }
    }

    /// The Gear table from 2,048 derived bytes: entry `i` is bytes `8i..<8i+8`, little-endian.
    static func gearTable(_ bytes: [UInt8]) -> [UInt64] {
        precondition(bytes.count == 256 * 8)
        return (0..<256).map { index in
            bytes[(index * 8)..<(index * 8 + 8)].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
    }
}

/// The primitives end-to-end encryption is built from, on libcrypto.
enum Crypto {
    /// `count` random bytes from libcrypto's DRBG.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { fatalError("RAND_bytes failed: \(CryptoErrors.drain())") }
        return bytes
    }

    /// HMAC-SHA-256 of `message` under `key`.
    static func hmac(key: [UInt8], _ message: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        let done = key.withUnsafeBytes { keyBytes in
            HMAC(
                EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count),
                message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count, &out, &length)
        }
        guard done != nil, length == 32 else { fatalError("HMAC-SHA-256 failed: \(CryptoErrors.drain())") }
        return out
    }

    /// HKDF-SHA-256 (RFC 5869) with an empty salt (32 zero bytes, as the RFC says).
    static func hkdf(key: [UInt8], salt: [UInt8] = [], info: [UInt8], count: Int) -> [UInt8] {
        precondition(count <= 255 * 32, "HKDF-SHA-256 gives at most 8,160 bytes")
        let prk = Sealing.hmac(key: salt.isEmpty ? [UInt8](repeating: 0, count: 32) : salt, key)
        var out: [UInt8] = []
        out.reserveCapacity(count + 32)
        var block: [UInt8] = []
        var counter: UInt8 = 1
        while out.count < count {
            block = Sealing.hmac(key: prk, block + info + [counter])
            out += block
            counter &+= 1
        }
        return Array(out.prefix(count))
    }

    /// scrypt (RFC 7914) from libcrypto, of a passphrase that is not empty.
    static func scrypt(_ passphrase: [UInt8], salt: [UInt8], parameters: ScryptParameters, count: Int) throws -> [UInt8]
    {
        guard !passphrase.isEmpty else { throw XferError(.invalidConfiguration, "the passphrase is empty") }
        var out = [UInt8](repeating: 0, count: count)
        let ok = passphrase.withUnsafeBufferPointer { pass in
            pass.withMemoryRebound(to: CChar.self) { pass in
                EVP_PBE_scrypt(
                    pass.baseAddress!, pass.count, salt, salt.count,
                    parameters.n, UInt64(parameters.r), UInt64(parameters.p),
                    parameters.memory + (1 << 20), &out, count)
            }
        }
        guard ok == 1 else { throw XferError(.crypto, "scrypt failed: \(CryptoErrors.drain())") }
        return out
    }
}
