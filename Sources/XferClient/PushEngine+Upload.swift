import Foundation
import XferCore
import XferProtocol

/// A push's reading and uploading: the pipeline hashes files on a Dispatch thread while a task
/// asks which new chunks the server lacks and uploads them, several requests in flight.
extension PushEngine {
    struct Counters: Sendable {
        var bytesHashed: Int64 = 0
        var chunksSent = 0
        var bytesSent: Int64 = 0
        var plainBytesSent: Int64 = 0
        /// For a batch: the same three, by document (``Location/owner``).
        var byOwner: [Int: Counters] = [:]

        /// Counts uploaded chunks, for the whole push and for their documents.
        mutating func sent(_ chunks: [(payload: Int, plain: Int)], owners: [Int]) {
            for (chunk, owner) in zip(chunks, owners) {
                chunksSent += 1
                bytesSent += Int64(chunk.payload)
                plainBytesSent += Int64(chunk.plain)
                byOwner[owner, default: Counters()].chunksSent += 1
                byOwner[owner, default: Counters()].bytesSent += Int64(chunk.payload)
                byOwner[owner, default: Counters()].plainBytesSent += Int64(chunk.plain)
            }
        }
    }

    /// The files a push reads, in order: each one's owner (which document of a batch) and
    /// path, made only when the pipeline reaches the file, so a tree of many files holds no
    /// array of full paths.
    struct FilesToRead: Sendable {
        /// Which document of a batch each file belongs to (0 for a single push).
        var owners: [Int]
        /// The path of the file at a position.
        var path: @Sendable (Int) -> String
        /// The stamp the walk saw for the file at a position: it must still be the file's once
        /// its end has been read (``PushEngine/checkStillAsRead(_:before:after:)``).
        var stamp: @Sendable (Int) -> FileStamp?
        /// Where a batch's read puts each document's file that was written while it was read (by
        /// owner), so the read goes on for the others; `nil`, such a file stops the read.
        var changed: Locked<[Int: any Error]>? = nil

        var count: Int { owners.count }
        var isEmpty: Bool { owners.isEmpty }
        static let none = FilesToRead(owners: [], path: { _ in "" }, stamp: { _ in nil })
    }

    /// Hashes `files` in the pipeline on a background thread while this task asks which new
    /// chunks the server lacks and uploads them, several requests in flight.
    /// - Returns: The chunk list of each file read, by position in `files`.
    /// - Parameters:
    ///   - skip: Chunks not to ask about or send (the server has them, or they are in `initial`).
    ///   - previous: Changed small files' previous chunks, which new chunks are sent against.
    ///   - cache: Where those previous chunks' bytes are, and where sent small chunks are kept.
    func upload(
        initial: [Location], files: FilesToRead, skip: ChunkIDPrefixes, total: Int64,
        previous: PreviousChunks = PreviousChunks(), cache: ChunkCache? = nil,
        counters: Locked<Counters>, progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws
        -> ChunkLists
    {
        let (batches, continuation) = AsyncStream<[Location]>.makeStream()
        let stop = Locked(false)
        let lists = Locked(ChunkLists())  // set once, when hashing ends
        let options = options
        let askBatch = max(1, options.askBatch)
        // Hashing may outrun the link: the pipeline waits while this many of its batches are
        // not yet taken, so what waits to be asked about is bounded, not the whole tree's chunks.
        let slots = BatchSlots(Self.batchesAhead, stop: stop)

        let report: @Sendable () -> Void = {
            let c = counters.value
            progress(TransferProgress(bytesDone: c.bytesHashed, bytesTotal: total, bytesOnWire: c.bytesSent))
        }

        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { continuation.finish() }
                var start = 0
                while start < initial.count {
                    continuation.yield(Array(initial[start..<min(initial.count, start + askBatch)]))
                    start += askBatch
                }
                guard !files.isEmpty else { return }
                let hashed = try await Self.runPipeline(
                    files: files, options: options.pipeline, skip: skip, batch: askBatch,
                    previous: previous,
                    stop: stop, counters: counters,
                    yield: { batch in if slots.take() { continuation.yield(batch) } },
                    report: report)
                lists.withLock { $0 = hashed }
            }
            group.addTask {
                // However this ends (an error, cancellation), the pipeline must not wait for it.
                defer { slots.close() }
                // (The first batches, the known files' chunks, are yielded before the pipeline starts
                // and took no slot.)
                var unslotted = (initial.count + askBatch - 1) / askBatch  // (askBatch is at least 1)
                try await self.sendMissing(
                    batches,
                    taken: {
                        if unslotted > 0 { unslotted -= 1 } else { slots.give() }
                    }, cache: cache, counters: counters, report: report)
            }
            try await group.waitForAll()
            return lists.value
        }
    }

    /// How many batches of new chunks the pipeline may have waiting to be asked about.
    static let batchesAhead = 4

    /// Room for batches between the pipeline's thread, which waits for a slot, and the task
    /// that asks about them, which frees one as it takes each of the pipeline's batches.
    /// ``close()`` ends the push's side: it sets `stop` and wakes a pipeline that waits.
    final class BatchSlots: Sendable {
        private let free: DispatchSemaphore
        private let stop: Locked<Bool>

        init(_ count: Int, stop: Locked<Bool>) {
            // Made empty and then given its slots: libdispatch traps when a semaphore goes with
            // a count below the one it was made with (a push that stops with slots taken).
            free = DispatchSemaphore(value: 0)
            for _ in 0..<count { free.signal() }
            self.stop = stop
        }

        /// Waits for a slot (on a thread that may block, never a task's); `false` once closed.
        func take() -> Bool {
            if stop.value { return false }
            free.wait()
            guard !stop.value else {
                free.signal()  // passes the wake-up on to any other waiter
                return false
            }
            return true
        }

        /// Frees a slot (a batch was taken).
        func give() { free.signal() }

        /// Sets `stop`; a `take` waiting now or called later returns `false` at once.
        func close() {
            stop.withLock { $0 = true }
            free.signal()
        }
    }

    /// What ``runPipeline(files:options:skip:batch:previous:stop:counters:yield:report:)`` gathers
    /// from the pipeline's callbacks. They arrive in order on one serial queue, the only place this
    /// state is touched; the caller reads it once the pipeline has returned.
    private final class PipelineCollector: @unchecked Sendable {
        var lists: ChunkLists.Builder
        var pending: [Location] = []
        /// Chunks already asked about or sent: a chunk mistaken for one of them (a shared
        /// 64-bit prefix) is caught by the commit's `missing_chunks` and sent then.
        var seen: ChunkIDPrefixes
        var path = ""  // the file being read
        var unreportedBytes: Int64 = 0
        var size: Int64 = .max  // of the file being read (.max: not known)
        /// The first chunk is reported at once (a push shows it has begun to read).
        var lastReport = ContinuousClock.now - .seconds(1)
        init(files: Int, seen: ChunkIDPrefixes) {
            lists = ChunkLists.Builder(files: files)
            self.seen = seen
        }

        /// Moves the bytes hashed since the last call into the shared counters.
        func publish(_ counters: Locked<Counters>) {
            let bytes = unreportedBytes
            counters.withLock { $0.bytesHashed += bytes }
            unreportedBytes = 0
        }
    }

    /// Runs the chunk pipeline on a Dispatch thread, yielding batches of new chunk locations.
    /// - Returns: The chunk list of each file, by position in `files`.
    private static func runPipeline(
        files: FilesToRead, options: ChunkPipeline.Options, skip: ChunkIDPrefixes,
        batch: Int, previous: PreviousChunks,
        stop: Locked<Bool>, counters: Locked<Counters>,
        yield: @escaping @Sendable ([Location]) -> Void,
        report: @escaping @Sendable () -> Void
    ) async throws -> ChunkLists {
        let collector = PipelineCollector(files: files.count, seen: skip)
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                do {
                    try ChunkPipeline(options: options).run((0..<files.count).lazy.map { .file(files.path($0)) }) {
                        event in
                        if stop.value { throw XferError(.cancelled, "push stopped") }
                        switch event {
                        case .fileStarted(_, let path, let size):
                            collector.path = path
                            collector.size = size ?? .max
                        case .chunk(let file, let record):
                            collector.lists.append(
                                Manifest.ChunkReference(id: record.id, length: record.length), toFile: file)
                            collector.unreportedBytes += Int64(record.length)
                            if collector.seen.insert(record.id) {
                                let path = collector.path
                                collector.pending.append(
                                    Location(
                                        id: record.id, file: path, offset: record.offset,
                                        length: record.length, owner: files.owners[file],
                                        reference: previous.reference(forChunkAt: record.offset, in: path),
                                        keep: collector.size <= ChunkCache.fileLimit))
                                if collector.pending.count >= batch {
                                    yield(collector.pending)
                                    collector.pending = []
                                }
                            }
                            if ContinuousClock.now - collector.lastReport > .milliseconds(100) {
                                collector.lastReport = ContinuousClock.now
                                collector.publish(counters)
                                report()
                            }
                        case .fileFinished(let file, _, _, let stamp):
                            // A file written while it was read stops the read (a batch's: fails its
                            // document): nothing is committed from it.
                            do {
                                try Self.checkStillAsRead(collector.path, before: files.stamp(file), after: stamp)
                            } catch {
                                guard let changed = files.changed else { throw error }
                                let owner = files.owners[file]
                                changed.withLock { if $0[owner] == nil { $0[owner] = error } }
                            }
                        }
                    }
                    if !collector.pending.isEmpty { yield(collector.pending) }
                    // Stopped with batches not handed over (the asking ended): not a finished read.
                    if stop.value { throw XferError(.cancelled, "push stopped") }
                    collector.publish(counters)
                    done.resume()
                } catch {
                    done.resume(throwing: error)
                }
            }
        }
        return collector.lists.finished()
    }

    /// Asks about each batch, then uploads what is missing in bodies of about
    /// `uploadBatchBytes`, at most `uploadsInFlight` at once.
    private func sendMissing(
        _ batches: AsyncStream<[Location]>, taken: () -> Void, cache: ChunkCache?, counters: Locked<Counters>,
        report: @escaping @Sendable () -> Void
    ) async throws {
        let connection = remote.connection
        let container = remote.container
        let policy = options.compression
        let codec = options.pipeline.codec
        // A server that reads large bodies gets far fewer requests, each made while it is sent;
        // the first few are small all the same, so a small push still keeps every upload (and
        // the cores that compress for it) busy at once.
        let large = await connection.features().contains(.largeUploads)
        var launched = 0
        func bodyLimits() -> (bytes: Int, frames: Int) {
            guard large && launched >= options.uploadsInFlight else {
                return (options.uploadBatchBytes, ChunkFrameLimits().maximumFrames)
            }
            // Within the server's body limit (64 MiB) and the plain bytes a body may declare.
            return (
                min(options.largeUploadBytes, 48 << 20),
                min(options.largeUploadFrames, ChunkFrameLimits.largeUploadFrames)
            )
        }
        try await withThrowingTaskGroup(of: Void.self) { uploads in
            var running = 0
            // Charged only for chunks the server lacks: one it has is not sent, so not kept.
            var admission = cache?.admission() ?? ChunkCache.Admission(maximumBytes: 0)
            var body: [Location] = []
            var bodyPlain = 0
            func launch() async throws {
                guard !body.isEmpty else { return }
                if running >= options.uploadsInFlight {
                    try await uploads.next()
                    running -= 1
                }
                let locations = body
                body = []
                bodyPlain = 0
                running += 1
                launched += 1
                uploads.addTask {
                    let (result, sizes) = try await Self.upload(
                        locations, streamed: large, policy: policy, codec: codec, cache: cache, connection: connection,
                        container: container)
                    guard result.received == locations.count else {
                        throw XferError(
                            .unavailable,
                            "the server received \(result.received) of the \(locations.count) chunks sent in one request; push again"
                        )
                    }
                    counters.withLock { $0.sent(sizes, owners: locations.map(\.owner)) }
                    // Chunks sent against a reference the server could not use go again, whole.
                    let unresolved = Set((result.unresolved ?? []).compactMap(ChunkID.init(hex:)))
                    if !unresolved.isEmpty {
                        let again = locations.filter { unresolved.contains($0.id) }.map { location in
                            var whole = location
                            whole.reference = nil
                            whole.keep = false
                            return whole
                        }
                        let (_, sizes) = try await Self.upload(
                            again, streamed: large, policy: policy, codec: codec, cache: nil, connection: connection,
                            container: container)
                        counters.withLock { $0.sent(sizes, owners: again.map(\.owner)) }
                    }
                    report()
                }
            }
            for await batch in batches {
                taken()
                let missing = Set(try await connection.missing(batch.map(\.id), in: container))
                for var location in batch where missing.contains(location.id) {
                    location.keep = location.keep && admission.admits(location.length)
                    body.append(location)
                    bodyPlain += location.length
                    let limits = bodyLimits()
                    if bodyPlain >= limits.bytes || body.count >= limits.frames { try await launch() }
                }
            }
            try await launch()
            try await uploads.waitForAll()
        }
    }

    /// Uploads `locations`' chunks in one request: made whole when the server reads only
    /// bodies of 1,024 frames, sent while it is made, a megabyte of chunks at a time, when it
    /// offers ``ServerFeature/largeUploads``. The small files' chunks go to the cache.
    /// - Returns: The server's answer, and each chunk's payload and plain sizes.
    private static func upload(
        _ locations: [Location], streamed: Bool, policy: CompressionPolicy, codec: ChunkCodec, cache: ChunkCache?,
        connection: ServerConnection, container: ContainerName
    ) async throws -> (result: UploadResult, sizes: [(payload: Int, plain: Int)]) {
        var framer = ChunkFramer(locations, policy: policy, codec: codec, cache: cache)
        let result: UploadResult
        if streamed {
            // Each try (ServerConnection's retry rule) frames the chunks anew.
            let current = Locked(framer)
            var first = true
            result = try await connection.upload(
                in: container,
                retrying: {
                    let attempt = first ? framer : ChunkFramer(locations, policy: policy, codec: codec, cache: cache)
                    first = false
                    current.withLock { $0 = attempt }
                    return {
                        guard let piece = try attempt.piece(plainBytes: uploadPieceBytes) else { return nil }
                        try? cache?.keep(piece.kept)  // a cache that cannot be written costs only bytes next time
                        return piece.bytes
                    }
                })
            framer = current.value
        } else {
            // The chunks are let go once framed: only the body is held while it is sent.
            let whole = try framer.piece(plainBytes: .max)
            result = try await connection.upload(frames: whole?.bytes ?? ChunkFrames.magic, in: container)
            try? cache?.keep(whole?.kept ?? [])
        }
        return (result, framer.framedSizes)
    }

    /// Plain bytes of chunks framed at a time into a body sent while it is made.
    static let uploadPieceBytes = 1 << 20
}
