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
    public func push(
        _ path: String, as document: DocumentPath, state: ClientState? = nil, directoryItself: Bool = false,
        progress: @escaping @Sendable (TransferProgress) -> Void = { _ in },
        confirmed: (@Sendable () async throws -> Void)? = nil
    ) async throws -> PushReport {
        try await remote.naming {
            try await ClientThreads.run {
                let connection = remote.connection
                let target = try self.target(path, as: document, state: state)
                let (name, state, synced) = (target.name, target.state, target.synced)
                // Which files must be read: those whose stamp changed since their chunks were computed.
                var snapshot = try LocalSnapshot(
                    path: path, state: state, exclude: options.exclude, directoryItself: directoryItself)
                if synced != nil {
                    ProcessMemory.returnFreePages(afterFiles: snapshot.tree.count, bytes: 0)  // the manifest's decoding
                }
                var chunkLists = try snapshot.knownChunks(state)
                try await confirmed?()  // nothing has been sent yet
                let serverCurrent =
                    options.force ? try? await connection.stat(container: remote.container, path: name) : nil
                // What the server is taken to hold of this document: the version this root synced,
                // unless the server says otherwise. (The root's own records, its chunk lists and
                // names, stay `synced`'s whatever the server says: they describe local files.)
                var basis = synced
                var baseVersion =
                    options.basedOn
                    ?? PushDecisions.baseVersion(
                        synced: basis?.version, force: options.force, serverCurrent: serverCurrent)
                let total = snapshot.totalSize
                if let report = try await noVersionNeeded(
                    target, snapshot, chunkLists, basis: &basis, baseVersion: &baseVersion)
                {
                    return report
                }

                // Metadata ahead of data: other devices see the pending version before any chunk moves.
                let announced = try await connection.announce(
                    container: remote.container,
                    announcement(name, snapshot, baseVersion: baseVersion))
                var toHash = PushDecisions.filesToRead(
                    changed: snapshot.toHash, unchanged: snapshot.unchanged, chunkLists: chunkLists)
                let (counters, readAny, features) = try await readAndUpload(
                    toHash, of: snapshot, into: &chunkLists, target: target, basis: basis,
                    baseVersion: baseVersion, total: total, progress: progress)
                let fileCount = snapshot.tree.count
                // The upload bodies' pages, before the manifest is made.
                ProcessMemory.returnFreePages(afterFiles: fileCount, bytes: total)
                // The manifest, sent as a delta against the base version.
                let chunker = PushDecisions.chunker(
                    readAny: readAny, synced: synced, configured: options.pipeline.chunker)
                let manifest = try snapshot.manifest(chunkLists, chunker: chunker)
                // Remember what was read, even if the commit fails, so a re-run does not read it again
                // (and so the state has every file's row: the unchanged ones' are as they were). The
                // rows (a second of work for 200,000 files) are written while the delta is made and
                // the server commits; the commit's outcome is recorded once they are in.
                let pushed = ManifestFiles(snapshot, manifest: manifest, only: toHash)
                precondition(manifest.entries.count == snapshot.tree.count, "a manifest's entries are its tree's")
                let recording = Task(executorPreference: ClientThreads.shared) { try state.record(files: pushed) }
                // From here the manifest holds the names and chunk lists: the tree and the lists by
                // tree index go (a tree of many files holds tens of MB of them) once the rows are written.
                snapshot.releaseTree()
                chunkLists = []
                toHash = []

                let request = try await commitRequest(
                    manifest, target: target, version: announced.version, basis: basis,
                    baseVersion: baseVersion, features: features, fileCount: fileCount)
                let committed: DocumentInfo
                do {
                    committed = try await commit(
                        request, manifest: manifest, root: snapshot, total: total, counters: counters,
                        progress: progress)
                } catch {
                    _ = await recording.result  // what was read is remembered before the failure is told
                    throw error
                }
                return try await recordCommitted(
                    committed, manifest: manifest, ready: request, target: target, recording: recording,
                    pushed: pushed, counters: counters.value)
            }
        }
    }

    /// Records version `committed` of `target`, whose manifest is `manifest`, in its root's state
    /// once the rows of the files read (`pushed`, being written by `recording`) are in.
    /// - Returns: What the push did.
    private func recordCommitted(
        _ committed: DocumentInfo, manifest: Manifest, ready: ReadyCommit, target: PushTarget,
        recording: Task<Void, any Error>, pushed: ManifestFiles, counters: Counters
    ) async throws -> PushReport {
        if case .failure = await recording.result {
            // The version is committed: the rows are tried once more, and the commit recorded
            // either way (a file whose row is stale is only read again by the next push).
            try? target.state.record(files: pushed)
        }
        try target.state.recordPushed(
            server: remote.connection.server, container: remote.container, path: target.document,
            document: SyncedDocument(
                version: committed.version, manifest: manifest,
                serverDigest: remote.endToEnd == nil ? nil : ready.digest.hex))
        if committed.state == .current { try remote.seenVersions()?.raise([(target.document, committed.version)]) }
        var report = Self.report(
            target.document, committed.version, manifest, counters, manifestBytes: ready.manifestBytes,
            started: target.started)
        report.state = committed.state
        report.conflicts = committed.conflicts ?? []
        return report
    }

    /// What a single push knows of its document before it reads a file: the names it goes by,
    /// its root's state and the version that root synced.
    struct PushTarget {
        /// The document as the user names it (this root's state and the report use it).
        let document: DocumentPath
        /// The path the server keeps it at: sealed in an end-to-end encrypted container.
        let name: DocumentPath
        let state: ClientState
        let synced: SyncedDocument?
        let started: ContinuousClock.Instant
    }

    /// The document a push of `path` makes a version of, and what this root holds of it.
    private func target(_ path: String, as document: DocumentPath, state: ClientState?) throws -> PushTarget {
        let started = ContinuousClock.now
        // The server knows the document by `name`: its sealed path in an end-to-end encrypted
        // container. This root's state and the report by `document`.
        let name = try remote.serverPath(document)
        let state = try state ?? remote.clientState(root: path)
        // The version this root holds, read first: its manifest (megabytes for a tree of many
        // files, decoded through buffers as large) is made before the walk's entries exist.
        let synced = try state.document(server: remote.connection.server, container: remote.container, path: document)
        return PushTarget(document: document, name: name, state: state, synced: synced, started: started)
    }

    /// The report of a push that made no version: the synced version stands.
    static func unchangedReport(_ document: DocumentPath, _ synced: SyncedDocument, started: ContinuousClock.Instant)
        -> PushReport
    {
        var unchanged = report(
            document, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
        unchanged.committed = false
        return unchanged
    }

    /// The report of a push that makes no version, if that is what it comes to: nothing changed
    /// since this root last synced, or the files whose stamps moved (a write of the same bytes, a
    /// restore from a backup) of a small document, read first, hold the synced version's bytes;
    /// and the server confirms it holds that version as this root knows it. When it does not
    /// (another server at this URL, one restored from an older backup, a version dropped since),
    /// the push goes in full, as if this root had never synced there (`basis` and `baseVersion`
    /// made `nil`): a push that sends nothing must not leave the user believing the server has
    /// their files.
    private func noVersionNeeded(
        _ target: PushTarget, _ snapshot: LocalSnapshot, _ chunkLists: FileChunkLists,
        basis: inout SyncedDocument?, baseVersion: inout Int64?
    ) async throws -> PushReport? {
        if let synced = target.synced,
            PushDecisions.isNoOp(
                force: options.force, synced: synced, baseVersion: baseVersion,
                unchanged: snapshot.isUnchanged(since: synced, chunks: chunkLists))
        {
            if try await remote.holds(synced, at: target.name) {
                return Self.unchangedReport(target.document, synced, started: target.started)
            }
            basis = nil
            baseVersion = options.basedOn
        }
        guard let synced = target.synced, let basis,
            PushDecisions.rereadsFirst(
                force: options.force, basis: basis,
                changedSizes: snapshot.toHash.lazy.map { snapshot.stamps[$0]?.size ?? 0 })
        else { return nil }
        var lists = chunkLists
        let read = try Self.chunkLists(of: snapshot.toHash.map { snapshot.fullPath(at: $0) }, options: options.pipeline)
        for (position, list) in read.enumerated() { lists[snapshot.toHash[position]] = list }
        let found = try snapshot.manifest(lists, chunker: synced.manifest.chunker)
        // (Equal manifests: equal encodings, the byte-for-byte comparison a batch push makes.)
        guard found == synced.manifest, try await remote.holds(basis, at: target.name) else { return nil }
        try target.state.record(files: ManifestFiles(snapshot, manifest: found, only: snapshot.toHash))
        // (Recorded again with its files' new stamps: the next pass sees it unchanged.)
        try target.state.recordPushed(
            server: remote.connection.server, container: remote.container, path: target.document, document: synced)
        return Self.unchangedReport(target.document, synced, started: target.started)
    }

    /// Reads the files at tree indexes `toHash` of `snapshot` in the pipeline while the chunks the
    /// server lacks go up (the known files' first), and puts each file's chunk list into `chunkLists`.
    /// - Returns: The push's counters, whether it read any file, and the server's features.
    private func readAndUpload(
        _ toHash: SpillArray<Int>, of snapshot: LocalSnapshot, into chunkLists: inout FileChunkLists,
        target: PushTarget, basis: SyncedDocument?, baseVersion: Int64?, total: Int64,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws
        -> (counters: Locked<Counters>, readAny: Bool, features: Set<ServerFeature>)
    {
        // Chunks the server surely has (the base version's) are never asked about.
        let onServer = PushDecisions.onServer(baseVersion: baseVersion, synced: basis)
        let (initial, queued) = PushDecisions.initialUpload(
            chunkLists, path: { snapshot.fullPath(at: $0) }, onServer: onServer)
        let counters = Locked(
            Counters(bytesHashed: PushDecisions.knownBytes(chunkLists, size: { snapshot.stamps[$0]?.size })))
        // Changed small files go against their previous chunks where the cache holds them
        // (and the server reads chunks sent that way).
        let features = await remote.connection.features()
        var previous = PreviousChunks()
        for index in toHash where features.contains(.chunksAgainst) && remote.codec.sendsAgainst {
            previous.add(
                fullPath: snapshot.fullPath(at: index), relativePath: snapshot.tree.relativePath(at: index),
                previous: target.synced?.manifest)
        }
        let reading = FilesToRead(
            owners: Array(repeating: 0, count: toHash.count),
            path: { [snapshot, toHash] in snapshot.fullPath(at: toHash[$0]) },
            stamp: { [snapshot, toHash] in snapshot.stamps[toHash[$0]] })
        let hashed = try await upload(
            initial: initial, files: reading, skip: onServer.union(queued), total: total, previous: previous,
            cache: remote.codec.isSealed
                ? nil : ChunkCache(database: target.state.database, maximumBytes: options.cacheBytes),
            counters: counters, progress: progress)
        for (position, chunks) in hashed.enumerated() { chunkLists[toHash[position]] = chunks }
        return (counters, !hashed.isEmpty, features)
    }

    /// A single push's commit, ready to send.
    struct ReadyCommit {
        let request: CommitRequest
        /// The request's JSON with its delta.
        let body: SpillArray<UInt8>
        /// The manifest the server keeps: the push's, or end to end its carrier.
        let sent: Manifest
        let digest: ChunkID
        /// The manifest's bytes sent: its delta, and its sealed pieces.
        let manifestBytes: Int
    }

    /// The commit of `manifest` as version `version` of `target`: a delta against the version this
    /// root holds, which the server keeps; in an end-to-end encrypted container, the carrier whole,
    /// its sealed manifest's pieces uploaded first.
    private func commitRequest(
        _ manifest: Manifest, target: PushTarget, version: Int64, basis: SyncedDocument?, baseVersion: Int64?,
        features: Set<ServerFeature>, fileCount: Int
    ) async throws -> ReadyCommit {
        let (sent, pieceBytes) = try await serverManifest(manifest, at: target.name, version: version)
        let digest = sent.digest  // (its encoding is let go before the delta is made)
        // What the server holds as the base: the version's manifest, or its carrier (rebuilt
        // here, as sealing is deterministic, and used only if it is the one the server recorded).
        let base = basis.flatMap { basis in
            remote.endToEnd == nil ? basis.manifest : remote.serverCarrier(of: basis, at: target.name)
        }
        let deltaBase = base == nil ? nil : basis?.version
        // (A carrier is ids, which do not compress: it goes plain, without trying.)
        var delta =
            features.contains(.compressedManifests) && remote.endToEnd == nil
            ? sent.compressedDelta(against: base) : SpillArray(sent.delta(against: base))
        let request = CommitRequest(
            path: target.name, version: version, baseVersion: baseVersion, deltaBase: deltaBase,
            manifestDelta: [], manifestDigest: digest)
        let body = request.body(delta: delta)
        let manifestBytes = delta.count + pieceBytes
        delta = []  // the body holds it (as base64) from here
        ProcessMemory.returnFreePages(afterFiles: fileCount, bytes: 0)  // the delta's making
        return ReadyCommit(request: request, body: body, sent: sent, digest: digest, manifestBytes: manifestBytes)
    }

    /// Sends `ready`, the commit of `manifest`. If the server lacks chunks this client believed it
    /// had (a base from another root, say), sends them from the files of `root` and commits again, once.
    private func commit(
        _ ready: ReadyCommit, manifest: Manifest, root: LocalSnapshot, total: Int64, counters: Locked<Counters>,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> DocumentInfo {
        do {
            return try await commit(ready.request, body: ready.body, manifest: ready.sent)
        } catch let error as XferError where error.code == .missingChunks {
            let again = PushDecisions.resend(
                (error.cause as? MissingChunksDetail)?.ids ?? [], FileChunkLists(of: manifest),
                path: { root.fullPath(relative: manifest.entries.path(at: $0)) })
            _ = try await upload(
                initial: again, files: .none, skip: ChunkIDPrefixes(), total: total, counters: counters,
                progress: progress)
            return try await commit(ready.request, body: ready.body, manifest: ready.sent)
        }
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
            throw XferError(
                .io,
                "\(path) was being replaced as the tree was walked; nothing was committed (push again, or let the next sync pass do it)",
                cause: ChangedWhileRead())
        }
        guard let now = after else {
            throw XferError(
                .io, "\(path) could not be looked at once it was read; nothing was committed", cause: ChangedWhileRead()
            )
        }
        guard now == before else {
            throw XferError(
                .io,
                "\(path) changed while it was read; nothing was committed (push again, or let the next sync pass do it)",
                cause: ChangedWhileRead())
        }
    }

    static func report(
        _ name: DocumentPath, _ version: Int64, _ manifest: Manifest, _ counters: Counters,
        manifestBytes: Int, started: ContinuousClock.Instant
    ) -> PushReport {
        let entries = manifest.entries
        let fileBytes = entries.indices.reduce(Int64(0)) {
            $0 + (entries.kind(at: $1) == .file ? entries.size(at: $1) : 0)
        }
        return PushReport(
            document: name.value, version: version,
            files: manifest.fileCount, bytes: manifest.totalSize,
            chunks: manifest.allChunks.count, chunksSent: counters.chunksSent, bytesSent: counters.bytesSent,
            bytesReused: max(0, fileBytes - counters.plainBytesSent), manifestBytes: manifestBytes,
            seconds: (ContinuousClock.now - started).seconds)
    }

    /// What a version of the document the server keeps at `path`, read as `snapshot`, is
    /// announced (or batch-committed) as. In an end-to-end encrypted container it says nothing
    /// true but the kind: the size, time and mode are in the sealed manifest.
    func announcement(_ path: DocumentPath, _ snapshot: LocalSnapshot, baseVersion: Int64?) -> AnnounceRequest {
        let sealed = remote.endToEnd != nil
        let top = snapshot.top
        return AnnounceRequest(
            path: path, kind: DocumentKind(snapshot.kind), size: sealed ? 0 : snapshot.totalSize,
            mtimeNs: sealed ? 0 : top.mtimeNanoseconds, mode: sealed ? 0o600 : top.mode,
            baseVersion: baseVersion, device: options.device ?? remote.device)
    }

    /// Seals the pieces of sealed manifests and uploads them, a few megabytes at a time (a
    /// tree's manifest is megabytes: never all of it sealed at once).
    /// - Returns: Each piece's stored bytes, in order.
    func uploadPieces(_ pieces: [ArraySlice<UInt8>], endToEnd: EndToEndKeys) async throws -> [Int] {
        var stored: [Int] = []
        for batch in pieces.batched(atMost: 1024, budget: 4 << 20, cost: { $0.count }) {
            let sealed = try batch.map { piece in
                try piece.withUnsafeBytes { try endToEnd.chunks.seal($0, policy: options.compression) }
            }
            let result = try await remote.connection.upload(sealed, in: remote.container)
            guard result.received == sealed.count else {
                throw XferError(
                    .unavailable,
                    "the server received \(result.received) of the \(sealed.count) pieces of a sealed manifest; push again"
                )
            }
            stored += sealed.map(\.payload.count)
        }
        return stored
    }

    /// The manifest the server keeps for version `version` of the document at `path`: `manifest`
    /// itself, or in an end-to-end encrypted container its carrier (``EndToEndKeys``), once
    /// the sealed manifest's pieces are uploaded; and the bytes those pieces took (a report
    /// counts them with the manifest's, not with the document's chunks).
    func serverManifest(_ manifest: Manifest, at path: DocumentPath, version: Int64) async throws -> (
        manifest: Manifest, pieceBytes: Int
    ) {
        guard let endToEnd = remote.endToEnd else { return (manifest, 0) }
        let (carrier, pieces) = try endToEnd.carrier(of: manifest, sealedPath: path.value, version: version)
        // Sealed for this version: none is on the server yet (a retried push's are sent again).
        return (carrier, try await uploadPieces(pieces, endToEnd: endToEnd).reduce(0, +))
    }

    /// Sends a commit (`request`, whose JSON with its delta is `body`).
    func commit(_ request: CommitRequest, body: SpillArray<UInt8>, manifest: Manifest) async throws -> DocumentInfo {
        do {
            return try await remote.connection.commit(container: remote.container, body: body)
        } catch let error as XferError
            where (error.code == .invalidManifest || error.code == .notFound) && request.deltaBase != nil
        {
            // The server could not rebuild the delta (it lacks that version now): send the full manifest.
            var full = request
            full.deltaBase = nil
            return try await remote.connection.commit(
                container: remote.container, body: full.body(delta: manifest.delta(against: nil)))
        }
    }
}
