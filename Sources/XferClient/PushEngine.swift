import Foundation
import XferCore
import XferProtocol

/// Pushes a file or a directory (a package) as one document version: announce at once, hash
/// in the pipeline, ask which new chunks the server lacks while hashing goes on, upload those
/// compressed with several requests in flight, commit the manifest as a delta.
public struct PushEngine: Sendable {
    let remote: Remote
    let options: PushOptions

    /// Creates an engine. In an end-to-end encrypted container (``Remote/endToEnd``) its
    /// pipeline cuts and names chunks under the container's key.
    public init(remote: Remote, options: PushOptions = PushOptions()) {
        self.remote = remote
        var options = options
        options.pipeline.codec = remote.codec
        self.options = options
    }

    /// One chunk to upload: where its bytes are.
    struct Location: Sendable {
        var id: ChunkID
        var file: String
        var offset: Int64
        var length: Int
        /// Which document of a batch it is for (0 for a single push): whose bytes it counts as.
        var owner: Int = 0
        /// The previous chunk to send it against if the cache holds it (``PreviousChunks``).
        var reference: ChunkID? = nil
        /// Whether the cache keeps it once sent: a small file's (``ChunkCache/fileLimit``) as it is
        /// read; of those, the push's ``sendMissing`` keeps only chunks the server lacks, within
        /// its ``ChunkCache/Admission``.
        var keep = false
    }

    /// Pushes `path` as `document`.
    /// - Parameters:
    ///   - path: A file, symlink or directory.
    ///   - document: The document's path in the container (as the user names it: in an
    ///     end-to-end encrypted container only its sealed path reaches the server).
    ///   - directoryItself: A directory at `path` is pushed as a `directory` document (its
    ///     name and mode alone, what a sync pass does with a synced folder's directories)
    ///     rather than as a package of everything in it.
    ///   - progress: Called now and then from any thread.
    ///   - confirmed: Awaited before the push sends anything, after it has looked at its files and
    ///     state: the server's answer that this engine's remote holds the container's key as it
    ///     should (``Remote/whileUnlocking(_:)``); `nil` when the remote is ``Remote/unlocked()`` already.
    /// - Returns: What was done.
    /// - Throws: `XferError`: `not_found`/`io` for the local path, `unavailable`, `unauthorized`,
    ///   `conflict`, `quota_exceeded`, `invalid_path` and the rest from the server.
    public func push(_ path: String, as document: DocumentPath, state: ClientState? = nil, directoryItself: Bool = false,
                     progress: @escaping @Sendable (TransferProgress) -> Void = { _ in },
                     confirmed: (@Sendable () async throws -> Void)? = nil) async throws -> PushReport {
        try await remote.naming { try await ClientThreads.run {
            let started = ContinuousClock.now
            let connection = remote.connection
            // The server knows the document by `name`: its sealed path in an end-to-end encrypted
            // container. This root's state and the report by `document`.
            let name = try remote.serverPath(document)
            let state = try state ?? remote.clientState(root: path)
            // The version this root holds, read first: its manifest (megabytes for a tree of many
            // files, decoded through buffers as large) is made before the walk's entries exist.
            let synced = try state.document(server: connection.server, container: remote.container, path: document)
            // Which files must be read: those whose stamp changed since their chunks were computed.
            var snapshot = try LocalSnapshot(path: path, state: state, exclude: options.exclude, directoryItself: directoryItself)
            if synced != nil {
                ProcessMemory.returnFreePages(afterFiles: snapshot.tree.count, bytes: 0)  // the manifest's decoding
            }
            var chunkLists = try snapshot.knownChunks(state)
            try await confirmed?()  // nothing has been sent yet
            var serverCurrent: DocumentInfo? = nil
            if options.force { serverCurrent = try? await connection.stat(container: remote.container, path: name) }
            // What the server is taken to hold of this document: the version this root synced,
            // unless the server says otherwise below. (The root's own records, its chunk lists
            // and names, stay `synced`'s whatever the server says: they describe local files.)
            var basis = synced
            var baseVersion = PushDecisions.baseVersion(synced: basis?.version, force: options.force, serverCurrent: serverCurrent)
            let total = snapshot.totalSize

            // Nothing changed since this root last synced: no version to make, nothing to send,
            // once the server confirms it still holds that version as this root knows it. One that
            // does not (another server at this URL, one restored from an older backup, a version
            // dropped since) gets the push in full, as if this root had never synced there: a push
            // that sends nothing must not leave the user believing the server has their files.
            if let synced, PushDecisions.isNoOp(force: options.force, synced: synced, baseVersion: baseVersion,
                                           unchanged: snapshot.isUnchanged(since: synced, chunks: chunkLists)) {
                if try await remote.holds(synced, at: name) {
                    var report = Self.report(document, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
                    report.committed = false
                    return report
                }
                basis = nil
                baseVersion = nil
            }
            // Files whose stamps moved (a write of the same bytes, a restore from a backup) in a
            // small document: read first, and if the content is the synced version's, byte for
            // byte, no version is made (as a batch push finds it; a larger document is announced
            // before its data is read, and makes one).
            if let synced, let basis, !options.force, !snapshot.toHash.isEmpty,
               snapshot.toHash.reduce(Int64(0), { $0 + (snapshot.stamps[$1]?.size ?? 0) }) <= Self.rereadBytes {
                var lists = chunkLists
                let read = try Self.chunkLists(of: snapshot.toHash.map { snapshot.fullPath(at: $0) }, options: options.pipeline)
                for (position, list) in read.enumerated() { lists[snapshot.toHash[position]] = list }
                let found = try snapshot.manifest(lists, chunker: synced.manifest.chunker)
                if found == synced.manifest, try await remote.holds(basis, at: name) {  // (equal manifests: equal encodings)
                    try state.record(files: PushedFiles(snapshot, manifest: found, only: snapshot.toHash))
                    // (Recorded again with its files' new stamps: the next pass sees it unchanged.)
                    try state.recordPushed(server: connection.server, container: remote.container, path: document, document: synced)
                    var report = Self.report(document, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
                    report.committed = false
                    return report
                }
            }

            // Metadata ahead of data: other devices see the pending version before any chunk moves.
            let announced = try await connection.announce(container: remote.container,
                                                          announcement(name, snapshot, baseVersion: baseVersion))

            var toHash = PushDecisions.filesToRead(changed: snapshot.toHash, unchanged: snapshot.unchanged, chunkLists: chunkLists)

            // 3. Chunks the server surely has (the base version's) are never asked about.
            let onServer = PushDecisions.onServer(baseVersion: baseVersion, synced: basis)
            let (initial, queued) = PushDecisions.initialUpload(chunkLists, path: { snapshot.fullPath(at: $0) }, onServer: onServer)
            let unchangedBytes = chunkLists.indices.reduce(Int64(0)) { $0 + (chunkLists.isKnown($1) ? snapshot.stamps[$1]?.size ?? 0 : 0) }
            let counters = Locked(Counters(bytesHashed: unchangedBytes))

            // Changed small files go against their previous chunks where the cache holds them
            // (and the server reads chunks sent that way).
            let features = await connection.features()
            var previous = PreviousChunks()
            for index in toHash where features.contains(.chunksAgainst) && remote.codec.sendsAgainst {
                previous.add(fullPath: snapshot.fullPath(at: index), relativePath: snapshot.tree.relativePath(at: index), previous: synced?.manifest)
            }
            let hashedAny: Bool
            do {
                let reading = FilesToRead(owners: Array(repeating: 0, count: toHash.count),
                                          path: { [snapshot, toHash] in snapshot.fullPath(at: toHash[$0]) },
                                          stamp: { [snapshot, toHash] in snapshot.stamps[toHash[$0]] })
                let hashed = try await upload(initial: initial, files: reading, skip: onServer.union(queued), total: total,
                                              previous: previous,
                                              cache: remote.codec.isSealed ? nil : ChunkCache(database: state.database, maximumBytes: options.cacheBytes),
                                              counters: counters, progress: progress)
                for (position, chunks) in hashed.enumerated() { chunkLists[toHash[position]] = chunks }
                hashedAny = !hashed.isEmpty
            }
            let fileCount = snapshot.tree.count
            // The upload bodies' pages, before the manifest is made.
            ProcessMemory.returnFreePages(afterFiles: fileCount, bytes: total)
            // 4. The manifest, sent as a delta against the base version.
            let manifest = try snapshot.manifest(chunkLists, chunker: !hashedAny && synced != nil ? synced!.manifest.chunker : options.pipeline.chunker)
            // Remember what was read, even if the commit fails, so a re-run does not read it again
            // (and so the state has every file's row: the unchanged ones' are as they were). The
            // rows (a second of work for 200,000 files) are written while the delta is made and
            // the server commits; the commit's outcome is recorded once they are in.
            let pushed = PushedFiles(snapshot, manifest: manifest, only: toHash)
            precondition(manifest.entries.count == snapshot.tree.count, "a manifest's entries are its tree's")
            let recording = Task(executorPreference: ClientThreads.shared) { try state.record(files: pushed) }
            // From here the manifest holds the names and chunk lists: the tree and the lists by
            // tree index go (a tree of many files holds tens of MB of them) once the rows are written.
            snapshot.releaseTree()
            chunkLists = []
            toHash = []

            // The delta is against the version this root holds, which the server keeps; in an
            // end-to-end encrypted container, the carrier whole, its sealed manifest's pieces uploaded first.
            let (sent, pieceBytes) = try await serverManifest(manifest, at: name, version: announced.version)
            let digest = sent.digest  // (its encoding is let go before the delta is made)
            // What the server holds as the base: the version's manifest, or its carrier (rebuilt
            // here, as sealing is deterministic, and used only if it is the one the server recorded).
            let base = basis.flatMap { basis in remote.endToEnd == nil ? basis.manifest : remote.serverCarrier(of: basis, at: name) }
            let deltaBase = base == nil ? nil : basis?.version
            // (A carrier is ids, which do not compress: it goes plain, without trying.)
            var delta = features.contains(.compressedManifests) && remote.endToEnd == nil
                ? sent.compressedDelta(against: base) : SpillArray(sent.delta(against: base))
            let request = CommitRequest(path: name, version: announced.version, baseVersion: baseVersion, deltaBase: deltaBase,
                                        manifestDelta: [], manifestDigest: digest)
            let body = request.body(delta: delta)
            let deltaSize = delta.count + pieceBytes  // the manifest's bytes sent: its delta, and its sealed pieces
            delta = []  // the body holds it (as base64) from here
            ProcessMemory.returnFreePages(afterFiles: fileCount, bytes: 0)  // the delta's making
            let committed: DocumentInfo
            do {
                do {
                    committed = try await commit(request, body: body, manifest: sent)
                } catch let error as XferError where error.code == .missingChunks {
                    // The server lacks chunks this client believed it had (a base from another root,
                    // say): send them and commit again, once.
                    let again = PushDecisions.resend((error.cause as? MissingChunksDetail)?.ids ?? [], FileChunkLists(of: manifest),
                                                     path: { snapshot.fullPath(relative: manifest.entries.path(at: $0)) })
                    _ = try await upload(initial: again, files: .none, skip: ChunkIDPrefixes(), total: total, counters: counters, progress: progress)
                    committed = try await commit(request, body: body, manifest: sent)
                }
            } catch {
                _ = await recording.result  // what was read is remembered before the failure is told
                throw error
            }
            if case .failure = await recording.result {
                // The version is committed: the rows are tried once more, and the commit recorded
                // either way (a file whose row is stale is only read again by the next push).
                try? state.record(files: pushed)
            }
            try state.recordPushed(server: connection.server, container: remote.container, path: document,
                                   document: SyncedDocument(version: committed.version, manifest: manifest,
                                                            serverDigest: remote.endToEnd == nil ? nil : digest.hex))
            if committed.state == .current { try remote.seenVersions()?.raise([(document, committed.version)]) }
            var report = Self.report(document, committed.version, manifest, counters.value, manifestBytes: deltaSize, started: started)
            report.state = committed.state
            report.conflicts = committed.conflicts ?? []
            return report
        } }
    }

    /// The most a push reads of a document's changed files before it announces a version, to
    /// find whether their content changed at all: what a sync pass batches.
    static let rereadBytes: Int64 = 4 << 20

    /// The chunk lists of the files at `paths`, read and cut as `options` cut them (nothing sent).
    static func chunkLists(of paths: [String], options: ChunkPipeline.Options) throws -> [[Manifest.ChunkReference]] {
        let lists = Locked([[Manifest.ChunkReference]](repeating: [], count: paths.count))
        try ChunkPipeline(options: options).run(paths.map { .file($0) }) { event in
            if case .chunk(let file, let record) = event {
                lists.withLock { $0[file].append(Manifest.ChunkReference(id: record.id, length: record.length)) }
            }
        }
        return lists.value
    }

    /// Throws unless the file at `path`, once its end had been read, still had the stamp the
    /// walk saw (`after`, from the descriptor it was read through): a file written while it was
    /// read is not committed, as its chunks may mix two contents, and neither is one replaced
    /// between the walk and the read (another inode). What is written after the read does not
    /// touch what was read; the state records the stamp read, so the next push reads it again.
    /// One that had no stamp then (it was being replaced as the tree was walked) is not either:
    /// the state would have no row to record for what was read.
    static func checkStillAsRead(_ path: String, before: FileStamp?, after: FileStamp?) throws {
        guard let before else {
            throw XferError(.io, "\(path) was being replaced as the tree was walked; nothing was committed (push again, or let the next sync pass do it)",
                            cause: ChangedWhileRead())
        }
        guard let now = after else {
            throw XferError(.io, "\(path) could not be looked at once it was read; nothing was committed", cause: ChangedWhileRead())
        }
        guard now == before else {
            throw XferError(.io, "\(path) changed while it was read; nothing was committed (push again, or let the next sync pass do it)",
                            cause: ChangedWhileRead())
        }
    }

    static func report(_ name: DocumentPath, _ version: Int64, _ manifest: Manifest, _ counters: Counters,
                               manifestBytes: Int, started: ContinuousClock.Instant) -> PushReport {
        let entries = manifest.entries
        let fileBytes = entries.indices.reduce(Int64(0)) { $0 + (entries.kind(at: $1) == .file ? entries.size(at: $1) : 0) }
        return PushReport(document: name.value, version: version,
                          files: manifest.fileCount, bytes: manifest.totalSize,
                          chunks: manifest.allChunks.count, chunksSent: counters.chunksSent, bytesSent: counters.bytesSent,
                          bytesReused: max(0, fileBytes - counters.plainBytesSent), manifestBytes: manifestBytes,
                          seconds: (ContinuousClock.now - started).seconds)
    }

    /// What a version of the document the server keeps at `path`, read as `snapshot`, is
    /// announced (or batch-committed) as. In an end-to-end encrypted container it says nothing
    /// true but the kind: the size, time and mode are in the sealed manifest.
    func announcement(_ path: DocumentPath, _ snapshot: LocalSnapshot, baseVersion: Int64?) -> AnnounceRequest {
        let sealed = remote.endToEnd != nil, top = snapshot.top
        return AnnounceRequest(path: path, kind: DocumentKind(snapshot.kind), size: sealed ? 0 : snapshot.totalSize,
                               mtimeNs: sealed ? 0 : top.mtimeNanoseconds, mode: sealed ? 0o600 : top.mode,
                               baseVersion: baseVersion, device: options.device ?? remote.device)
    }

    /// Seals the pieces of sealed manifests and uploads them, a few megabytes at a time (a
    /// tree's manifest is megabytes: never all of it sealed at once).
    /// - Returns: Each piece's stored bytes, in order.
    func uploadPieces(_ pieces: [ArraySlice<UInt8>], endToEnd: EndToEndKeys) async throws -> [Int] {
        var stored: [Int] = []
        for batch in pieces.batched(atMost: 1024, budget: 4 << 20, cost: { $0.count }) {
            let sealed = try batch.map { piece in try piece.withUnsafeBytes { try endToEnd.chunks.seal($0, policy: options.compression) } }
            let result = try await remote.connection.upload(sealed)
            guard result.received == sealed.count else {
                throw XferError(.unavailable, "the server received \(result.received) of the \(sealed.count) pieces of a sealed manifest; push again")
            }
            stored += sealed.map(\.payload.count)
        }
        return stored
    }

    /// The manifest the server keeps for version `version` of the document at `path`: `manifest`
    /// itself, or in an end-to-end encrypted container its carrier (``EndToEndKeys``), once
    /// the sealed manifest's pieces are uploaded; and the bytes those pieces took (a report
    /// counts them with the manifest's, not with the document's chunks).
    func serverManifest(_ manifest: Manifest, at path: DocumentPath, version: Int64) async throws -> (manifest: Manifest, pieceBytes: Int) {
        guard let endToEnd = remote.endToEnd else { return (manifest, 0) }
        let (carrier, pieces) = try endToEnd.carrier(of: manifest, sealedPath: path.value, version: version)
        // Sealed for this version: none is on the server yet (a retried push's are sent again).
        return (carrier, try await uploadPieces(pieces, endToEnd: endToEnd).reduce(0, +))
    }

    /// Sends a commit (`request`, whose JSON with its delta is `body`).
    func commit(_ request: CommitRequest, body: SpillArray<UInt8>, manifest: Manifest) async throws -> DocumentInfo {
        do {
            return try await remote.connection.commit(container: remote.container, body: body)
        } catch let error as XferError where (error.code == .invalidManifest || error.code == .notFound) && request.deltaBase != nil {
            // The server could not rebuild the delta (it lacks that version now): send the full manifest.
            var full = request
            full.deltaBase = nil
            return try await remote.connection.commit(container: remote.container, body: full.body(delta: manifest.delta(against: nil)))
        }
    }

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
    func upload(initial: [Location], files: FilesToRead, skip: ChunkIDPrefixes, total: Int64,
                previous: PreviousChunks = PreviousChunks(), cache: ChunkCache? = nil,
                counters: Locked<Counters>, progress: @escaping @Sendable (TransferProgress) -> Void) async throws
        -> ChunkLists {
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
                let hashed = try await Self.runPipeline(files: files, options: options.pipeline, skip: skip, batch: askBatch,
                                                        previous: previous,
                                                        stop: stop, counters: counters,
                                                        yield: { batch in if slots.take() { continuation.yield(batch) } },
                                                        report: report)
                lists.withLock { $0 = hashed }
            }
            group.addTask {
                // However this ends (an error, cancellation), the pipeline must not wait for it.
                defer { stop.withLock { $0 = true } }
                // (The first batches, the known files' chunks, are yielded before the pipeline starts
                // and took no slot.)
                var unslotted = (initial.count + askBatch - 1) / askBatch  // (askBatch is at least 1)
                try await self.sendMissing(batches, taken: {
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

        /// Waits for a slot (on a thread that may block, never a task's); `false` once `stop` is set.
        func take() -> Bool {
            while free.wait(timeout: .now() + .milliseconds(50)) == .timedOut {
                if stop.value { return false }
            }
            return !stop.value
        }

        /// Frees a slot (a batch was taken).
        func give() { free.signal() }
    }

    /// Runs the chunk pipeline on a Dispatch thread, yielding batches of new chunk locations.
    /// - Returns: The chunk list of each file, by position in `files`.
    private static func runPipeline(files: FilesToRead, options: ChunkPipeline.Options, skip: ChunkIDPrefixes,
                                    batch: Int, previous: PreviousChunks,
                                    stop: Locked<Bool>, counters: Locked<Counters>,
                                    yield: @escaping @Sendable ([Location]) -> Void,
                                    report: @escaping @Sendable () -> Void) async throws -> ChunkLists {
        // Pipeline callbacks arrive in order on one serial queue; this state is touched only
        // there, and read by the caller after the pipeline has returned.
        final class Collector: @unchecked Sendable {
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
        let collector = Collector(files: files.count, seen: skip)
        try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async {
                do {
                    try ChunkPipeline(options: options).run((0..<files.count).lazy.map { .file(files.path($0)) }) { event in
                        if stop.value { throw XferError(.cancelled, "push stopped") }
                        switch event {
                        case .fileStarted(_, let path, let size):
                            collector.path = path
                            collector.size = size ?? .max
                        case .chunk(let file, let record):
                            collector.lists.append(Manifest.ChunkReference(id: record.id, length: record.length), toFile: file)
                            collector.unreportedBytes += Int64(record.length)
                            if collector.seen.insert(record.id) {
                                let path = collector.path
                                collector.pending.append(Location(id: record.id, file: path, offset: record.offset,
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
    private func sendMissing(_ batches: AsyncStream<[Location]>, taken: () -> Void, cache: ChunkCache?, counters: Locked<Counters>,
                             report: @escaping @Sendable () -> Void) async throws {
        let connection = remote.connection
        let policy = options.compression
        let codec = options.pipeline.codec
        // A server that reads large bodies gets far fewer requests, each made while it is sent;
        // the first few are small all the same, so a small push still keeps every upload (and
        // the cores that compress for it) busy at once.
        let large = await connection.features().contains(.largeUploads)
        var launched = 0
        func bodyLimits() -> (bytes: Int, frames: Int) {
            guard large && launched >= options.uploadsInFlight else { return (options.uploadBatchBytes, ChunkFrameLimits().maximumFrames) }
            // Within the server's body limit (64 MiB) and the plain bytes a body may declare.
            return (min(options.largeUploadBytes, 48 << 20), min(options.largeUploadFrames, ChunkFrameLimits.largeUploadFrames))
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
                    let (result, sizes) = try await Self.upload(locations, streamed: large, policy: policy, codec: codec, cache: cache, connection: connection)
                    guard result.received == locations.count else {
                        throw XferError(.unavailable, "the server received \(result.received) of the \(locations.count) chunks sent in one request; push again")
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
                        let (_, sizes) = try await Self.upload(again, streamed: large, policy: policy, codec: codec, cache: nil, connection: connection)
                        counters.withLock { $0.sent(sizes, owners: again.map(\.owner)) }
                    }
                    report()
                }
            }
            for await batch in batches {
                taken()
                let missing = Set(try await connection.missing(batch.map(\.id)))
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
    private static func upload(_ locations: [Location], streamed: Bool, policy: CompressionPolicy, codec: ChunkCodec, cache: ChunkCache?,
                               connection: ServerConnection) async throws -> (result: UploadResult, sizes: [(payload: Int, plain: Int)]) {
        var framer = ChunkFramer(locations, policy: policy, codec: codec, cache: cache)
        let result: UploadResult
        if streamed {
            // Each try (ServerConnection's retry rule) frames the chunks anew.
            let current = Locked(framer)
            var first = true
            result = try await connection.upload(retrying: {
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
            result = try await connection.upload(frames: whole?.bytes ?? ChunkFrames.magic)
            try? cache?.keep(whole?.kept ?? [])
        }
        return (result, framer.framedSizes)
    }

    /// Plain bytes of chunks framed at a time into a body sent while it is made.
    static let uploadPieceBytes = 1 << 20
}
