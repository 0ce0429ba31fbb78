/// One chunk of a file as the pipeline reports it.
public struct ChunkRecord: Sendable, Hashable {
    /// Offset of the chunk's first byte in its file.
    public var offset: Int64
    /// Length of the plain bytes.
    public var length: Int
    /// SHA-256 of the plain bytes.
    public var id: ChunkID
    /// The stored form, when the pipeline was asked to compress; `nil` when hashing only.
    public var encoded: EncodedChunk?

    /// Creates a record.
    /// - Parameters:
    ///   - offset: Offset in the file.
    ///   - length: Plain length.
    ///   - id: Chunk id.
    ///   - encoded: Compressed or raw payload, if any.
    public init(offset: Int64, length: Int, id: ChunkID, encoded: EncodedChunk? = nil) {
        self.offset = offset
        self.length = length
        self.id = id
        self.encoded = encoded
    }
}

/// What the pipeline reports, in input order: a file starts, its chunks in order, it ends.
public enum ChunkEvent: Sendable, Hashable {
    /// Input `file` (an index into the inputs) was opened; `size` as stat reported it.
    case fileStarted(file: Int, name: String, size: Int64?)
    /// The next chunk of input `file`.
    case chunk(file: Int, ChunkRecord)
    /// Input `file` was read to its end: `bytes` in `chunks` chunks. `stamp` is the file's as
    /// it was once its end had been read (`fstat` of the descriptor read from; `nil` for bytes
    /// in memory): the same as before the read, and what was read is one content of the file.
    case fileFinished(file: Int, bytes: Int64, chunks: Int, stamp: FileStamp?)
}
