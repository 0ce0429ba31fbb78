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

/// The sealed-value format and its primitives (libcrypto's AES-256-GCM and HMAC-SHA-256).
public enum Sealing {
    static let magic: [UInt8] = Array("XFS1".utf8)
    static let keyIDSize = 8
    static let saltSize = 16
    static let tagSize = 16
    static let headerSize = 4 + keyIDSize + saltSize
    /// Bytes a sealed value has beyond its plain value: 44.
    public static let overhead = headerSize + tagSize

    static let keyIDLabel = Array("xfer key id v1".utf8)
    static let chunkNameLabel = Array("xfer chunk name v1".utf8)
    static let valueKeyLabel = Array("xfer sealed value v1".utf8)

    /// Whether `bytes` starts as a sealed value does (a plain stored chunk starts `XFC1`, a
    /// manifest `XFM`).
    public static func isSealed(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= overhead && bytes.prefix(4).elementsEqual(magic)
    }

    /// The id of the key a sealed value names.
    public static func keyID(of sealed: some Collection<UInt8>) -> SealingKeyID? {
        guard isSealed(sealed) else { return nil }
        return SealingKeyID(sealed.dropFirst(4).prefix(keyIDSize).reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// The context of a chunk's sealed bytes: a label and the chunk's id.
    public static func chunkContext(_ id: ChunkID) -> [UInt8] {
        id.withUnsafeBytes { Array("xfer chunk v1".utf8) + Array($0) }
    }

    /// The context of a manifest's sealed bytes: the version it is the manifest of.
    public static func manifestContext(document: Int64, version: Int64) -> [UInt8] {
        Array("xfer manifest v1 \(document) \(version)".utf8)
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { Crypto.hmac(key: key, $0) }
    }

    /// The bytes of an even number of hex digits (either case); `nil` for anything else.
    package static func hexBytes(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static let cipher: FetchedCipher = {
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            fatalError("libcrypto has no AES-256-GCM: \(CryptoErrors.drain())")
        }
        return FetchedCipher(cipher: cipher)
    }()

    static func seal(
        _ plain: UnsafeRawBufferPointer, key: SealingKey, salt: [UInt8], context: [UInt8],
        appendingTo out: inout [UInt8]
    ) {
        let valueKey = hmac(key: key.bytes, valueKeyLabel + salt)
        out.reserveCapacity(out.count + overhead + plain.count)
        out += magic
        withUnsafeBytes(of: key.id.value.bigEndian) { out.append(contentsOf: $0) }
        out += salt
        let start = out.count
        out += repeatElement(0, count: plain.count + tagSize)
        let ok = out.withUnsafeMutableBufferPointer { buffer in
            crypt(
                encrypting: true, key: valueKey, context: context, input: plain,
                output: buffer.baseAddress! + start, tag: buffer.baseAddress! + start + plain.count)
        }
        guard ok else { fatalError("AES-256-GCM sealing failed: \(CryptoErrors.drain())") }
    }

    /// The plain value of `sealed` (a whole sealed value, at least ``overhead`` bytes), or `nil`
    /// if it fails its tag under `key`.
    static func open(_ sealed: UnsafeRawBufferPointer, key: SealingKey, context: [UInt8]) -> [UInt8]? {
        guard sealed.count >= overhead else { return nil }
        let salt = Array(sealed[(4 + keyIDSize)..<headerSize])
        let valueKey = hmac(key: key.bytes, valueKeyLabel + salt)
        let length = sealed.count - overhead
        var tag = Array(sealed[(sealed.count - tagSize)...])
        var ok = false
        let plain = [UInt8](unsafeUninitializedCapacity: length) { out, initialized in
            ok = tag.withUnsafeMutableBufferPointer { tag in
                crypt(
                    encrypting: false, key: valueKey, context: context,
                    input: UnsafeRawBufferPointer(rebasing: sealed[headerSize..<(headerSize + length)]),
                    output: out.baseAddress, tag: tag.baseAddress!)
            }
            initialized = length
        }
        if !ok { _ = CryptoErrors.drain() }
        return ok ? plain : nil
    }

    /// One AES-256-GCM pass with an all-zero nonce (each value has its own key).
    private static func crypt(
        encrypting: Bool, key: [UInt8], context: [UInt8], input: UnsafeRawBufferPointer,
        output: UnsafeMutablePointer<UInt8>?, tag: UnsafeMutablePointer<UInt8>
    ) -> Bool {
        guard let ctx = EVP_CIPHER_CTX_new() else { return false }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let nonce = [UInt8](repeating: 0, count: 12)
        var written: Int32 = 0
        guard EVP_CipherInit_ex2(ctx, cipher.cipher, key, nonce, encrypting ? 1 : 0, nil) == 1 else { return false }
        if !context.isEmpty {
            guard EVP_CipherUpdate(ctx, nil, &written, context, Int32(context.count)) == 1 else { return false }
        }
        if input.count > 0, let output {
            guard
                EVP_CipherUpdate(
                    ctx, output, &written, input.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(input.count))
                    == 1
            else { return false }
        }
        if !encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), tag) == 1 else { return false }
        }
        var final: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        guard EVP_CipherFinal_ex(ctx, &scratch, &final) == 1 else { return false }
        if encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), tag) == 1 else { return false }
        }
        return true
    }
}

/// An AES-256-GCM cipher fetched once; `EVP_CIPHER` objects are immutable and shareable.
struct FetchedCipher: @unchecked Sendable {  // immutable after init
    let cipher: OpaquePointer
}

/// Chunk ids as a store keeps them at rest: each 16-byte half enciphered with AES-256 under a
/// key of the store's own (its index key, kept sealed beside the data), so the store names no
/// chunk by the SHA-256 of its bytes, while the same id always gives the same stored bytes (the
/// store still looks ids up, and every lookup goes through here) and the stored bytes give the
/// id back. A chunk id is uniformly random, so enciphering its halves apart hides as much as a
/// wide block would.
public final class ChunkIDCipher: @unchecked Sendable {  // the template contexts are only copied from, never used
    private let encryptTemplate: OpaquePointer
    private let decryptTemplate: OpaquePointer

    /// Bytes in an index key.
    public static let keySize = 32

    /// A new random index key.
    public static func newKey() -> [UInt8] { Crypto.randomBytes(keySize) }

    /// A cipher under `key` (32 bytes).
    public init(key: [UInt8]) throws {
        guard key.count == Self.keySize else {
            throw XferError(.invalidConfiguration, "an index key is \(Self.keySize) bytes")
        }
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-ECB", nil) else {
            throw XferError(.crypto, "libcrypto has no AES-256-ECB: \(CryptoErrors.drain())")
        }
        defer { EVP_CIPHER_free(cipher) }
        func template(_ encrypting: Bool) throws -> OpaquePointer {
            guard let context = EVP_CIPHER_CTX_new(),
                EVP_CipherInit_ex2(context, cipher, key, nil, encrypting ? 1 : 0, nil) == 1,
                EVP_CIPHER_CTX_set_padding(context, 0) == 1
            else {
                throw XferError(.crypto, "cannot set up AES-256-ECB: \(CryptoErrors.drain())")
            }
            return context
        }
        encryptTemplate = try template(true)
        decryptTemplate = try template(false)
    }

    deinit {
        EVP_CIPHER_CTX_free(encryptTemplate)
        EVP_CIPHER_CTX_free(decryptTemplate)
    }

    /// The bytes a store keeps for `id`.
    public func encipher(_ id: ChunkID) -> [UInt8] {
        id.withUnsafeBytes { run(encryptTemplate, $0) }
    }

    /// The id whose stored bytes these are; `nil` if they are not 32 bytes.
    public func decipher(_ stored: [UInt8]) -> ChunkID? {
        guard stored.count == ChunkID.byteCount else { return nil }
        return ChunkID(bytes: stored.withUnsafeBytes { run(decryptTemplate, $0) })
    }

    private func run(_ template: OpaquePointer, _ input: UnsafeRawBufferPointer) -> [UInt8] {
        let context = Self.copy(template)
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: ChunkID.byteCount)
        out.withUnsafeMutableBytes { Self.update(context, input, into: $0) }
        return out
    }

    /// A context of its own, copied from `template`.
    fileprivate static func copy(_ template: OpaquePointer) -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new() else { fatalError("EVP_CIPHER_CTX_new failed: out of memory") }
        guard EVP_CIPHER_CTX_copy(context, template) == 1 else {
            fatalError("AES-256-ECB failed: \(CryptoErrors.drain())")
        }
        return context
    }

    /// ECB over whole blocks: every block in, every block out, nothing kept for the next call.
    fileprivate static func update(
        _ context: OpaquePointer, _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(input.count % 16 == 0 && output.count == input.count && input.count <= Int(Int32.max))
        guard !input.isEmpty else { return }
        var written: Int32 = 0
        let ok =
            EVP_CipherUpdate(
                context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &written,
                input.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
            && written == Int32(input.count)
        guard ok else { fatalError("AES-256-ECB failed: \(CryptoErrors.drain())") }
    }

    /// Contexts for many ids (one transaction's), made once instead of one per id.
    public func contexts() -> Contexts { Contexts(self) }

    /// A context each way, copied from the cipher's templates once and kept: each call takes
    /// the object's lock, so rows read on another thread never share a context mid-call, and
    /// the contexts are freed with the object, never before its last user lets go.
    public final class Contexts: @unchecked Sendable {  // the contexts are only used under `lock`
        private let lock = NSLock()
        private let encrypting: OpaquePointer
        private let decrypting: OpaquePointer

        fileprivate init(_ cipher: ChunkIDCipher) {
            encrypting = ChunkIDCipher.copy(cipher.encryptTemplate)
            decrypting = ChunkIDCipher.copy(cipher.decryptTemplate)
        }

        deinit {
            EVP_CIPHER_CTX_free(encrypting)
            EVP_CIPHER_CTX_free(decrypting)
        }

        /// The bytes a store keeps for each of `ids`, in order: one cipher call for all of them.
        public func encipher(_ ids: [ChunkID]) -> [[UInt8]] {
            let output = enciphered(ids)
            return (0..<ids.count).map { Array(output[$0 * ChunkID.byteCount..<($0 + 1) * ChunkID.byteCount]) }
        }

        /// The bytes a store keeps for each of `ids`, as ids (the order a database sorts them
        /// in is theirs: ``ChunkID``'s `<` is bytewise).
        public func storedForms(_ ids: [ChunkID]) -> [ChunkID] {
            let output = enciphered(ids)
            return (0..<ids.count).map {
                ChunkID(bytes: output[$0 * ChunkID.byteCount..<($0 + 1) * ChunkID.byteCount])!
            }
        }

        /// `ids`' stored bytes, one after another.
        private func enciphered(_ ids: [ChunkID]) -> [UInt8] {
            let size = ChunkID.byteCount
            var input = [UInt8](repeating: 0, count: ids.count * size)
            input.withUnsafeMutableBytes { buffer in
                for (index, id) in ids.enumerated() {
                    id.withUnsafeBytes {
                        buffer.baseAddress!.advanced(by: index * size).copyMemory(
                            from: $0.baseAddress!, byteCount: size)
                    }
                }
            }
            var output = [UInt8](repeating: 0, count: input.count)
            lock.withLock {
                input.withUnsafeBytes { inBytes in
                    output.withUnsafeMutableBytes { ChunkIDCipher.update(encrypting, inBytes, into: $0) }
                }
            }
            return output
        }

        /// The id whose stored bytes these are; `nil` if they are not 32 bytes.
        public func decipher(_ stored: [UInt8]) -> ChunkID? {
            guard stored.count == ChunkID.byteCount else { return nil }
            var out = [UInt8](repeating: 0, count: ChunkID.byteCount)
            lock.withLock {
                stored.withUnsafeBytes { inBytes in
                    out.withUnsafeMutableBytes { ChunkIDCipher.update(decrypting, inBytes, into: $0) }
                }
            }
            return ChunkID(bytes: out)
        }
    }
}
