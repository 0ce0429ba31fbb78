import XferCore

/// The framed binary body that carries many chunks in one request or response (upload and
/// download): `XFU1`, then frames back to back until the body ends.
///
/// ```
/// frame := id (32 bytes) | plain length (u32 LE) | encoding (u8) | payload length (u32 LE) | payload
/// ```
/// Framing only: ids are checked against the bytes by whoever stores or uses the chunk.
public enum ChunkFrames {
    /// The body's first four bytes.
    public static let magic: [UInt8] = Array("XFU1".utf8)
    /// Bytes of a frame before its payload.
    public static let frameHeaderSize = 32 + 4 + 1 + 4

    /// Encodes chunks into one body.
    /// - Parameter chunks: The chunks, in the order they will be decoded.
    /// - Returns: The body.
    public static func encode(_ chunks: [EncodedChunk]) -> [UInt8] {
        var body = magic
        body.reserveCapacity(magic.count + chunks.reduce(0) { $0 + frameHeaderSize + $1.payload.count })
        for chunk in chunks { append(chunk, to: &body) }
        return body
    }

    /// Appends one frame to a body being built (after ``magic``), so a sender can frame each
    /// chunk as it is encoded instead of holding the chunks and the body at once.
    /// - Parameters:
    ///   - chunk: The chunk.
    ///   - body: The body so far.
    public static func append(_ chunk: EncodedChunk, to body: inout [UInt8]) {
        withHeader(of: chunk) { body.append(contentsOf: $0) }
        body.append(contentsOf: chunk.payload)
    }

    /// Calls `body` with a frame's header (``frameHeaderSize`` bytes: the id, the plain
    /// length, the encoding, the payload's length), for a sender that writes the header and
    /// then the payload straight into its own buffer.
    public static func withHeader<Result>(of chunk: EncodedChunk, _ body: (UnsafeRawBufferPointer) throws -> Result)
        rethrows -> Result
    {
        var header: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
        return try withUnsafeMutableBytes(of: &header) { raw in
            chunk.id.withUnsafeBytes { raw.copyMemory(from: $0) }
            raw.storeBytes(of: UInt32(chunk.length).littleEndian, toByteOffset: 32, as: UInt32.self)
            raw[36] = chunk.encoding.rawValue
            raw.storeBytes(of: UInt32(chunk.payload.count).littleEndian, toByteOffset: 37, as: UInt32.self)
            return try body(UnsafeRawBufferPointer(rebasing: raw[..<frameHeaderSize]))
        }
    }
}

/// Limits a ``ChunkFrameDecoder`` enforces before buffering anything.
public struct ChunkFrameLimits: Sendable, Hashable {
    /// Largest plain chunk length.
    public var maximumChunkLength: Int
    /// Largest payload; a zstd frame of a maximum chunk is a little larger than the chunk.
    public var maximumPayloadLength: Int
    /// Most frames in one body.
    public var maximumFrames: Int
    /// Most frames in one body for a server that offers ``ServerFeature/largeUploads``
    /// (``maximumFrames`` is 1,024 by default, what every v1 server reads).
    public static let largeUploadFrames = 16_384
    /// Largest body.
    public var maximumBodyLength: Int
    /// Most plain bytes the frames of one body may declare, together: what decoding and
    /// verifying a body may cost, however small its frames (a few bytes of zstd can declare
    /// a maximum chunk). By default what 1,024 frames of maximum chunks declare (256 MiB), so
    /// a body of more frames costs no more than one of 1,024 could.
    public var maximumPlainBytes: Int

    /// Limits for chunks of at most `maximumChunkLength` bytes: up to 1,024 frames and 64 MiB a body.
    /// - Parameter maximumChunkLength: Largest plain chunk accepted.
    public init(
        maximumChunkLength: Int = ChunkerConfiguration.default.maximumSize,
        maximumFrames: Int = 1024, maximumBodyLength: Int = 64 << 20
    ) {
        self.maximumChunkLength = maximumChunkLength
        maximumPayloadLength = maximumChunkLength + maximumChunkLength / 128 + 1024
        self.maximumFrames = maximumFrames
        self.maximumBodyLength = maximumBodyLength
        maximumPlainBytes =
            maximumFrames.multipliedReportingOverflow(by: maximumChunkLength).overflow
            ? Int.max : maximumFrames * maximumChunkLength
    }
}

/// Decodes a chunk body fed in pieces of any size; the chunks are the same however the body
/// is split. A length over its limit is refused as soon as its header arrives, before the
/// payload is buffered.
public struct ChunkFrameDecoder: Sendable {
    /// The limits in force.
    public let limits: ChunkFrameLimits
    private var buffer: [UInt8] = []
    private var consumed = 0
    private var sawMagic = false
    private var frames = 0
    private var bodyLength = 0
    private var plainBytes = 0

    /// Creates a decoder at the start of a body.
    /// - Parameter limits: Limits to enforce.
    public init(limits: ChunkFrameLimits = ChunkFrameLimits()) {
        self.limits = limits
    }

    /// Adds the next bytes of the body.
    /// - Parameter bytes: The next piece.
    /// - Returns: The chunks completed by this piece, in order.
    /// - Throws: `XferError` `corrupt_chunk` for a bad magic or
    ///   encoding, `too_large` for a length, frame count or body over its limit.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws -> [EncodedChunk] {
        bodyLength += bytes.count
        guard bodyLength <= limits.maximumBodyLength else {
            throw XferError(.tooLarge, "chunk body is over the limit of \(limits.maximumBodyLength) bytes")
        }
        buffer.append(contentsOf: bytes)
        var chunks: [EncodedChunk] = []
        if !sawMagic {
            guard buffer.count - consumed >= ChunkFrames.magic.count else { return [] }
            guard Array(buffer[consumed..<(consumed + 4)]) == ChunkFrames.magic else {
                throw XferError(.corruptChunk, "chunk body does not start with XFU1")
            }
            consumed += 4
            sawMagic = true
        }
        while let chunk = try nextFrame() { chunks.append(chunk) }
        if consumed > 0 && consumed * 2 >= buffer.count {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        return chunks
    }

    /// Ends the body.
    /// - Throws: `corrupt_chunk` if it ended inside a frame or before the magic.
    public func finish() throws {
        guard sawMagic else { throw XferError(.corruptChunk, "chunk body ended before its XFU1 header") }
        guard buffer.count == consumed else {
            throw XferError(
                .corruptChunk, "chunk body ended inside a frame (\(buffer.count - consumed) bytes left over)")
        }
    }

    private mutating func nextFrame() throws -> EncodedChunk? {
        let available = buffer.count - consumed
        guard available >= ChunkFrames.frameHeaderSize else { return nil }
        let header = consumed
        let plainLength = Int(readUInt32(at: header + 32))
        let encodingByte = buffer[header + 36]
        let payloadLength = Int(readUInt32(at: header + 37))
        guard let encoding = ChunkEncoding(rawValue: encodingByte) else {
            throw XferError(.corruptChunk, "chunk frame \(frames) has unknown encoding \(encodingByte)")
        }
        // A sealed chunk's length is its payload's: a sealed maximum chunk, a little longer.
        let sealedLimit = EndToEndChunks.maximumPayload(plain: limits.maximumChunkLength)
        let (plainLimit, payloadLimit) =
            encoding == .sealed ? (sealedLimit, sealedLimit) : (limits.maximumChunkLength, limits.maximumPayloadLength)
        guard plainLength <= plainLimit, payloadLength <= payloadLimit else {
            throw XferError(
                .tooLarge,
                "chunk frame \(frames) declares \(plainLength) plain / \(payloadLength) payload bytes, over the limits \(plainLimit) / \(payloadLimit)"
            )
        }
        guard frames < limits.maximumFrames else {
            throw XferError(.tooLarge, "chunk body has more than \(limits.maximumFrames) frames")
        }
        guard plainBytes + plainLength <= limits.maximumPlainBytes else {
            throw XferError(.tooLarge, "chunk body declares more than \(limits.maximumPlainBytes) plain bytes")
        }
        guard available >= ChunkFrames.frameHeaderSize + payloadLength else { return nil }
        let id = ChunkID(bytes: buffer[header..<(header + 32)])!
        let start = header + ChunkFrames.frameHeaderSize
        let payload = Array(buffer[start..<(start + payloadLength)])
        consumed = start + payloadLength
        frames += 1
        plainBytes += plainLength
        return EncodedChunk(id: id, length: plainLength, encoding: encoding, payload: payload)
    }

    private func readUInt32(at offset: Int) -> UInt32 {
        UInt32(buffer[offset]) | UInt32(buffer[offset + 1]) << 8 | UInt32(buffer[offset + 2]) << 16 | UInt32(
            buffer[offset + 3]) << 24
    }
}
