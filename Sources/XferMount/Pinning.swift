import XferClient
import XferCore
import XferProtocol

/// Keeping documents on this device (`xfer mount pin`, iCloud's "Keep Downloaded"): a pinned
/// document's chunks are fetched into the on-disk cache's pinned segments, which are never
/// evicted, and a running mount fetches a pinned document's new versions as they come. Also
/// what `xfer status` says of a mount's documents: remote, cached or pinned.
public struct Pinning: Sendable {
    /// What pinning one document did.
    public struct Report: Sendable, Codable, Hashable {
        public var document: String
        public var version: Int64
        /// Distinct chunks the version has, and those fetched now (the rest were held here).
        public var chunks: Int
        public var chunksFetched: Int
        public var bytesFetched: Int64
    }

    /// Where a document's data is.
    public enum State: String, Sendable, Codable {
        /// None of its chunks is here.
        case remote
        /// Some are (`cachedBytes` says how much).
        case partial
        /// All are, in the cache (which may let them go).
        case cached
        /// All are, pinned.
        case pinned
    }

    /// One document's state.
    public struct DocumentState: Sendable, Codable, Hashable {
        public var path: String
        public var version: Int64
        public var state: State
        public var bytes: Int64
        public var cachedBytes: Int64
    }

    /// The client it fetches through.
    public let client: DocumentClient
    let cache: SegmentChunkCache

    /// Pinning through `client` into `cache`.
    public init(client: DocumentClient, cache: SegmentChunkCache) {
        self.client = client
        self.cache = cache
    }

    func key(_ path: String) -> String { client.cacheKey(path) }

    /// Pins document `path`'s current version.
    /// - Throws: `not_found` for no such document; the server's errors.
    public func pin(_ path: String) async throws -> Report {
        try await pin(try await client.stat(path))
    }

    /// Pins the version `info` describes: its manifest is kept (it opens without the server),
    /// its chunks held here are moved to pinned segments, the rest fetched (checked) in
    /// requests of about 8 MiB.
    public func pin(_ info: DocumentInfo) async throws -> Report {
        let manifest = try await client.manifest(of: info)
        try cache.keepManifest(key(info.path.value), version: info.version, bytes: manifest.encoded())
        let lengths = Self.lengths(manifest)
        let missing = try cache.pin(key(info.path.value), version: info.version, chunks: Array(lengths.keys))
        var report = Report(
            document: info.path.value, version: info.version, chunks: lengths.count, chunksFetched: 0, bytesFetched: 0)
        for batch in Self.batches(missing, lengths: lengths) {
            var fetched: [EncodedChunk] = []
            report.bytesFetched += Int64(try await client.fetchChunks(batch) { chunk, _ in fetched.append(chunk) })
            try cache.keep(fetched, pinned: true)
            report.chunksFetched += fetched.count
        }
        return report
    }

    /// Unpins document `path`: its chunks stay cached until the cache needs the room.
    /// - Returns: Whether it was pinned.
    @discardableResult
    public func unpin(_ path: String) throws -> Bool {
        try cache.unpin(key(path))
    }

    /// Whether document `path` is pinned.
    public func isPinned(_ path: String) throws -> Bool {
        try cache.pins()[key(path)] != nil
    }

    /// Where each of `documents`' data is (directories left out), from what this device holds
    /// alone: a document whose manifest it does not keep at that version cannot open without
    /// the server, so it is remote (its bytes as the listing says); the others are cached,
    /// pinned or partial as their chunks are held. No request is made, so a container of
    /// 100,000 documents costs two queries and one per kept manifest.
    public func states(of documents: [DocumentInfo]) throws -> [DocumentState] {
        let pins = try cache.pins()
        let kept = try cache.keptManifests()
        return try documents.filter { $0.kind != .directory }.map { info in
            let key = key(info.path.value)
            guard kept[key] == info.version, let bytes = try cache.manifest(key, version: info.version),
                let manifest = try? Manifest(decoding: bytes)
            else {
                return DocumentState(
                    path: info.path.value, version: info.version, state: .remote, bytes: info.size, cachedBytes: 0)
            }
            return try state(of: info, manifest: manifest, pinned: pins[key] != nil)
        }
    }

    private func state(of info: DocumentInfo, manifest: Manifest, pinned: Bool) throws -> DocumentState {
        let lengths = Self.lengths(manifest)
        let held = try cache.holds(Array(lengths.keys))
        let total = lengths.values.reduce(Int64(0)) { $0 + Int64($1) }
        let cached = held.reduce(Int64(0)) { $0 + Int64(lengths[$1] ?? 0) }
        let state: State =
            held.count == lengths.count ? (pinned ? .pinned : .cached) : held.isEmpty ? .remote : .partial
        return DocumentState(
            path: info.path.value, version: info.version, state: state, bytes: total, cachedBytes: cached)
    }

    /// Every distinct chunk of a version, with its length.
    static func lengths(_ manifest: Manifest) -> [ChunkID: Int] {
        var lengths: [ChunkID: Int] = [:]
        for index in manifest.entries.indices {
            for reference in manifest.entries.chunks(at: index) { lengths[reference.id] = reference.length }
        }
        return lengths
    }

    /// `ids` in groups of about 8 MiB of plain bytes.
    static func batches(_ ids: [ChunkID], lengths: [ChunkID: Int]) -> [[ChunkID]] {
        var batches: [[ChunkID]] = []
        var current: [ChunkID] = []
        var bytes = 0
        for id in ids {
            current.append(id)
            bytes += lengths[id] ?? 0
            if bytes >= 8 << 20 {
                batches.append(current)
                (current, bytes) = ([], 0)
            }
        }
        if !current.isEmpty { batches.append(current) }
        return batches
    }
}
