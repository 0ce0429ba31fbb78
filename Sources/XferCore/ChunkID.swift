/// The name of a chunk: the SHA-256 of its plain (uncompressed) bytes.
///
/// Stored as four big-endian words so that equality, hashing and ordering are cheap;
/// its text form is 64 lowercase hex digits.
public struct ChunkID: Hashable, Comparable, Sendable, CustomStringConvertible, BitwiseCopyable {
    @usableFromInline var w0, w1, w2, w3: UInt64

    /// The number of bytes in a chunk id.
    public static let byteCount = 32

    /// Creates an id from its 32 raw bytes.
    /// - Parameter bytes: Exactly 32 bytes, as SHA-256 produces them.
    /// - Returns: `nil` if `bytes` is not 32 bytes long.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == Self.byteCount else { return nil }
        // Bytes in one piece (an array, a slice, a buffer) are read a word at a time.
        if let words = bytes.withContiguousStorageIfAvailable({ buffer in
            let raw = UnsafeRawBufferPointer(buffer)
            return (
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)),
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self)),
                UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
            )
        }) {
            (w0, w1, w2, w3) = words
            return
        }
        var words = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var index = 0
        for byte in bytes {
            let shift = UInt64(56 - 8 * (index % 8))
            switch index / 8 {
            case 0: words.0 |= UInt64(byte) << shift
            case 1: words.1 |= UInt64(byte) << shift
            case 2: words.2 |= UInt64(byte) << shift
            default: words.3 |= UInt64(byte) << shift
            }
            index += 1
        }
        (w0, w1, w2, w3) = words
    }

    /// Creates an id from its 64-digit hex form (either case).
    /// - Parameter hex: The text form.
    /// - Returns: `nil` if `hex` is not 64 hex digits.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard utf8.count == 2 * Self.byteCount else { return nil }
        var bytes = [UInt8]()
        bytes.reserveCapacity(Self.byteCount)
        var i = 0
        while i < utf8.count {
            guard let hi = Self.nibble(utf8[i]), let lo = Self.nibble(utf8[i + 1]) else { return nil }
            bytes.append(hi << 4 | lo)
            i += 2
        }
        self.init(bytes: bytes)
    }

    /// The first 64 bits, for maps and sets that key by them to save memory (and settle the
    /// rare shared prefix by the whole id, or by a later check: ``ChunkIDPrefixes``).
    public var prefix: UInt64 { w0 }

    /// The 32 raw bytes.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Calls `body` with the 32 raw bytes, without making an array of them (for appending an
    /// id to a body being built: a manifest, an upload frame, a pack).
    @inlinable
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let words = (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)
        return try Swift.withUnsafeBytes(of: words) { try body($0) }
    }

    /// A byte as two lowercase hex digits (a chunk directory's name).
    public static func hexDigits(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }

    /// The 64-digit lowercase hex form.
    public var hex: String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(2 * Self.byteCount)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    public static func < (lhs: ChunkID, rhs: ChunkID) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }

    /// The SHA-256 of `bytes`: the id of a chunk with these plain bytes.
    /// - Parameter bytes: The chunk's plain bytes.
    /// - Returns: The chunk's id.
    public static func of(_ bytes: UnsafeRawBufferPointer) -> ChunkID {
        var hasher = SHA256Hasher()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// The SHA-256 of `bytes`.
    /// - Parameter bytes: The chunk's plain bytes.
    /// - Returns: The chunk's id.
    public static func of(_ bytes: some ContiguousBytes) -> ChunkID {
        bytes.withUnsafeBytes { of($0) }
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// Byte containers whose storage can be read in place (`[UInt8]`, `ArraySlice<UInt8>`, …).
public protocol ContiguousBytes {
    /// Calls `body` with the bytes in place.
    /// - Parameter body: Reads the bytes; they are valid only during the call.
    /// - Returns: What `body` returns.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ContiguousBytes where Element == UInt8 {}
extension ArraySlice: ContiguousBytes where Element == UInt8 {}
extension ContiguousArray: ContiguousBytes where Element == UInt8 {}
