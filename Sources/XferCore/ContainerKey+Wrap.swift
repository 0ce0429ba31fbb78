import CCrypto
import Foundation

/// scrypt's cost (RFC 7914): `N = 2^logN`, block size `r`, parallelism `p`; it needs
/// `128 · r · N` bytes of memory.
public struct ScryptParameters: Sendable, Hashable {
    /// log2 of N.
    public let logN: UInt8
    /// Block size.
    public let r: UInt8
    /// Parallelism.
    public let p: UInt8

    /// The default for wrapping a container key: N = 2^16, r = 8, p = 1 (64 MiB, a few tenths
    /// of a second here), the cost of the interactive setting of scrypt's paper, doubled.
    public static let `default` = ScryptParameters(unchecked: 16, 8, 1)

    /// The most a wrapped key may ask of a client, whose server could be hostile: 256 MiB of
    /// memory, N at most 2^20, p at most 4.
    public static let maximumMemory: UInt64 = 256 << 20

    /// Parameters, checked against the bounds.
    /// - Throws: `invalid_configuration` if they are out of bounds (a hostile wrapped key could
    ///   otherwise make a client allocate or compute without limit).
    public init(logN: UInt8, r: UInt8, p: UInt8) throws {
        self.init(unchecked: logN, r, p)
        guard (10...20).contains(logN), (1...32).contains(r), (1...4).contains(p), memory <= Self.maximumMemory else {
            throw XferError(
                .invalidConfiguration,
                """
                scrypt parameters logN=\(logN) r=\(r) p=\(p) are out of bounds (logN 10-20, r 1-32, p 1-4, \
                at most \(Self.maximumMemory >> 20) MiB)
                """)
        }
    }

    private init(unchecked logN: UInt8, _ r: UInt8, _ p: UInt8) {
        self.logN = logN
        self.r = r
        self.p = p
    }

    var n: UInt64 { 1 << UInt64(logN) }
    /// Bytes scrypt needs.
    public var memory: UInt64 { 128 * UInt64(r) * n }
}

/// A container key wrapped by a passphrase, as the server keeps it so that a second device joins
/// with the passphrase alone (docs/FORMAT.md, "End-to-end keys"):
///
/// `XFW1`, logN, r, p (a byte each), a 16-byte salt, then the key sealed (the `XFS1` format) with
/// the key scrypt derives from the passphrase and salt, the container's name bound in. A
/// passphrase change wraps the same key anew: no data is encrypted again.
public enum ContainerKeyWrap {
    static let magic: [UInt8] = Array("XFW1".utf8)
    static let saltSize = 16
    /// Bytes in a wrapped key: 99.
    public static let size = magic.count + 3 + saltSize + Sealing.overhead + ContainerKey.byteCount

    /// `key` wrapped by `passphrase` for `container`.
    /// - Throws: `invalid_configuration` for an empty passphrase.
    public static func wrap(
        _ key: ContainerKey, passphrase: String, container: String,
        parameters: ScryptParameters = .default
    ) throws -> [UInt8] {
        try wrap(
            key, passphrase: passphrase, container: container, parameters: parameters,
            salt: Crypto.randomBytes(saltSize), valueSalt: Crypto.randomBytes(Sealing.saltSize))
    }

    /// ``wrap(_:passphrase:container:parameters:)`` with given salts (the pinned vector).
    static func wrap(
        _ key: ContainerKey, passphrase: String, container: String, parameters: ScryptParameters,
        salt: [UInt8], valueSalt: [UInt8]
    ) throws -> [UInt8] {
        guard !passphrase.isEmpty else { throw XferError(.invalidConfiguration, "the passphrase is empty") }
        let sealing = try sealingKeys(passphrase, salt: salt, parameters: parameters)
        var out = magic + [parameters.logN, parameters.r, parameters.p] + salt
        key.bytes.withUnsafeBytes {
            Sealing.seal($0, key: sealing.current, salt: valueSalt, context: context(container), appendingTo: &out)
        }
        return out
    }

    /// The container key `wrapped` holds.
    /// - Throws: `unauthorized` if the passphrase is wrong (or the wrapped key was made for
    ///   another container, or damaged); `invalid_configuration` if `wrapped` is not a wrapped
    ///   key or asks for more scrypt work than a client gives (``ScryptParameters/maximumMemory``).
    public static func unwrap(_ wrapped: [UInt8], passphrase: String, container: String) throws -> ContainerKey {
        guard hasWrappedForm(wrapped) else {
            throw XferError(
                .invalidConfiguration,
                "the container's wrapped key is not in a format this client reads (\(wrapped.count) bytes)")
        }
        guard !passphrase.isEmpty else {
            throw XferError(.unauthorized, "wrong passphrase for container \(container): it is empty")
        }
        let parameters = try ScryptParameters(logN: wrapped[4], r: wrapped[5], p: wrapped[6])
        let salt = Array(wrapped[7..<(7 + saltSize)])
        let sealing = try sealingKeys(passphrase, salt: salt, parameters: parameters)
        let sealed = wrapped[(7 + saltSize)...]
        guard Sealing.keyID(of: sealed) == sealing.current.id,
            let bytes = try? sealing.open(sealed, context: context(container), what: "the container key")
        else {
            throw XferError(.unauthorized, "wrong passphrase for container \(container)")
        }
        return try ContainerKey(bytes: bytes)
    }

    /// Whether `bytes` has the form of a wrapped key (its length and magic): all a server can
    /// check of one.
    public static func hasWrappedForm(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count == size && bytes.prefix(4).elementsEqual(magic)
    }

    /// The scrypt parameters `wrapped` was made with, if it is a wrapped key.
    public static func parameters(of wrapped: [UInt8]) -> ScryptParameters? {
        guard hasWrappedForm(wrapped) else { return nil }
        return try? ScryptParameters(logN: wrapped[4], r: wrapped[5], p: wrapped[6])
    }

    private static func sealingKeys(_ passphrase: String, salt: [UInt8], parameters: ScryptParameters) throws
        -> SealingKeys
    {
        // The same passphrase typed on any system: Unicode NFC.
        let bytes = Array(passphrase.precomposedStringWithCanonicalMapping.utf8)
        return try SealingKeys([SealingKey(bytes: Crypto.scrypt(bytes, salt: salt, parameters: parameters, count: 32))])
    }

    static func context(_ container: String) -> [UInt8] { Array("xfer container key v1 \(container)".utf8) }
}

extension ContainerKey {
    /// The key as a recovery key a person can write down: the 32 bytes and a 2-byte check
    /// (the first of SHA-256 of the key) in Crockford's base32, 55 characters in groups of 5.
    public var recoveryText: String { RecoveryText.text(bytes) }

    /// The key a recovery key names.
    /// - Throws: `invalid_configuration` saying what is wrong: a character that is not in the
    ///   alphabet, a wrong length, or a check that fails (a character mistyped).
    public init(recoveryText: String) throws {
        try self.init(
            bytes: try RecoveryText.bytes(recoveryText, count: ContainerKey.byteCount, what: "a recovery key"))
    }
}

/// Crockford's base32 for recovery keys.
enum RecoveryText {
    static let alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

    /// `bytes` and their 2-byte check, in groups of 5.
    static func text(_ bytes: [UInt8]) -> String { grouped(fiveBits(bytes + check(bytes)), every: 5) }

    /// Base32 digits of `values`, a dash after every `every`.
    static func grouped(_ values: [UInt8], every: Int) -> String {
        let digits = Array(alphabet)
        var text = ""
        for (index, value) in values.enumerated() {
            if index > 0, index % every == 0 { text.append("-") }
            text.append(digits[Int(value)])
        }
        return text
    }

    /// The `count` bytes ``text(_:)`` wrote (dashes and spaces ignored; O, I and L read as 0, 1, 1).
    /// - Throws: `invalid_configuration` naming `what` for a character not in the alphabet, a
    ///   wrong length, or a failed check.
    static func bytes(_ text: String, count: Int, what: String) throws -> [UInt8] {
        var values: [UInt8] = []
        for character in text.uppercased() where !" -\t\n".contains(character) {
            let mapped: Character =
                switch character {
                case "O": "0"
                case "I", "L": "1"
                default: character
                }
            guard let value = alphabet.firstIndex(of: mapped) else {
                throw XferError(
                    .invalidConfiguration,
                    "'\(character)' is not a character of \(what) (0-9 and A-Z but I, L, O, U)")
            }
            values.append(UInt8(alphabet.distance(from: alphabet.startIndex, to: value)))
        }
        let digits = ((count + 2) * 8 + 4) / 5
        guard values.count == digits else {
            throw XferError(
                .invalidConfiguration, "\(what) has \(digits) characters (besides dashes), not \(values.count)")
        }
        guard let all = bytes(fromFiveBits: values, count: count + 2),
            Array(all.suffix(2)) == check(Array(all.prefix(count)))
        else {
            throw XferError(.invalidConfiguration, "\(what) does not check out: a character is mistyped")
        }
        return Array(all.prefix(count))
    }

    static func check(_ key: [UInt8]) -> [UInt8] { Array(ChunkID.of(key).bytes.prefix(2)) }

    /// Five bits at a time, most significant first, the last group padded with zero bits.
    static func fiveBits(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(UInt8((buffer >> UInt32(bits - 5)) & 31))
                bits -= 5
            }
        }
        if bits > 0 { out.append(UInt8((buffer << UInt32(5 - bits)) & 31)) }
        return out
    }

    /// The `count` bytes of `values` (five bits each); `nil` if the padding bits are not zero.
    static func bytes(fromFiveBits values: [UInt8], count: Int) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8, out.count < count {
                out.append(UInt8((buffer >> UInt32(bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        guard out.count == count, buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return out
    }
}
