import Foundation
import NIOPosix
import XferCore

/// Chunks in packs, on local disk (``FilePackStorage``, the embedded default) or in
/// S3-compatible storage (``S3PackStorage``): each upload batch becomes one or more packs of up
/// to ``packSize``, and the metadata store keeps each chunk's location (``ChunkLocation``) so
/// that any server finds it. One format and one compaction, whatever holds the packs.
///
/// A pack is entries back to back, each the chunk's 32-byte id followed by the chunk in the
/// stored format of a chunk file (docs/FORMAT.md), so a pack describes itself and an index
/// could be rebuilt from the packs. With ``sealing`` keys, an entry is instead the chunk's
/// name under the key (``SealingKey/name(of:)``) followed by the stored chunk sealed with it
/// (``SealingKeys``, the chunk's id bound in): the packs hold neither plain bytes nor ids.
/// Entries written before keys were given stay readable as they are. Pack names are random: a pack is written once and never
/// again under its name, which is what lets a compaction delete a pack it saw emptied.
///
/// Order of writes: the pack (durable), then its locations, then (by the route) the account's
/// records. A crash between leaves a pack no location names, which
/// ``compact(modifiedBefore:)`` deletes once it is older than an hour, or a located chunk no
/// account holds, which gc sweeps.
public struct PackedChunkStore: ChunkStore {
    /// Where the packs are.
    public let storage: any PackStorage
    /// Where chunk locations are recorded (the server's metadata store).
    public let index: any ChunkLocationIndex
    /// A pack is closed when it reaches this many bytes.
    public var packSize = 4 << 20
    /// Neighbouring entries of one pack less than this far apart are read in one request.
    public var readGap: Int64 = 256 << 10
    /// The largest plain chunk accepted.
    public var maximumChunkSize = ChunkerConfiguration.maximumAllowedSize
    /// A pack no location names is deleted only after this long (an upload writes its pack
    /// before it records the locations; no request runs for an hour).
    public var orphanAge: Int64 = 3600
    /// A pack whose live bytes fall under this fraction of its size is rewritten.
    public var rewriteBelow = 0.5
    /// Keys that seal entries written from now on, and open those sealed before; `nil` writes
    /// them plain (sealed ones then cannot be read).
    public var sealing: SealingKeys?
    private let threadPool: NIOThreadPool

    /// A store of packs in `storage` that records locations in `index`.
    public init(storage: any PackStorage, index: any ChunkLocationIndex, threadPool: NIOThreadPool = .singleton) {
        self.storage = storage
        self.index = index
        self.threadPool = threadPool
    }

    /// Packs in S3-compatible storage.
    public init(client: S3Client, index: any ChunkLocationIndex) {
        self.init(storage: S3PackStorage(client: client), index: index)
    }

    // MARK: Store

    public func store(_ chunks: [EncodedChunk]) async throws -> [XferError?] {
        let maximum = maximumChunkSize
        let verdicts = try await threadPool.runIfActive { EncodedChunk.verdicts(chunks, maximumLength: maximum) }
        // Every good chunk is packed, even one already located elsewhere: the same work on
        // both paths, so an upload's timing does not reveal what other accounts store
        // (docs/SECURITY.md). A located chunk keeps its location (recording is insert-or-
        // ignore); its new copy is dead weight that compaction reclaims. Repeats within the
        // batch are packed once.
        var seen: Set<ChunkID> = []
        let good = chunks.indices.filter { verdicts[$0] == nil && seen.insert(chunks[$0].id).inserted }.map {
            chunks[$0]
        }
        let packs = good.batched(atMost: .max, budget: packSize) { entrySize($0) }
        try await forEach(packs) { entries in
            let (bytes, locations) = pack(entries, name: Self.newPackName())
            try await storage.put(locations[0].pack, bytes)
            try await index.recordLocations(locations, sealedWith: sealing?.current.id)
        }
        return verdicts
    }

    /// A random pack name (32 hex digits).
    static func newPackName() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in ChunkID.hexDigits(UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// The bytes a chunk takes in a pack: its id (or name), then the stored chunk (sealed or not).
    func entrySize(_ chunk: EncodedChunk) -> Int {
        ChunkID.byteCount + LocalChunkStore.headerSize + chunk.payload.count + (sealing == nil ? 0 : Sealing.overhead)
    }

    /// A pack's bytes and the locations of its entries, sealed with the current key if there are keys.
    func pack(_ chunks: [EncodedChunk], name: String) -> ([UInt8], [ChunkLocation]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(chunks.reduce(0) { $0 + entrySize($1) })
        var locations: [ChunkLocation] = []
        for chunk in chunks {
            let offset = bytes.count
            if let sealing {
                sealing.current.name(of: chunk.id).withUnsafeBytes { bytes.append(contentsOf: $0) }
                sealing.seal(
                    LocalChunkStore.fileBytes(chunk), context: Sealing.chunkContext(chunk.id), appendingTo: &bytes)
            } else {
                chunk.id.withUnsafeBytes { bytes.append(contentsOf: $0) }
                bytes.append(contentsOf: LocalChunkStore.fileBytes(chunk))
            }
            locations.append(
                ChunkLocation(id: chunk.id, pack: name, offset: Int64(offset), length: bytes.count - offset))
        }
        return (bytes, locations)
    }

    /// An entry read back: it must be the chunk asked for, by its id or (sealed) its name under
    /// the key that sealed it, and a sealed one must open with that key and the id.
    func entry(_ bytes: ArraySlice<UInt8>, _ location: ChunkLocation) throws -> EncodedChunk {
        let name = "entry \(location.offset) of pack \(location.pack)"
        guard bytes.count == location.length, bytes.count > ChunkID.byteCount,
            let slot = ChunkID(bytes: bytes.prefix(ChunkID.byteCount))
        else {
            throw XferError(.corruptChunk, "\(name) is not chunk \(location.id.hex)")
        }
        let stored = bytes.dropFirst(ChunkID.byteCount)
        guard Sealing.isSealed(stored) else {
            guard slot == location.id else { throw XferError(.corruptChunk, "\(name) is not chunk \(location.id.hex)") }
            return try LocalChunkStore.parse(stored, id: location.id, name: name)
        }
        let plain = try SealingKeys.openIfSealed(
            stored, keys: sealing, context: Sealing.chunkContext(location.id), what: name)
        guard let key = Sealing.keyID(of: stored).flatMap({ sealing?.byID[$0] }), slot == key.name(of: location.id)
        else {
            throw XferError(.corruptChunk, "\(name) is not chunk \(location.id.hex)")
        }
        return try LocalChunkStore.parse(plain, id: location.id, name: name)
    }

    // MARK: Load

    /// Enough to keep a pull's socket busy with one read per run of neighbours.
    public var readBatch: Int { 64 }
    public var readAhead: Int { 4 }

    public func load(_ ids: [ChunkID]) async throws -> [EncodedChunk] {
        var found = try await read(ids)
        let lost = ids.filter { found[$0] == nil }
        if !lost.isEmpty {
            // A compaction may have moved them since their locations were read: look again.
            found.merge(try await read(lost)) { first, _ in first }
        }
        return try ids.map { id in
            guard let chunk = found[id] else { throw XferError(.notFound, "chunk \(id.hex) is not in the chunk store") }
            return chunk
        }
    }

    /// Reads what it can of `ids`: runs of neighbours in one pack come in one read.
    private func read(_ ids: [ChunkID]) async throws -> [ChunkID: EncodedChunk] {
        let locations = try await index.locations(Array(Set(ids)))
        var runs: [[ChunkLocation]] = []
        for (_, inPack) in Dictionary(grouping: locations, by: \.pack) {
            for location in inPack.sorted(by: { $0.offset < $1.offset }) {
                if let last = runs.last?.last, last.pack == location.pack,
                    location.offset - (last.offset + Int64(last.length)) <= readGap,
                    location.offset + Int64(location.length) - runs[runs.count - 1][0].offset <= Int64(packSize)
                {
                    runs[runs.count - 1].append(location)
                } else {
                    runs.append([location])
                }
            }
        }
        let found = Locked<[ChunkID: EncodedChunk]>([:])
        try await forEach(runs) { run in
            let start = run[0].offset
            let end = run.map { $0.offset + Int64($0.length) }.max()!
            guard let bytes = try await storage.get(run[0].pack, range: start..<end) else { return }
            let chunks = try run.map {
                try entry(bytes[Int($0.offset - start)..<Int($0.offset - start) + $0.length], $0)
            }
            found.withLock { for chunk in chunks { $0[chunk.id] = chunk } }
        }
        return found.value
    }

    // MARK: Maintenance

    public func list(shard: UInt8) async throws -> [StoredChunk] {
        try await index.locations(shard: shard).map {
            StoredChunk(id: $0.id, bytes: Int64($0.length), modified: $0.recordedAt / 1_000_000_000)
        }
    }

    public func verify(_ id: ChunkID) async throws -> Int {
        let chunk = try await load(id)
        let maximum = maximumChunkSize
        return try await threadPool.runIfActive { try chunk.decoded(maximumLength: maximum).count }
    }

    /// Chunks recorded before `modifiedBefore` that no one holds are marked for deletion in the
    /// metadata (`begin`), which from then on refuses to record an upload of them; their
    /// locations are forgotten, packs left with none are deleted, and the deletion is recorded
    /// (`end`), which refuses uploads that started before. Space in packs still partly live
    /// comes back with ``compact(modifiedBefore:)``.
    public func sweep(
        _ ids: [ChunkID], modifiedBefore: Int64,
        begin: @escaping @Sendable ([ChunkID]) async throws -> [ChunkID],
        end: @escaping @Sendable ([ChunkID]) async throws -> Void
    ) async throws -> (count: Int, bytes: Int64) {
        let old = try await index.locations(ids).filter { $0.recordedAt < modifiedBefore }
        guard !old.isEmpty else { return (0, 0) }
        let doomed = try await begin(old.map(\.id))
        guard !doomed.isEmpty else { return (0, 0) }
        let emptied = try await index.removeLocations(doomed)
        try await forEach(Array(emptied)) { try await storage.delete($0) }
        try await end(doomed)
        let lengths = Dictionary(old.map { ($0.id, Int64($0.length)) }) { first, _ in first }
        return (doomed.count, doomed.reduce(0) { $0 + (lengths[$1] ?? 0) })
    }

    /// Deletes packs no location names (older than ``orphanAge`` and `modifiedBefore`) and
    /// rewrites packs older than `modifiedBefore` whose live bytes are under ``rewriteBelow``
    /// of their size: their live entries go into a new pack, the locations still in the old one
    /// move, and the old one is deleted. A reader that raced the move finds the new location on
    /// its second look (``load(_:)``).
    public func compact(modifiedBefore: Int64) async throws -> Compaction {
        var report = Compaction()
        let objects = try await storage.list()
        let usage = try await index.packUsage()
        let now = Int64(Date().timeIntervalSince1970)
        for object in objects {
            let name = object.name
            guard object.modified * 1_000_000_000 < modifiedBefore else { continue }
            guard let live = usage[name] else {
                // Named by no location: a crashed upload's, or one a sweep emptied.
                guard object.modified < now - orphanAge else { continue }
                try await storage.delete(name)
                report.packsRemoved += 1
                report.bytesFreed += object.size
                continue
            }
            guard object.size > 0, Double(live) < Double(object.size) * rewriteBelow else { continue }
            let locations = try await index.locations(pack: name)
            guard !locations.isEmpty, let bytes = try await storage.get(name, limit: Int(object.size)) else { continue }
            let chunks: [EncodedChunk]
            do {
                chunks = try locations.map { try entry(bytes[Int($0.offset)..<Int($0.offset) + $0.length], $0) }
            } catch let error as XferError where error.code == .corruptChunk {
                report.packsDamaged.append(name)
                continue
            }
            let (packed, moved) = pack(chunks, name: Self.newPackName())
            try await storage.put(moved[0].pack, packed)
            if try await index.moveLocations(moved, from: name, sealedWith: sealing?.current.id) == 0 {
                // Another compaction moved them first: this copy is named by nothing.
                try await storage.delete(moved[0].pack)
                continue
            }
            try await storage.delete(name)
            report.packsRewritten += 1
            report.packsRemoved += 1
            report.bytesFreed += object.size - Int64(packed.count)
        }
        return report
    }

    private func forEach<C: Collection & Sendable>(
        _ items: C, _ body: @escaping @Sendable (C.Element) async throws -> Void
    ) async throws
    where C.Element: Sendable {
        try await concurrentForEach(items, width: storage.concurrency, body)
    }
}
