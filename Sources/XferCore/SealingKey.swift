import CCrypto
import Foundation

/// The id of a ``SealingKey``: 8 bytes derived from the key (HMAC-SHA-256 under the key of a
/// fixed label), written into everything sealed with it so that the key that opens it is found
/// without trying each one, and so that a server knows which keys its data needs.
public struct SealingKeyID: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The 8 bytes, big-endian.
    public let value: UInt64

    /// An id from its 8 bytes.
    public init(_ value: UInt64) { self.value = value }

    /// An id from its 16 hex digits.
    public init?(hex: some StringProtocol) {
        guard hex.utf8.count == 16, let value = UInt64(hex, radix: 16) else { return nil }
        self.value = value
    }

    /// 16 lowercase hex digits.
    public var description: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    public static func < (lhs: SealingKeyID, rhs: SealingKeyID) -> Bool { lhs.value < rhs.value }
}

/// A 256-bit secret key that seals data at rest (``SealingKeys``). Its text form, in a key
/// file or an environment variable, is 64 hex digits; printed, it shows only its id.
public struct SealingKey: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// Bytes in a key.
    public static let byteCount = 32

    /// The secret bytes.
    let bytes: [UInt8]
    /// The key's id.
    public let id: SealingKeyID

    /// A key from its 32 bytes.
    /// - Throws: `invalid_configuration` if `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == Self.byteCount else {
            throw XferError(
                .invalidConfiguration,
                "an encryption key is \(Self.byteCount) bytes (64 hex digits), not \(bytes.count)")
        }
        self.bytes = bytes
        let mac = Sealing.hmac(key: bytes, Sealing.keyIDLabel)
        id = SealingKeyID(mac.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// A new random key (from the system's random source).
    public static func generate() -> SealingKey {
        var generator = SystemRandomNumberGenerator()
        // The bytes are exactly 32, so the init cannot throw.
        return try! SealingKey(bytes: (0..<byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    public var description: String { "SealingKey(\(id))" }
    public var debugDescription: String { description }

    /// The 64 hex digits a key file holds.
    public var hex: String { bytes.map { ChunkID.hexDigits($0) }.joined() }

    /// The name under which a chunk sealed with this key is kept where a plain store keeps its
    /// id (a pack entry's first 32 bytes): HMAC-SHA-256 of the id, so the store names no chunk
    /// by the SHA-256 of its plain bytes.
    public func name(of id: ChunkID) -> ChunkID {
        let mac = id.withUnsafeBytes { Sealing.hmac(key: bytes, Sealing.chunkNameLabel + Array($0)) }
        return ChunkID(bytes: mac)!
    }
}

/// The keys data at rest is sealed with: the current key seals everything new, and every key
/// opens what it sealed, so a key is rotated by putting a new one first and keeping the old
/// ones for as long as data sealed with them is kept.
///
/// A sealed value (docs/FORMAT.md, "Sealed values") is `XFS1`, the key's id (8 bytes), a random
/// salt (16 bytes), the AES-256-GCM ciphertext, and its 16-byte tag. Each value is sealed under
/// its own key, HMAC-SHA-256 of the salt under the sealing key, so the GCM nonce (all zero) is
/// never used twice with one key however many values a server seals. The caller's context
/// (what the value is: a chunk and its id, the manifest of one version, a key-value entry) is the
/// associated data: a value moved to another place does not open there. Sealing gives
/// confidentiality against whoever can read the store; a plain value (kept from before there
/// were keys) is taken as it is.
public struct SealingKeys: Sendable {
    /// The key new values are sealed with.
    public let current: SealingKey
    /// Every key, the current one included, by id.
    public let byID: [SealingKeyID: SealingKey]

    /// Keys with `keys[0]` current.
    /// - Throws: `invalid_configuration` if `keys` is empty.
    public init(_ keys: [SealingKey]) throws {
        guard let first = keys.first else {
            throw XferError(.invalidConfiguration, "no encryption key given")
        }
        current = first
        byID = Dictionary(keys.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The same keys with `id`'s current.
    public func makingCurrent(_ id: SealingKeyID) throws -> SealingKeys {
        guard let key = byID[id] else { throw XferError(.invalidConfiguration, "no encryption key \(id) was given") }
        return try SealingKeys([key] + byID.values.filter { $0.id != id })
    }

    /// The ids of every key, sorted.
    public var ids: [SealingKeyID] { byID.keys.sorted() }

    /// Seals `plain` with the current key.
    /// - Parameters:
    ///   - plain: The value.
    ///   - context: What the value is; ``open(_:context:what:)`` must be given the same.
    /// - Returns: The sealed value, ``Sealing/overhead`` bytes longer than `plain`.
    public func seal(_ plain: some ContiguousBytes, context: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        seal(plain, context: context, appendingTo: &out)
        return out
    }

    /// Seals `plain` with the current key onto the end of `out` (a pack being built), without a
    /// copy of its own.
    public func seal(_ plain: some ContiguousBytes, context: [UInt8], appendingTo out: inout [UInt8]) {
        // libcrypto's DRBG: one call, no system call per byte.
        let salt = Crypto.randomBytes(Sealing.saltSize)
        plain.withUnsafeBytes { Sealing.seal($0, key: current, salt: salt, context: context, appendingTo: &out) }
    }

    /// Opens a value sealed by ``seal(_:context:)`` with any of these keys.
    /// - Parameters:
    ///   - sealed: The sealed value.
    ///   - context: The context it was sealed with.
    ///   - what: What the value is, for errors ("chunk 1a2b…", "the manifest of …").
    /// - Returns: The plain value.
    /// - Throws: `invalid_configuration` if the key that sealed it is not among these;
    ///   `corrupt_chunk` if it is not a sealed value or fails its tag (damaged, or moved from
    ///   another place).
    public func open(_ sealed: ArraySlice<UInt8>, context: [UInt8], what: String) throws -> [UInt8] {
        guard Sealing.isSealed(sealed) else {
            throw XferError(.corruptChunk, "\(what) is not a sealed value")
        }
        let keyID = Sealing.keyID(of: sealed)!
        guard let key = byID[keyID] else {
            throw XferError(
                .internal,
                "\(what) is sealed with encryption key \(keyID), which this process was not given; pass every key still in use (--encryption-key, XFER_ENCRYPTION_KEY)"
            )
        }
        guard let plain = sealed.withUnsafeBytes({ Sealing.open($0, key: key, context: context) }) else {
            throw XferError(
                .corruptChunk, "\(what) fails its authentication tag: it is damaged, or is not what was sealed there")
        }
        return plain
    }

    /// ``open(_:context:what:)`` of a whole array.
    public func open(_ sealed: [UInt8], context: [UInt8], what: String) throws -> [UInt8] {
        try open(sealed[...], context: context, what: what)
    }

    /// Opens `stored` if it is sealed, and returns it as it is if not (data kept before the
    /// server was given keys stays readable).
    public static func openIfSealed(_ stored: ArraySlice<UInt8>, keys: SealingKeys?, context: [UInt8], what: String)
        throws -> ArraySlice<UInt8>
    {
        guard Sealing.isSealed(stored) else { return stored }
        guard let keys else {
            let id = Sealing.keyID(of: stored).map { " \($0)" } ?? ""
            throw XferError(
                .internal,
                "\(what) is sealed with encryption key\(id), and this process was given no key; pass it with --encryption-key FILE or XFER_ENCRYPTION_KEY"
            )
        }
        return try keys.open(stored, context: context, what: what)[...]
    }

    // MARK: Key text

    /// The keys in a key file's text: 64 hex digits a line, the first the current key; blank
    /// lines and lines starting with `#` are skipped.
    /// - Parameter source: Where the text is from, for errors.
    /// - Throws: `invalid_configuration` naming the line that is not a key, or if there is none.
    public static func parse(_ text: String, source: String) throws -> [SealingKey] {
        var keys: [SealingKey] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            for word in trimmed.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "\t" }) {
                guard let bytes = Sealing.hexBytes(word), bytes.count == SealingKey.byteCount else {
                    throw XferError(
                        .invalidConfiguration,
                        "\(source), line \(number + 1): an encryption key is 64 hex digits (make one with `xfer server-key new FILE`)"
                    )
                }
                keys.append(try SealingKey(bytes: bytes))
            }
        }
        guard !keys.isEmpty else {
            throw XferError(.invalidConfiguration, "\(source) holds no encryption key (64 hex digits a line)")
        }
        return keys
    }

    /// The keys of the given key files, in order, then those of `environment` (the value of
    /// `XFER_ENCRYPTION_KEY`); `nil` if there are none.
    /// - Throws: `invalid_configuration` if a file cannot be read, is readable by other users,
    ///   or holds something that is not a key.
    public static func load(files: [String], environment: String?) throws -> SealingKeys? {
        var keys: [SealingKey] = []
        for file in files {
            guard let data = try FileSystem.readSecret(file, what: "the encryption key file") else {
                throw XferError(.invalidConfiguration, "cannot read the encryption key file \(file)")
            }
            keys += try parse(String(decoding: data, as: UTF8.self), source: file)
        }
        if let environment, !environment.isEmpty {
            keys += try parse(environment, source: "XFER_ENCRYPTION_KEY")
        }
        return keys.isEmpty ? nil : try SealingKeys(keys)
    }

    /// A new key file's text: a comment saying what it is, then the key.
    public static func keyFileText(_ key: SealingKey) -> String {
        """
        # xfer server encryption key \(key.id). Keep a copy somewhere safe: data sealed with it
        # cannot be read without it. To rotate, put a new key on the first line and keep this one.
        \(key.hex)

        """
    }
}
