import XferCore

/// Where the server keeps chunk payloads. The routes see only this protocol: files under the
/// data directory are the embedded default; S3-compatible storage comes with many servers
/// (both are a ``PackedChunkStore``).
public protocol ChunkStore: Sendable {
    /// Verifies every chunk (decodes it and checks its size and SHA-256) and stores the good
    /// ones durably before returning.
    /// - Returns: Per chunk, in order: `nil` if stored (or already present), else why it was refused.
    /// - Throws: `io` if storing fails.
    func store(_ chunks: [EncodedChunk]) async throws -> [XferError?]
    /// Chunks as stored, in the order asked (the receiver verifies them). A store that packs
    /// chunks reads neighbours in one request.
    /// - Throws: `not_found`, `io`.
    func load(_ ids: [ChunkID]) async throws -> [EncodedChunk]

    /// How many chunks a download asks ``load(_:)`` for at once.
    var readBatch: Int { get }
    /// How many such batches a download keeps in flight ahead of what it has sent.
    var readAhead: Int { get }

    // MARK: Maintenance

    /// The stored chunks whose id starts with byte `shard` (listing in 256 parts bounds memory).
    func list(shard: UInt8) async throws -> [StoredChunk]
    /// Reads a chunk and checks it decodes to bytes that hash to its id.
    /// - Returns: Its plain length.
    /// - Throws: `corrupt_chunk`, `not_found`, `io`.
    func verify(_ id: ChunkID) async throws -> Int
    /// Deletes stored chunks no one holds and nothing touched since `modifiedBefore` (Unix
    /// nanoseconds); safe while uploads run. `begin` marks for deletion those no one holds now
    /// (``MetadataStore/beginDeletion(_:)``) and only they are deleted; `end` records that they
    /// are gone (``MetadataStore/endDeletion(_:)``).
    func sweep(
        _ ids: [ChunkID], modifiedBefore: Int64,
        begin: @escaping @Sendable ([ChunkID]) async throws -> [ChunkID],
        end: @escaping @Sendable ([ChunkID]) async throws -> Void
    ) async throws -> (count: Int, bytes: Int64)
    /// Reclaims the space of swept chunks where a sweep alone cannot (a store that packs
    /// chunks rewrites packs that are mostly dead); leaves anything written since
    /// `modifiedBefore` (Unix ns) alone.
    func compact(modifiedBefore: Int64) async throws -> Compaction
}

extension ChunkStore {
    /// One chunk as stored.
    /// - Throws: `not_found`, `io`.
    public func load(_ id: ChunkID) async throws -> EncodedChunk { try await load([id])[0] }
}

/// What a compaction did.
public struct Compaction: Sendable, Hashable {
    /// Packs deleted (no live chunk left, or rewritten).
    public var packsRemoved = 0
    /// Packs whose live chunks were copied into a new pack.
    public var packsRewritten = 0
    /// Bytes of object storage given back.
    public var bytesFreed: Int64 = 0
    /// Packs left as they are because an entry in them is damaged (`xfer verify` reports the
    /// chunk); the others are compacted all the same.
    public var packsDamaged: [String] = []

    /// Nothing done.
    public init() {}
}

/// A stored chunk, as a listing shows it.
public typealias StoredChunk = LocalChunkStore.StoredFile
