/// How a chunk's payload is stored: its plain bytes, or one zstd frame of them.
public enum ChunkEncoding: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// The payload is the plain bytes (compression saved too little).
    case raw = 0
    /// The payload is a single zstd frame that declares the plain length.
    case zstd = 1

    public var description: String { self == .raw ? "raw" : "zstd" }
}

/// A chunk as it travels and is stored: its id, plain length, encoding and payload.
public struct EncodedChunk: Sendable, Hashable {
    /// SHA-256 of the plain bytes.
    public var id: ChunkID
    /// Length of the plain bytes.
    public var length: Int
    /// How ``payload`` encodes the plain bytes.
    public var encoding: ChunkEncoding
    /// The stored bytes.
    public var payload: [UInt8]

    /// Creates an encoded chunk; nothing is checked until ``decoded(maximumLength:)``.
    /// - Parameters:
    ///   - id: The claimed id.
    ///   - length: The claimed plain length.
    ///   - encoding: The payload's encoding.
    ///   - payload: The stored bytes.
    public init(id: ChunkID, length: Int, encoding: ChunkEncoding, payload: [UInt8]) {
        self.id = id
        self.length = length
        self.encoding = encoding
        self.payload = payload
    }

    /// The plain bytes, checked against the claimed length and id.
    /// - Parameter maximumLength: The largest plain length accepted; a payload that would
    ///   inflate past it is refused before any memory is reserved for it.
    /// - Returns: The plain bytes.
    /// - Throws: `XferError` `too_large`, `corrupt_chunk` or `compression`.
    public func decoded(maximumLength: Int = ChunkerConfiguration.maximumAllowedSize) throws -> [UInt8] {
        guard length >= 0, length <= maximumLength else {
            throw XferError(.tooLarge, "chunk \(id) claims \(length) bytes, over the limit of \(maximumLength)")
        }
        let plain: [UInt8]
        switch encoding {
        case .raw:
            guard payload.count == length else {
                throw XferError(.corruptChunk, "chunk \(id) is \(payload.count) bytes, expected \(length)")
            }
            plain = payload
        case .zstd:
            plain = try Zstd.decompress(payload, expectedLength: length, maximumLength: maximumLength)
        }
        let actual = ChunkID.of(plain)
        guard actual == id else {
            throw XferError(.corruptChunk, "chunk bytes hash to \(actual), not to their id \(id)")
        }
        return plain
    }
}
