import XferCore

/// One download request's chunks as they arrive: each decoded at once, then a few at a time
/// their ids checked together (``EncodedChunk/checkAll(_:_:)``: two SHA-256s in one loop where
/// the processor can, ``SHA256Lanes``), and only once checked kept for the cache and handed to
/// ``DownloadRuns`` to be written. Nothing unchecked is written or kept.
struct ArrivingChunks {
    /// Chunks checked together at most, and their bytes.
    static let checkedTogether = 16
    static let checkedBytes = 1 << 20
    /// Bytes of kept chunks held before they go to the cache.
    static let keptBatchBytes = 1 << 20

    private struct Arrived {
        var chunk: EncodedChunk
        var plain: [UInt8]
        var download: ChunkSourcing.Download
    }

    let against: PullAgainst
    let offer: PullAgainst.Offer
    let maximumLength: Int
    private var runs: DownloadRuns
    private var unchecked: [Arrived] = []
    private var uncheckedBytes = 0
    private var kept: [EncodedChunk] = []
    private var keptBytes = 0

    init(against: PullAgainst, offer: PullAgainst.Offer, maximumLength: Int, runs: DownloadRuns) {
        self.against = against
        self.offer = offer
        self.maximumLength = maximumLength
        self.runs = runs
    }

    /// Takes a chunk that arrived for `download`.
    /// - Throws: `corrupt_chunk` for a chunk not of the length the manifest declares, or (for
    ///   it or one waiting with it) not of its id; what decoding and writing throw.
    mutating func receive(_ chunk: EncodedChunk, for download: ChunkSourcing.Download) throws {
        let (plain, checked) = try against.inflate(chunk, offer, maximumLength: maximumLength)
        // The hash vouches for the bytes; the manifest's length must agree too, or the file
        // would be written at a size the server made up.
        guard plain.count == download.chunk.length else {
            throw XferError(
                .corruptChunk,
                "chunk \(chunk.id) holds \(plain.count) bytes, but the manifest declares \(download.chunk.length); nothing was published"
            )
        }
        let arrived = Arrived(chunk: chunk, plain: plain, download: download)
        guard !checked else { return try accept(arrived) }
        unchecked.append(arrived)
        uncheckedBytes += plain.count
        if unchecked.count >= Self.checkedTogether || uncheckedBytes >= Self.checkedBytes { try checkWaiting() }
    }

    /// After the last chunk: everything checked, written, and kept.
    mutating func finish() throws {
        try checkWaiting()
        try runs.flush()
        against.keep(kept)
    }

    /// After a failure: what arrived and checks out is written (a pull resumed later takes it
    /// from the staging copy); chunks checked together with one that does not are dropped too.
    mutating func writeWhatChecksOut() {
        try? checkWaiting()
        try? runs.flush()
    }

    private mutating func checkWaiting() throws {
        guard !unchecked.isEmpty else { return }
        let batch = unchecked
        unchecked.removeAll(keepingCapacity: true)
        uncheckedBytes = 0
        try EncodedChunk.checkAll(batch.map(\.chunk), batch.map(\.plain))
        for arrived in batch { try accept(arrived) }
    }

    private mutating func accept(_ arrived: Arrived) throws {
        keptBytes += try against.keepIfSmall(arrived.chunk, plain: arrived.plain, kept: &kept)
        if keptBytes >= Self.keptBatchBytes {
            against.keep(kept)
            kept.removeAll(keepingCapacity: true)
            keptBytes = 0
        }
        try runs.add(arrived.plain, payloadBytes: arrived.chunk.payload.count, to: arrived.download)
    }
}
