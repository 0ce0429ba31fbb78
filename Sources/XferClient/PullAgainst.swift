import Foundation
import XferCore

/// What a pull offers the server to send chunks against (``ChunkEncoding/zstdAgainst``):
/// for each wanted chunk of a changed file, the chunk that held its place in the version this
/// client has, when its bytes are at hand (in the ``ChunkCache``, or on disk and still
/// verifying). It also decodes what arrives and says which chunks (small files') the cache keeps.
struct PullAgainst: Sendable {
    /// The previous chunk at each wanted chunk's place, by wanted chunk.
    private(set) var candidates: [ChunkID: ChunkID] = [:]
    /// Wanted chunks of small files: the cache keeps them once they arrive (by prefix: one
    /// kept by mistake only takes room in the cache), as many as its ``ChunkCache/Admission`` lets in.
    private(set) var small = ChunkIDPrefixes()
    private var admission: ChunkCache.Admission
    let cache: ChunkCache
    /// Where chunks are on disk.
    let sources: [ChunkID: ChunkSources.Location]

    /// References offered for one download request, and their plain bytes.
    struct Offer: Sendable {
        /// The reference offered, by wanted chunk.
        var references: [ChunkID: ChunkID] = [:]
        /// Each offered reference's plain bytes (verified against its id).
        var plain: [ChunkID: [UInt8]] = [:]
    }

    /// Whether the server reads offers (``ServerFeature/chunksAgainst``); without, nothing is
    /// offered and the cache only keeps what arrives.
    let offers: Bool
    /// How the container's chunks are named and carried: sealed ones are opened with its key,
    /// never offered against a reference, and never kept in the cache.
    let codec: ChunkCodec

    init(cache: ChunkCache, sources: [ChunkID: ChunkSources.Location], offers: Bool, codec: ChunkCodec = .plain) {
        self.cache = cache
        admission = codec.isSealed ? ChunkCache.Admission(maximumBytes: 0) : cache.admission()
        self.sources = sources
        self.offers = offers && codec.sendsAgainst
        self.codec = codec
    }

    /// Notes that `chunk` goes at `offset` of the file at `path` (of `size` bytes), whose
    /// previous chunks `previous` may know.
    mutating func add(
        _ chunk: Manifest.ChunkReference, at offset: Int64, in path: String, size: Int64, previous: PreviousChunks
    ) {
        let id = chunk.id
        if !small.contains(id), admission.admits(chunk.length, ofFileSized: size) { small.insert(id) }
        if offers, candidates[id] == nil, let reference = previous.reference(forChunkAt: offset, in: path),
            reference != id
        {
            candidates[id] = reference
        }
    }

    /// The references to offer for `batch`: those whose bytes are at hand (a cache or a file
    /// that cannot be read only offers nothing: the chunks come whole).
    func offer(for batch: [ChunkID]) -> Offer {
        let wanted = batch.compactMap { id in candidates[id].map { (id: id, reference: $0) } }
        guard !wanted.isEmpty else { return Offer() }
        var plain = (try? cache.plain(wanted.map(\.reference))) ?? [:]
        var buffer: [UInt8] = []
        for (_, reference) in wanted where plain[reference] == nil {
            guard let source = sources[reference] else { continue }
            let fd = open(source.path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            if buffer.count < source.length { buffer = [UInt8](repeating: 0, count: source.length) }
            if (try? PullEngine.readVerified(
                fd, offset: source.offset, chunk: Manifest.ChunkReference(id: reference, length: source.length),
                into: &buffer)) == true
            {
                plain[reference] = Array(buffer[0..<source.length])
            }
        }
        var offer = Offer(plain: plain)
        for (id, reference) in wanted where plain[reference] != nil { offer.references[id] = reference }
        return offer
    }

    /// The plain bytes of a downloaded chunk, every check made but, for a plain container's
    /// chunk, that of its id (``ArrivingChunks`` checks several at once): one sent against a
    /// reference is read with the one offered for it (any other is refused, as not at hand).
    /// - Returns: The bytes, and whether they are checked already.
    /// - Throws: `corrupt_chunk`, `too_large`, `missing_chunks` (against a reference not offered).
    func inflate(_ chunk: EncodedChunk, _ offer: Offer, maximumLength: Int) throws -> (plain: [UInt8], checked: Bool) {
        let reference = chunk.reference.flatMap { id in
            offer.references[chunk.id] == id ? offer.plain[id].map { (id, $0) } : nil
        }
        return try codec.inflate(chunk, maximumLength: maximumLength, reference: reference)
    }

    /// Adds a checked chunk of a small file to `kept`, as the cache keeps it (``keep(_:)``).
    /// - Returns: The bytes added.
    func keepIfSmall(_ chunk: EncodedChunk, plain: [UInt8], kept: inout [EncodedChunk]) throws -> Int {
        guard small.contains(chunk.id) else { return 0 }
        kept.append(try plain.withUnsafeBytes { try chunk.stored(plain: $0) })
        return kept[kept.count - 1].payload.count
    }

    /// The plain bytes of a downloaded chunk, checked against its id: one sent against a
    /// reference is read with the one offered for it (any other is refused, as not at hand).
    /// A small file's chunk is added to `kept` as the cache keeps it (``keep(_:)``).
    /// - Throws: `corrupt_chunk`, `too_large`, `missing_chunks` (against a reference not offered).
    func decode(_ chunk: EncodedChunk, _ offer: Offer, maximumLength: Int, kept: inout [EncodedChunk]) throws -> [UInt8]
    {
        let (plain, checked) = try inflate(chunk, offer, maximumLength: maximumLength)
        if !checked { try chunk.check(plain, hashingTo: ChunkID.of(plain)) }
        _ = try keepIfSmall(chunk, plain: plain, kept: &kept)
        return plain
    }

    /// Keeps downloaded small files' chunks in the cache; one that cannot be written costs only
    /// bytes on a later transfer.
    func keep(_ chunks: [EncodedChunk]) {
        try? cache.keep(chunks)
    }
}
