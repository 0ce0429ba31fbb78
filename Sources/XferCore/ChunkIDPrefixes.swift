/// A set of chunk ids kept by their first 64 bits: a quarter of a `Set<ChunkID>`'s memory
/// (a push of 200,000 new chunks held 25 MB in one, at its peak).
///
/// It may answer that it holds an id when it holds only another with the same first 8 bytes
/// (about one chance in 10^8 for a million ids), so it is for decisions a later check
/// corrects: a push that skips a chunk this way meets the commit's `missing_chunks` and sends
/// it then. Never for deciding what may be deleted.
public struct ChunkIDPrefixes: Sendable, ExpressibleByArrayLiteral {
    private var prefixes: Set<UInt64>

    /// An empty set.
    public init() { prefixes = [] }

    /// A set of `ids`.
    public init(_ ids: some Sequence<ChunkID>) {
        prefixes = Set(ids.lazy.map(\.prefix))
    }

    /// A set of these ids.
    public init(arrayLiteral ids: ChunkID...) { self.init(ids) }

    /// Adds `id`.
    /// - Returns: Whether it was not there already (as far as a prefix tells).
    @discardableResult
    public mutating func insert(_ id: ChunkID) -> Bool { prefixes.insert(id.prefix).inserted }

    /// Whether `id` (or an id sharing its first 64 bits) is in the set.
    public func contains(_ id: ChunkID) -> Bool { prefixes.contains(id.prefix) }

    /// This set and `other`'s ids together.
    public func union(_ other: ChunkIDPrefixes) -> ChunkIDPrefixes {
        var result = self
        result.prefixes.formUnion(other.prefixes)
        return result
    }

    /// Adds `other`'s ids.
    public mutating func formUnion(_ other: some Sequence<ChunkID>) {
        for id in other { prefixes.insert(id.prefix) }
    }

    /// Adds the ids of every chunk `manifest` references (without a list of them all).
    public mutating func formUnion(chunksOf manifest: Manifest) {
        formUnion(manifest.entries.allChunks.chunkIDs)
    }

    /// How many distinct prefixes it holds.
    public var count: Int { prefixes.count }
    /// Whether it holds none.
    public var isEmpty: Bool { prefixes.isEmpty }
}
