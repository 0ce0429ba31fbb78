import XferClient
import XferCore

/// Where a mount's reads get their chunks: recently read ones held in memory, then the
/// bounded on-disk ``ChunkCache`` (least recently used out first), then the server, each
/// checked against its id. A chunk asked for by two reads at once is fetched once.
public final class ChunkSupply: Sendable {
    /// What the supply has done, for `xfer status` and the tests.
    public struct Statistics: Sendable, Hashable, Codable {
        /// Chunks and payload bytes fetched from the server.
        public var chunksFetched = 0
        public var bytesFetched: Int64 = 0
        /// Chunks found in the on-disk cache.
        public var chunksFromDisk = 0
        /// Chunks found in memory.
        public var chunksFromMemory = 0
    }

    private struct State {
        var memory = RecentChunks(maximumBytes: 64 << 20)
        /// Chunks being fetched, with the reads waiting for them.
        var waiting: [ChunkID: [CheckedContinuation<[UInt8], any Error>]] = [:]
        var statistics = Statistics()
    }

    private let client: DocumentClient
    private let disk: SegmentChunkCache?
    private let state = Locked(State())

    /// A supply fetching through `client`, keeping chunks in `disk` (none: memory only). An
    /// end-to-end encrypted container's chunks are kept as they came, sealed.
    public init(client: DocumentClient, disk: SegmentChunkCache?) {
        self.client = client
        self.disk = disk
    }

    /// What it has done so far.
    public var statistics: Statistics { state.value.statistics }

    /// The plain bytes of `references`, in order, each of the length its reference says.
    /// - Throws: `corrupt_chunk` for a chunk that does not check out or is not of its
    ///   reference's length; `unavailable` when the
    ///   server cannot be reached for a chunk held nowhere here.
    public func plain(_ references: [Manifest.ChunkReference]) async throws -> [[UInt8]] {
        let (found, mine, theirs) = claim(references.map(\.id))
        var plains = found
        if !mine.isEmpty {
            for (id, plain) in try await load(mine, maximumLength: references.map(\.length).max() ?? 0) {
                plains[id] = plain
            }
        }
        for id in theirs {
            plains[id] = try await withCheckedThrowingContinuation { continuation in
                wait(for: id, continuation)
            }
        }
        return try references.map { reference in
            guard let plain = plains[reference.id] else {
                throw XferError(.internal, "chunk \(reference.id) was neither found nor fetched")
            }
            // The chunk checks out against its id; the manifest must also say its true length.
            guard plain.count == reference.length else {
                throw XferError(
                    .corruptChunk,
                    "chunk \(reference.id) holds \(plain.count) bytes, and its manifest says \(reference.length)")
            }
            return plain
        }
    }

    /// The plain bytes of `references` if memory holds every one of them, else `nil`: what a
    /// read answers at once, on the thread that asked, with nothing to wait for.
    public func held(_ references: [Manifest.ChunkReference]) -> [[UInt8]]? {
        state.withLock { state -> [[UInt8]]? in
            var plains: [[UInt8]] = []
            plains.reserveCapacity(references.count)
            for reference in references {
                guard let plain = state.memory[reference.id], plain.count == reference.length else { return nil }
                plains.append(plain)
            }
            state.statistics.chunksFromMemory += plains.count
            return plains
        }
    }

    /// Fetches `references` into memory and the cache, in the background, unless held or on
    /// their way already (read-ahead).
    public func prefetch(_ references: [Manifest.ChunkReference]) {
        let (_, mine, _) = claim(references.map(\.id))
        guard !mine.isEmpty else { return }
        let maximumLength = references.map(\.length).max() ?? 0
        Task { _ = try? await self.load(mine, maximumLength: maximumLength) }
    }

    /// Sorts `ids` into those in memory (with their bytes), those this caller fetches (now
    /// marked as on their way) and those another caller is fetching.
    private func claim(_ ids: [ChunkID]) -> (found: [ChunkID: [UInt8]], mine: [ChunkID], theirs: [ChunkID]) {
        state.withLock { state in
            var found: [ChunkID: [UInt8]] = [:]
            var mine: [ChunkID] = []
            var theirs: [ChunkID] = []
            for id in ids where found[id] == nil && !mine.contains(id) && !theirs.contains(id) {
                if let plain = state.memory[id] {
                    found[id] = plain
                    state.statistics.chunksFromMemory += 1
                } else if state.waiting[id] != nil {
                    theirs.append(id)
                } else {
                    state.waiting[id] = []
                    mine.append(id)
                }
            }
            return (found, mine, theirs)
        }
    }

    private func wait(for id: ChunkID, _ continuation: CheckedContinuation<[UInt8], any Error>) {
        let held: [UInt8]? = state.withLock { state in
            if state.waiting[id] != nil {
                state.waiting[id]!.append(continuation)
                return nil
            }
            return state.memory[id] ?? []
        }
        guard let held else { return }
        // Fetched (or failed) between the claim and now: in memory, or asked again.
        if !held.isEmpty { return continuation.resume(returning: held) }
        continuation.resume(throwing: XferError(.unavailable, "chunk \(id) could not be fetched; read again"))
    }

    /// Loads chunks this caller claimed: from the disk cache, the rest from the server.
    /// Whatever happens, every claimed chunk's waiters are answered.
    private func load(_ ids: [ChunkID], maximumLength: Int) async throws -> [ChunkID: [UInt8]] {
        var loaded: [ChunkID: [UInt8]] = [:]
        do {
            loaded = try await fromDisk(ids)
            deliver(loaded, fromDisk: true)
            let missing = ids.filter { loaded[$0] == nil }
            if !missing.isEmpty {
                loaded.merge(try await fetch(missing, maximumLength), uniquingKeysWith: { a, _ in a })
            }
            fail(ids.filter { loaded[$0] == nil }, XferError(.internal, "the server did not send every chunk"))
            return loaded
        } catch {
            fail(ids.filter { loaded[$0] == nil }, error)
            throw error
        }
    }

    /// Those of `ids` the disk cache holds (none if it cannot be read: they are fetched).
    private func fromDisk(_ ids: [ChunkID]) async throws -> [ChunkID: [UInt8]] {
        guard let disk else { return [:] }
        let codec = try await client.codec()
        return (try? disk.plain(ids, codec: codec)) ?? [:]
    }

    /// Fetches `ids` from the server, keeping each in memory as it comes and the batch on disk.
    private func fetch(_ ids: [ChunkID], _ maximumLength: Int) async throws -> [ChunkID: [UInt8]] {
        var fetched: [ChunkID: [UInt8]] = [:]
        var encoded: [EncodedChunk] = []
        defer { try? disk?.keep(encoded) }
        let bytes = try await client.fetchChunks(ids, maximumLength: max(maximumLength, 1)) { chunk, plain in
            fetched[chunk.id] = plain
            encoded.append(chunk)
            deliver([chunk.id: plain], fromDisk: false)
        }
        state.withLock { state in
            state.statistics.chunksFetched += fetched.count
            state.statistics.bytesFetched += Int64(bytes)
        }
        return fetched
    }

    /// Keeps arrived chunks in memory and answers their waiters.
    private func deliver(_ plains: [ChunkID: [UInt8]], fromDisk: Bool) {
        guard !plains.isEmpty else { return }
        let waiters = state.withLock { state in
            var waiters: [(CheckedContinuation<[UInt8], any Error>, [UInt8])] = []
            for (id, plain) in plains {
                state.memory.insert(plain, for: id)
                waiters += (state.waiting.removeValue(forKey: id) ?? []).map { ($0, plain) }
            }
            if fromDisk { state.statistics.chunksFromDisk += plains.count }
            return waiters
        }
        for (continuation, plain) in waiters { continuation.resume(returning: plain) }
    }

    private func fail(_ ids: [ChunkID], _ error: any Error) {
        guard !ids.isEmpty else { return }
        let waiters = state.withLock { state in ids.flatMap { state.waiting.removeValue(forKey: $0) ?? [] } }
        for continuation in waiters { continuation.resume(throwing: error) }
    }
}

/// Plain chunks read lately, up to a number of bytes; the least recently used go first.
struct RecentChunks {
    let maximumBytes: Int
    private var entries: [ChunkID: (plain: [UInt8], used: UInt64)] = [:]
    private var bytes = 0
    private var clock: UInt64 = 0

    init(maximumBytes: Int) { self.maximumBytes = maximumBytes }

    /// A held chunk's bytes (a use).
    subscript(id: ChunkID) -> [UInt8]? {
        mutating get {
            guard let entry = entries[id] else { return nil }
            clock += 1
            entries[id]!.used = clock
            return entry.plain
        }
    }

    /// Holds a chunk, letting the least recently used quarter go when over the bound.
    mutating func insert(_ plain: [UInt8], for id: ChunkID) {
        guard entries[id] == nil, plain.count <= maximumBytes else { return }
        clock += 1
        entries[id] = (plain, clock)
        bytes += plain.count
        guard bytes > maximumBytes else { return }
        for (oldID, entry) in entries.sorted(by: { $0.value.used < $1.value.used }) where bytes > maximumBytes * 3 / 4 {
            entries[oldID] = nil
            bytes -= entry.plain.count
        }
    }
}
