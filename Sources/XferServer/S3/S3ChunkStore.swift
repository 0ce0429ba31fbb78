import Foundation
import NIOPosix
import XferCore

/// Chunks as objects in S3-compatible storage: one object per chunk at `PREFIX/ab/abcd…`, in
/// the same stored format as a chunk file (docs/FORMAT.md).
///
/// A push of many small chunks does not cost one round trip each in sequence: a batch is
/// verified on the thread pool, then written with up to ``concurrency`` PUTs in flight. An
/// object is durable when S3 answers its PUT, so nothing else is needed before the metadata
/// records the chunks.
public struct S3ChunkStore: ChunkStore {
    /// The client.
    public let client: S3Client
    /// PUTs (or GETs) in flight at once.
    public var concurrency = 32
    /// The largest plain chunk accepted.
    public var maximumChunkSize = ChunkerConfiguration.maximumAllowedSize
    private let threadPool: NIOThreadPool

    /// A store over a client (its bucket must exist: ``S3Client/createBucketIfNeeded()``).
    public init(client: S3Client, threadPool: NIOThreadPool = .singleton) {
        self.client = client
        self.threadPool = threadPool
    }

    /// The object key of a chunk.
    public func key(for id: ChunkID) -> String {
        let hex = id.hex
        return "\(client.location.prefix)\(hex.prefix(2))/\(hex)"
    }

    public func store(_ chunks: [EncodedChunk]) async throws -> [XferError?] {
        let maximum = maximumChunkSize
        let verdicts: [XferError?] = try await threadPool.runIfActive {
            chunks.map { chunk in
                do {
                    _ = try chunk.decoded(maximumLength: maximum)
                    return nil
                } catch let error as XferError {
                    return error
                } catch {
                    return XferError(.corruptChunk, "chunk \(chunk.id.hex) does not decode")
                }
            }
        }
        let good = chunks.indices.filter { verdicts[$0] == nil }
        try await forEach(good) { index in
            try await client.put(key(for: chunks[index].id), LocalChunkStore.fileBytes(chunks[index]))
        }
        return verdicts
    }

    /// Each GET costs a round trip: keep many in flight.
    public var readAhead: Int { concurrency }

    public func load(_ id: ChunkID) async throws -> EncodedChunk {
        guard let bytes = try await client.get(key(for: id), limit: LocalChunkStore.maximumFileSize(maximumChunkSize)) else {
            throw XferError(.notFound, "chunk \(id.hex) is not in the object store")
        }
        return try LocalChunkStore.parse(bytes, id: id, name: "object \(key(for: id))")
    }

    public func list(shard: UInt8) async throws -> [StoredChunk] {
        let prefix = client.location.prefix + ChunkID.hexDigits(shard) + "/"
        return try await client.list(prefix: prefix).compactMap { object in
            guard let id = ChunkID(hex: object.key.dropFirst(prefix.count)) else { return nil }
            return StoredChunk(id: id, bytes: object.size, modified: object.modified)
        }
    }

    public func verify(_ id: ChunkID) async throws -> Int {
        let chunk = try await load(id)
        let maximum = maximumChunkSize
        return try await threadPool.runIfActive { try chunk.decoded(maximumLength: maximum).count }
    }

    /// Object stores cannot rename, so each candidate's age is read again (an upload of the same
    /// chunk rewrites its object, which makes it young); the old ones no one holds are marked
    /// for deletion in the metadata (`begin`), which from then on refuses to record an upload of
    /// them, deleted, and recorded as gone (`end`), which refuses uploads that started before.
    public func sweep(_ ids: [ChunkID], modifiedBefore: Int64,
                      begin: @escaping @Sendable ([ChunkID]) async throws -> [ChunkID],
                      end: @escaping @Sendable ([ChunkID]) async throws -> Void) async throws -> (count: Int, bytes: Int64) {
        let found = Locked<[ChunkID: Int64]>([:])
        try await forEach(ids) { id in
            if let object = try await client.head(key(for: id)), object.modified * 1_000_000_000 < modifiedBefore {
                found.withLock { $0[id] = object.size }
            }
        }
        let old = found.value
        guard !old.isEmpty else { return (0, 0) }
        let doomed = try await begin(Array(old.keys))
        try await forEach(doomed) { id in try await client.delete(key(for: id)) }
        try await end(doomed)
        return (doomed.count, doomed.reduce(0) { $0 + (old[$1] ?? 0) })
    }

    /// Runs `body` for every element with at most ``concurrency`` at once.
    private func forEach<C: Collection & Sendable>(_ items: C, _ body: @escaping @Sendable (C.Element) async throws -> Void) async throws
        where C.Element: Sendable {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for item in items {
                if running == concurrency {
                    try await group.next()
                    running -= 1
                }
                group.addTask { try await body(item) }
                running += 1
            }
            try await group.waitForAll()
        }
    }
}
