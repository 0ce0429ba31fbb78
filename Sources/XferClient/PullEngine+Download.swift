import XferCore
import XferProtocol

// A pull's downloads: what none of its sources on disk yields, asked of the server in requests
// several in flight, each chunk verified, checked against the manifest and written to every
// place it goes.
extension PullEngine {
    /// The smallest download request a pull makes when it splits its chunks among the requests in flight.
    static let smallestBatchBytes = 256 << 10

    /// How a pull's downloads (their plain lengths, in order) are split into requests: runs in
    /// order, each closed once it reaches `bytes` plain bytes (so over it by less than a chunk)
    /// or the protocol's most ids, and, for a pull of less than `inFlight` × `bytes`, once it
    /// reaches about a share of the whole for each request in flight (never less than
    /// ``smallestBatchBytes``; chunks larger than a share make fewer requests; `inFlight` 1:
    /// requests of `bytes`). Each request's chunks are decoded, checked and written by its own
    /// task, so a source tree of 9 MiB is written by several at once, not mostly by the one that
    /// carried its first 8 MiB. Downloads that write fewer than 64 files are split by `bytes`
    /// alone (`inFlight` 1): for them more requests cost more than they save (docs/PERFORMANCE.md,
    /// "Restores: durable, and on every core").
    static func batches<Lengths: Collection<Int>>(_ lengths: Lengths, bytes maximum: Int, inFlight: Int) -> [Range<Int>]
    {
        let total = lengths.reduce(0, +)
        let share = (total + max(1, inFlight) - 1) / max(1, inFlight)
        let limit = max(1, min(maximum, max(Self.smallestBatchBytes, share)))
        var batches: [Range<Int>] = []
        var start = 0
        var bytes = 0
        for (index, length) in lengths.enumerated() {
            bytes += length
            if bytes >= limit || index + 1 - start >= ProtocolLimits.maximumIDsPerRequest {
                batches.append(start..<index + 1)
                start = index + 1
                bytes = 0
            }
        }
        if start < lengths.count { batches.append(start..<lengths.count) }
        return batches
    }

    /// Downloads `order` in batches, several in flight, verifying each chunk and writing it to every target.
    /// Downloads that write 64 files or more (of a package, which one syncfs makes durable) are
    /// split evenly among the requests in flight, their files' creation being most of the work;
    /// others are asked in requests of the most bytes.
    func download(
        _ order: ChunkSourcing.Downloads, files: StagingFiles,
        maximumLength: Int, against: PullAgainst, total: Int64, counters: Locked<Counters>,
        early: EarlyWriteback?, progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws {
        // Counted among the downloads, not the package: an edit pull of a large package that
        // fetches one changed file asks as a pull of that one file would (a single file's pull
        // writes one).
        let even = order.writeFiles(atLeast: Self.syncWholeFileSystemFrom)
        let batches = Self.batches(
            order.map(\.chunk.length), bytes: options.downloadBatchBytes,
            inFlight: even ? options.downloadsInFlight : 1)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for batch in batches {
                if running >= options.downloadsInFlight {
                    try await group.next()
                    running -= 1
                }
                running += 1
                group.addTask {
                    try await fetch(
                        order, batch, maximumLength: maximumLength, against: against, files: files,
                        written: { plainBytes, payloadBytes, targets in
                            early?.wrote(plainBytes * targets)
                            let c = counters.withLock { c in
                                c.chunksFetched += 1
                                c.bytesFetched += Int64(payloadBytes)
                                c.bytesDone += Int64(plainBytes * targets)
                                return c
                            }
                            progress(
                                TransferProgress(
                                    bytesDone: c.bytesDone, bytesTotal: total, bytesOnWire: c.bytesFetched))
                        })
                }
            }
            try await group.waitForAll()
        }
    }

    /// Asks for the downloads at positions `batch` of `order` in one request and writes each
    /// chunk, decoded and checked, to its places (in runs: ``DownloadRuns``), telling `written`.
    /// - Throws: `corrupt_chunk` for a chunk not asked for, sent twice, or not of the length the
    ///   manifest declares.
    private func fetch(
        _ order: ChunkSourcing.Downloads, _ batch: Range<Int>, maximumLength: Int,
        against: PullAgainst, files: StagingFiles, written: @escaping (Int, Int, Int) -> Void
    ) async throws {
        let ids = order[batch].map(\.chunk.id)
        // Which download each asked chunk is: a map of this request's chunks only,
        // each taken out as it arrives (a chunk sent twice is refused, so with the
        // count of chunks checked, every asked one came).
        var asked = Dictionary(zip(ids, batch), uniquingKeysWith: { first, _ in first })
        let offer = against.offer(for: ids)
        var arriving = ArrivingChunks(
            against: against, offer: offer, maximumLength: maximumLength,
            runs: DownloadRuns(files: files, written: written))
        do {
            try await remote.connection.download(ids, against: offer.references, in: remote.container) { chunk in
                guard let index = asked.removeValue(forKey: chunk.id) else {
                    throw XferError(
                        .corruptChunk,
                        "the server sent chunk \(chunk.id), which was not asked for or was sent already; nothing was published"
                    )
                }
                try arriving.receive(chunk, for: order[index])
            }
        } catch {
            arriving.writeWhatChecksOut()
            throw error
        }
        try arriving.finish()
    }
}
