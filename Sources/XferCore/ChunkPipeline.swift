import Dispatch

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Turns files into ordered chunk records using every core, with memory bounded by
/// configuration rather than by file or tree size.
///
/// Reading and cutting run serially on the calling thread, file after file; chunks are
/// hashed (and, if asked, compressed) in batches on the workers, one serial queue a core, each
/// batch to the least loaded, or, when chunks are only hashed, on the reader itself once every
/// worker is busy with a batch (the reader cuts faster than a worker hashes, so it takes a
/// share of the hashing instead of waiting). A serial queue puts the results back in
/// input order and hands them to the caller. Read buffers ("arenas")
/// are counted by a semaphore and released only once every chunk cut from them has been
/// delivered, so a slow consumer slows the reader instead of growing memory.
public struct ChunkPipeline: Sendable {
    /// Tuning for a pipeline.
    public struct Options: Sendable, Hashable {
        /// Chunk size limits.
        public var chunker: ChunkerConfiguration = .default
        /// How chunks are cut and named (``ChunkCodec``): plain (the plain Gear table and
        /// SHA-256), or under an end-to-end encrypted container's key (its Gear table cuts, its
        /// keyed ids name each chunk, and a chunk compressed here is sealed).
        public var codec = ChunkCodec.plain
        /// Compress chunk payloads under this policy; `nil` hashes only.
        public var compression: CompressionPolicy? = nil
        /// Bytes per read buffer; raised to hold a maximum chunk plus two reads.
        public var bufferSize: Int = 4 << 20
        /// Bytes read per system call.
        public var readSize: Int = 1 << 20
        /// Bound on buffered input bytes (read but not yet delivered); at least two buffers.
        public var maximumBytesInFlight: Int = 8 << 20
        /// Chunks are handed to the workers in batches of about this many bytes, so that
        /// trees of tiny files do not pay a dispatch per file.
        public var batchSize: Int = 512 << 10
        /// Hash and compress on the workers (`true`) or inline on the reader (`false`, the
        /// serial reference the tests compare against).
        public var parallel: Bool = true
        /// Workers hashing and compressing beside the reader: one a core by default.
        public var workers: Int = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))

        /// The defaults: 16/64/256 KiB chunks, hash only, 8 MiB in flight (two 4 MiB buffers:
        /// one read into while the other is hashed; 16 MiB was no faster here and held 5–9 MiB more).
        public init() {}
    }

    /// The options in use.
    public let options: Options

    /// Creates a pipeline.
    /// - Parameter options: Tuning.
    public init(options: Options = Options()) {
        self.options = options
    }

    /// Runs the pipeline over `inputs` and blocks until every event has been delivered.
    ///
    /// - Parameters:
    ///   - inputs: Files or in-memory bytes, reported in this order (numbered from 0). Each is
    ///     taken from the collection when the reader reaches it, so a lazy one (paths made as
    ///     they are needed) keeps no array of every path.
    ///   - onEvent: Called on one serial queue, in order: for each input `fileStarted`, its
    ///     chunks, `fileFinished`. Throwing from it stops the pipeline.
    /// - Throws: The first error: an unreadable file (`io`, `not_found`), a compression
    ///   failure, or what `onEvent` threw. Events already delivered stay delivered.
    public func run(_ inputs: some Sequence<ChunkInput>, onEvent: @escaping @Sendable (ChunkEvent) throws -> Void)
        throws
    {
        let run = PipelineRun(options: options, onEvent: onEvent)
        try run.read(inputs)
    }

    /// Chunks `inputs` and collects every event.
    /// - Parameter inputs: Files or in-memory bytes.
    /// - Returns: The events in order.
    /// - Throws: As ``run(_:onEvent:)``.
    public func events(for inputs: [ChunkInput]) throws -> [ChunkEvent] {
        let collected = Locked<[ChunkEvent]>([])
        try run(inputs) { event in collected.withLock { $0.append(event) } }
        return collected.value
    }

    /// Chunks `inputs` and collects the records per input.
    /// - Parameter inputs: Files or in-memory bytes.
    /// - Returns: For each input, its chunk records in order.
    /// - Throws: As ``run(_:onEvent:)``.
    public func records(for inputs: [ChunkInput]) throws -> [[ChunkRecord]] {
        var result = Array(repeating: [ChunkRecord](), count: inputs.count)
        for case .chunk(let file, let record) in try events(for: inputs) {
            result[file].append(record)
        }
        return result
    }
}

/// A read buffer that chunks point into. Its memory goes back to the pool, and its permit
/// to the semaphore, when the last reference (the reader's, a batch's, an undelivered
/// result's) goes away. Its bytes are written only by the reader, before any batch referencing
/// them is dispatched, and are read-only after.
final class Arena: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    var used = 0  // touched by the reader only
    private let pool: BufferPool

    /// Waits for a permit, then takes a buffer from the pool.
    init(pool: BufferPool) {
        self.pool = pool
        base = pool.take()
        capacity = pool.bufferSize
    }

    deinit { pool.give(base) }

    func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
    }
}

/// The pipeline's read buffers: at most `count` exist, each mapped once and reused, so
/// resident memory is bounded and no buffer pays for page faults twice.
final class BufferPool: Sendable {
    let bufferSize: Int
    private let permits: DispatchSemaphore
    /// Addresses of mapped buffers nobody holds (as integers: pointers are not Sendable; the
    /// lock hands each buffer to one owner at a time).
    private let idle = Locked<[UInt]>([])

    init(bufferSize: Int, count: Int) {
        self.bufferSize = bufferSize
        permits = DispatchSemaphore(value: count)
    }

    deinit {
        for address in idle.value { munmap(UnsafeMutableRawPointer(bitPattern: address), bufferSize) }
    }

    /// Blocks until a buffer is free.
    func take() -> UnsafeMutableRawPointer {
        permits.wait()
        if let address = idle.withLock({ $0.popLast() }) { return UnsafeMutableRawPointer(bitPattern: address)! }
        // mmap, not malloc: glibc raises its mmap threshold after a large free and would keep
        // freed buffers in the heap, so resident memory would creep past the bound.
        guard let memory = mmap(nil, bufferSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
            memory != MAP_FAILED
        else {
            fatalError("cannot map a \(bufferSize)-byte read buffer: \(SystemErrno(errno))")
        }
        return memory
    }

    func give(_ buffer: UnsafeMutableRawPointer) {
        idle.withLock { $0.append(UInt(bitPattern: buffer)) }
        permits.signal()
    }
}

/// One chunk waiting to be hashed: where it is and where it goes.
struct PendingChunk {
    var sequence: Int
    var file: Int
    var offset: Int64
    var range: Range<Int>
}

/// The state of one `run`: the reader's position, the in-order delivery, the first error.
final class PipelineRun: Sendable {
    let options: ChunkPipeline.Options
    let buffers: BufferPool
    /// One serial queue a worker. Serial queues run on Dispatch's overcommitting threads, so
    /// each worker has a thread of its own even when the caller is a thread of Dispatch's pool
    /// (a Swift task, a global queue): a concurrent queue shares that pool, one thread a core,
    /// with the caller, which cuts while the workers hash, and so hashed on one core of two.
    let workers: [DispatchQueue]
    /// Bytes handed to each worker and not yet processed: a batch goes to the least loaded.
    let queued: Locked<[Int]>
    let inFlight = DispatchGroup()
    let order: ReorderBuffer
    let failure = Locked<(any Error)?>(nil)

    init(options: ChunkPipeline.Options, onEvent: @escaping @Sendable (ChunkEvent) throws -> Void) {
        self.options = options
        let capacity = max(options.bufferSize, options.chunker.maximumSize + 2 * options.readSize)
        buffers = BufferPool(bufferSize: capacity, count: max(2, options.maximumBytesInFlight / capacity))
        workers = (0..<max(1, options.workers)).map { DispatchQueue(label: "xfer.pipeline.worker\($0)") }
        queued = Locked(Array(repeating: 0, count: workers.count))
        let failure = self.failure
        order = ReorderBuffer { event in
            // After the first error nothing more is delivered: the consumer has given up.
            guard failure.value == nil else { return }
            do { try onEvent(event) } catch { failure.withLock { if $0 == nil { $0 = error } } }
        }
    }

    var failed: Bool { failure.withLock { $0 != nil } }

    func fail(_ error: any Error) { failure.withLock { if $0 == nil { $0 = error } } }

    /// The reader: runs on the caller's thread, then waits for the workers and the delivery.
    func read(_ inputs: some Sequence<ChunkInput>) throws {
        var reader = Reader(run: self)
        do {
            for (index, input) in inputs.enumerated() where !failed {
                switch input {
                case .file(let path):
                    var source = try FileByteSource(path: path)
                    try reader.chunk(&source, file: index, name: path)
                case .bytes(let name, let bytes):
                    var source = MemoryByteSource(bytes: bytes)
                    try reader.chunk(&source, file: index, name: name)
                }
            }
            reader.flush()
        } catch {
            fail(error)
        }
        reader = Reader(run: nil)
        inFlight.wait()
        order.drain()
        if let error = failure.value { throw error }
    }

    /// Hands a batch of `bytes` to the least loaded worker, or, when chunks are only hashed
    /// and every worker is busy with a batch (more than `batchSize` bytes queued or running),
    /// runs it here on the reader. (A batch
    /// compressed here keeps the reader from cutting for longer than the workers take to run
    /// dry: with zstd the reader never helps.)
    func dispatch(bytes: Int, _ work: @escaping @Sendable () -> Void) {
        let helps = options.compression == nil
        let limit = options.batchSize
        let worker: Int? = queued.withLock { queued in
            guard let least = queued.indices.min(by: { queued[$0] < queued[$1] }) else { return nil }
            if helps && queued[least] > limit { return nil }
            queued[least] += bytes
            return least
        }
        guard let worker else { return work() }
        workers[worker].async(group: inFlight) {
            work()
            self.queued.withLock { $0[worker] -= bytes }
        }
    }

    /// Hashes (and compresses) a batch, then hands its results to the reorder buffer, with the
    /// file events (`events`) the reader numbered while cutting it.
    func process(_ batch: [PendingChunk], in arena: Arena, events: [(Int, ChunkEvent)]) {
        // A batch not processed still fills its numbers, so results numbered after it (run
        // sooner by another worker) are let go with their arenas, not held for ever.
        func skip() { order.skip(events.map(\.0) + batch.map(\.sequence)) }
        if failed { return skip() }
        var results: [(Int, ChunkEvent)] = events
        results.reserveCapacity(events.count + batch.count)
        let endToEnd = options.codec.endToEnd
        // Plain ids are hashed for the whole batch at once, two chunks at a time where the
        // processor can (``SHA256Lanes``).
        let ids = endToEnd == nil ? SHA256Lanes.ids(of: batch.map { arena.bytes($0.range) }) : []
        do {
            for (index, chunk) in batch.enumerated() {
                let bytes = arena.bytes(chunk.range)
                let id = endToEnd?.id(of: bytes) ?? ids[index]
                let encoded = try options.compression.map { try options.codec.encode(bytes, id: id, policy: $0) }
                let record = ChunkRecord(offset: chunk.offset, length: chunk.range.count, id: id, encoded: encoded)
                results.append((chunk.sequence, .chunk(file: chunk.file, record)))
            }
        } catch {
            fail(error)
            return skip()
        }
        order.submit(results, retaining: arena)
    }
}

/// The reader's mutable state. Lives on the calling thread only.
struct Reader {
    let run: PipelineRun?
    var arena: Arena?
    var batch: [PendingChunk] = []
    var batchBytes = 0
    var sequence = 0
    /// File events numbered but not yet handed out: they go with the next batch, so a tree of
    /// small files costs one hand-off per batch, not two or three per file.
    var events: [(Int, ChunkEvent)] = []

    init(run: PipelineRun?) {
        self.run = run
    }

    /// Reads and cuts one input, handing chunks to the workers in batches.
    mutating func chunk(_ source: inout some ByteSource & ~Copyable, file: Int, name: String) throws {
        guard let run else { return }
        submitEvent(.fileStarted(file: file, name: name, size: source.expectedSize))
        var chunker = Chunker(configuration: run.options.chunker, gear: run.options.codec.gear)
        var fileOffset: Int64 = 0
        var chunkStart = arena?.used ?? 0
        var chunks = 0
        while !run.failed {
            if arena == nil || arena!.capacity - arena!.used < run.options.readSize {
                chunkStart = rotate(keepingFrom: chunkStart)
            }
            let current = arena!
            let room = UnsafeMutableRawBufferPointer(
                start: current.base + current.used,
                count: min(run.options.readSize, current.capacity - current.used))
            let n = try source.read(into: room)
            if n == 0 { break }
            var scan = current.used
            current.used += n
            while let cut = chunker.nextBoundary(in: current.bytes(scan..<current.used)) {
                let end = scan + cut
                add(PendingChunk(sequence: 0, file: file, offset: fileOffset, range: chunkStart..<end))
                fileOffset += Int64(end - chunkStart)
                chunks += 1
                chunkStart = end
                scan = end
            }
        }
        if let last = chunker.finish(), let current = arena {
            add(PendingChunk(sequence: 0, file: file, offset: fileOffset, range: chunkStart..<(chunkStart + last)))
            fileOffset += Int64(last)
            chunks += 1
            precondition(chunkStart + last == current.used)
        }
        // Taken once the end has been read: a file written while it was read shows it here.
        submitEvent(.fileFinished(file: file, bytes: fileOffset, chunks: chunks, stamp: source.stampNow()))
    }

    /// Starts a new arena, carrying over the unfinished chunk `[start, used)` of the old one.
    /// - Returns: Where the unfinished chunk now starts (0).
    private mutating func rotate(keepingFrom start: Int) -> Int {
        flush()  // everything cut so far is dispatched before waiting for a permit
        let fresh = Arena(pool: run!.buffers)
        if let old = arena, start < old.used {
            fresh.base.copyMemory(from: old.base + start, byteCount: old.used - start)
            fresh.used = old.used - start
        }
        arena = fresh
        return 0
    }

    private mutating func add(_ chunk: PendingChunk) {
        var chunk = chunk
        chunk.sequence = sequence
        sequence += 1
        batch.append(chunk)
        batchBytes += chunk.range.count
        if batchBytes >= run!.options.batchSize { flush() }
    }

    private mutating func submitEvent(_ event: ChunkEvent) {
        // Its number places it after the chunks cut so far; the reorder buffer delivers in
        // number order whenever it is handed out.
        events.append((sequence, event))
        sequence += 1
        if events.count >= Self.eventsPerHandOff { flush() }
    }

    /// File events held at most before they are handed out without a batch.
    static let eventsPerHandOff = 1024

    /// Dispatches the pending batch, with the file events numbered since the last one. Called
    /// before the reader waits for an arena, so nothing it holds can keep one from coming back.
    mutating func flush() {
        guard let run else { return }
        guard !batch.isEmpty, let arena else {
            if !events.isEmpty {
                run.order.submit(events, retaining: nil)
                events = []
            }
            return
        }
        let work = batch
        let numbered = events
        let bytes = batchBytes
        batch = []
        batchBytes = 0
        events = []
        if run.options.parallel {
            run.dispatch(bytes: bytes) { run.process(work, in: arena, events: numbered) }
        } else {
            run.process(work, in: arena, events: numbered)
        }
    }
}

/// Puts results back in sequence order and delivers them on one serial queue.
final class ReorderBuffer: @unchecked Sendable {  // `next` and `pending` are touched only on `queue`
    private let queue = DispatchQueue(label: "xfer.pipeline.order")
    private let deliver: @Sendable (ChunkEvent) -> Void
    private var next = 0
    private var pending: [Int: (ChunkEvent?, Arena?)] = [:]  // nil: a number skipped

    init(deliver: @escaping @Sendable (ChunkEvent) -> Void) {
        self.deliver = deliver
    }

    /// Queues results; each holds `arena` (and so its permit) until delivered.
    func submit(_ results: [(Int, ChunkEvent)], retaining arena: Arena?) {
        queue.async { [self] in
            dispatchPrecondition(condition: .onQueue(queue))
            for (sequence, event) in results { pending[sequence] = (event, arena) }
            deliverInOrder()
        }
    }

    /// Marks `numbers` as taken with nothing to deliver (a batch skipped after a failure).
    func skip(_ numbers: [Int]) {
        queue.async { [self] in
            for sequence in numbers { pending[sequence] = (nil, nil) }
            deliverInOrder()
        }
    }

    private func deliverInOrder() {
        dispatchPrecondition(condition: .onQueue(queue))
        while let (event, _) = pending.removeValue(forKey: next) {
            if let event { deliver(event) }
            next += 1
        }
    }

    /// Waits until everything submitted so far has been handled.
    func drain() { queue.sync {} }
}
