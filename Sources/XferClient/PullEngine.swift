import Foundation
import XferCore
import XferProtocol

/// Pulls a document's current version into a destination: reuses every chunk already on
/// disk, downloads and verifies only the rest, builds the result beside the destination and
/// swaps it in whole.
///
/// How a pull stays atomic: a file is written to `.NAME.xfer-VERSION.partial` beside the
/// target, fsynced, and renamed over it. A package is built as a whole tree in a staging
/// directory of that name, every file fsynced, and exchanged with the old tree in one
/// `renameat2(RENAME_EXCHANGE)`; the old tree is then removed. Readers see the old tree or
/// the new one, never a mix. An interrupted pull leaves the staging copy; a re-run of the same
/// version keeps every chunk in it that verifies and fetches only the rest.
public struct PullEngine: Sendable {
    let remote: Remote
    let options: PullOptions

    /// Creates an engine.
    public init(remote: Remote, options: PullOptions = PullOptions()) {
        self.remote = remote
        self.options = options
    }

    /// Staging files fsynced at once at the end of a pull.
    static let fsyncsInFlight = 4

    /// From this many files, a package's staging copy is made durable by one `syncfs` of its
    /// file system rather than an fsync per file and directory: 200,000 fsyncs each wait on a
    /// journal commit, and one syncfs does the same work once (docs/PERFORMANCE.md, "Restores:
    /// durable, and on every core"). Below it, fsyncs, which flush nothing of other programs'.
    static let syncWholeFileSystemFrom = 64
    /// In a package made durable by one syncfs, files from this size have their writeback
    /// started as their last chunk is written (smaller ones are left to the syncfs).
    static let writebackFrom: Int64 = 1 << 20
    /// In a package made durable by one syncfs, the file system's writeback starts after every
    /// this many bytes written (``EarlyWriteback``): the disk works on the small files while the
    /// rest download, and the final syncfs has less left (docs/PERFORMANCE.md, "Restores: durable,
    /// and on every core").
    static let earlyWritebackEvery = 2 << 20

    /// Pulls document `name` into `destination`.
    /// - Returns: What was done.
    /// - Throws: `not_found` (no such document, or deleted), `unavailable`, `unauthorized`,
    ///   `corrupt_chunk` (a chunk failed verification; nothing is published), `conflict` (the
    ///   destination's directory holds a symlink where the document goes), `io`.
    /// - Parameters:
    ///   - name: The document.
    ///   - destination: Where it goes (a file or a directory for a package). Its parent
    ///     directory is the user's choice and is created if missing; nothing is written outside it.
    ///   - version: A version to pull instead of the current one (a superseded or conflict one).
    ///   - state: The destination's state, if the caller keeps it.
    ///   - progress: Called now and then from any thread.
    ///   - confirmed: Awaited before the pull sends anything or makes the destination's directory,
    ///     while the destination's state opens (a new destination's database is made, which
    ///     waits on the disk): the server's answer that this engine's remote holds the
    ///     container's key as it should (``Remote/whileUnlocking(_:)``); `nil` when the remote is
    ///     ``Remote/unlocked()`` already.
    public func pull(
        _ name: DocumentPath, into destination: String, version: Int64? = nil, state: ClientState? = nil,
        progress: @escaping @Sendable (TransferProgress) -> Void = { _ in },
        confirmed: (@Sendable () async throws -> Void)? = nil
    ) async throws -> PullReport {
        try await remote.naming {
            try await ClientThreads.run {
                let (parentPath, baseName) = try resolve(name, into: destination, state: state)
                async let opened =
                    state ?? remote.clientState(root: ConfinedDirectory.path(of: baseName, in: parentPath))
                try await confirmed?()  // nothing has been sent yet
                let parent = try ConfinedDirectory(opening: parentPath, create: true)
                return try await pull(
                    name, in: parent, as: baseName, version: version, state: try await opened, progress: progress)
            }
        }
    }

    /// Where a pull of `name` into `destination` puts it: the parent directory and the name in it.
    /// An existing directory named otherwise than the document (or given with a trailing "/")
    /// that is not this document's own copy receives it as a new entry inside, as
    /// `cp -r doc.pkg ~/Downloads/` would. One of the document's own name is the target itself.
    func resolve(_ name: DocumentPath, into destination: String, state: ClientState?) throws
        -> (parent: String, baseName: String)
    {
        var target = ClientState.absolute(destination)
        var info = stat()
        if state == nil, let last = name.components.last, stat(target, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR,
            destination.hasSuffix("/") || (target as NSString).lastPathComponent != String(last),
            try remote.clientState(root: target)
                .documentVersion(server: remote.connection.server, container: remote.container, path: name) == nil
        {
            target += "/" + last
        }
        let parentPath = (target as NSString).deletingLastPathComponent
        let baseName = (target as NSString).lastPathComponent
        guard !baseName.isEmpty, baseName != "/", baseName != ".", baseName != ".." else {
            throw XferError(.invalidPath, "\(destination) names no file or directory to pull into")
        }
        return (parentPath, baseName)
    }

    /// Pulls document `name` to `baseName` inside `parent`: every write goes through `parent`'s
    /// descriptor, never through a symlink (the sync engine opens `parent` beneath its root).
    /// - Parameter trash: Where what the pull replaces goes first (a synced directory's trash).
    /// - Parameter sources: Where chunks on disk are, when the caller shares one finding among
    ///   several pulls (a sync pass); else found for this pull.
    /// - Parameter prefetched: The version, its manifest and (some of) its chunks, fetched
    ///   already with other documents' (a sync pass's batch): nothing of it is asked again.
    /// - Parameter stagingArea: Where the staging copy is built instead of beside the target (a
    ///   synced folder's hidden `.xfer-staging`, so nothing half-written appears among its
    ///   files). Used only when it is on the target's file system (the copy is renamed into
    ///   place); else the copy is built beside the target.
    ///
    /// A pull refused for what the server sent (a chunk or a manifest that fails its check)
    /// leaves no staging copy behind: nothing is written. One stopped by anything else (the
    /// connection, the disk) keeps it, and the next pull of the version resumes from it.
    func pull(
        _ document: DocumentPath, in parent: ConfinedDirectory, as baseName: String, version: Int64? = nil,
        state: ClientState? = nil, trash: Trash? = nil, sources shared: ChunkSources? = nil,
        prefetched: Prefetched? = nil, stagingArea: ConfinedDirectory? = nil,
        progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }
    ) async throws -> PullReport {
        do {
            return try await staged(
                document, in: parent, as: baseName, version: version, state: state, trash: trash, sources: shared,
                prefetched: prefetched, stagingArea: stagingArea, progress: progress)
        } catch let error as XferError where [.corruptChunk, .invalidManifest].contains(error.code) {
            let (area, prefix) = try Self.stagingPlace(
                remote.serverPath(document), in: parent, as: baseName, area: stagingArea)
            try? Self.removeStaleStaging(in: area, prefix: prefix, keep: "")
            throw error
        }
    }

    /// Where a pull of `name` (its path on the server) to `baseName` in `parent` builds its
    /// staging copies, and what their names start with.
    static func stagingPlace(
        _ name: DocumentPath, in parent: ConfinedDirectory, as baseName: String,
        area stagingArea: ConfinedDirectory?
    ) -> (area: ConfinedDirectory, prefix: String) {
        let area = stagingArea.flatMap { $0.isOnFileSystem(of: parent) ? $0 : nil } ?? parent
        return (area, area === parent ? ".\(baseName).xfer-" : "\(stagingKey(name))-")
    }

    /// A pull as decisions, then the steps that do them: the version and what the destination
    /// may have replaced (``PullPlanner``), the manifest, then the plan of the staging copy,
    /// performed: laid out, filled from disk, downloaded, finished, put in place and recorded.
    private func staged(
        _ document: DocumentPath, in parent: ConfinedDirectory, as baseName: String, version: Int64?,
        state given: ClientState?, trash: Trash?, sources shared: ChunkSources?, prefetched: Prefetched?,
        stagingArea: ConfinedDirectory?, progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> PullReport {
        let started = ContinuousClock.now
        let name = try remote.serverPath(document)
        let (info, state) = try await pullable(
            name, at: document, version: version, prefetched: prefetched, state: given, root: parent.describe(baseName))
        let job = Job(
            document: document, name: name, parent: parent, baseName: baseName, state: state,
            synced: try state.document(server: remote.connection.server, container: remote.container, path: document),
            known: try state.files(), trash: trash, started: started)
        // Asked before anything moves: what is there must be this client's own unchanged copy,
        // or the very version being pulled (a pull killed after putting it in place and before
        // recording it): that is no local change either.
        let directoryOverDirectory = PullPlanner.isDirectoryOverDirectory(info.kind, existing: parent.kind(baseName))
        let refusal = try destinationRefusal(job, directoryOverDirectory: directoryOverDirectory)
        if refusal == nil, let synced = job.synced,
            Self.isInPlace(
                info, synced: synced, target: job.target, known: job.known,
                digest: remote.serverDigest(of: synced, at: name))
        {
            return report(job, synced.version, synced.manifest, Counters(), manifestBytes: 0)
        }
        // Asked while the manifest is fetched and the staging copy laid out, not one round trip
        // after (a tree's pull waited for it with every file laid out and nothing fetched). Left
        // unawaited by an early return, it is cancelled.
        async let offersAgainst = remote.connection.features().contains(.chunksAgainst)
        let (answer, manifest) = try await manifest(job, info: info, prefetched: prefetched)
        try PullPlanner.checkKind(
            of: manifest, directoryOverDirectory: directoryOverDirectory, document: document, version: answer.version)
        if manifest.kind == .directory { return try pullDirectory(job, manifest, answer, refusal: refusal) }
        // The delta's pages, before the staging copy is laid out.
        ProcessMemory.returnFreePages(afterFiles: manifest.entries.count, bytes: 0)
        if let refusal, try !Self.holds(job.target, manifest, codec: remote.codec) { throw refusal }
        let sources = try (shared ?? ChunkSources(state)).locations()

        // The staging copy: in the staging area under a name of this document's own, or beside the target.
        let (area, prefix) = Self.stagingPlace(name, in: parent, as: baseName, area: stagingArea)
        let stagingName = PullPlanner.stagingName(prefix: prefix, version: answer.version)
        try Self.removeStaleStaging(in: area, prefix: prefix, keep: stagingName)
        var plan = PullPlanner.plan(
            manifest, stagingName: stagingName, resuming: area.kind(stagingName) != nil, force: options.force,
            refused: refusal != nil, local: sources, prefetched: Set(prefetched.map { Array($0.chunks.keys) } ?? []))
        let copy = try layOut(plan, manifest, in: area)
        defer { copy.close() }
        let counters = Locked(
            Counters(chunksFetched: prefetched?.chunksFetched ?? 0, bytesFetched: prefetched?.bytesFetched ?? 0))
        let order = try fillFromDisk(&plan, copy, manifest: manifest, prefetched: prefetched, counters: counters)
        let against = pullAgainst(
            order, plan: plan, manifest: manifest, job: job, sources: sources, offers: await offersAgainst)
        try await download(
            order, files: copy.files, maximumLength: manifest.chunker.maximumSize,
            against: against, total: manifest.totalSize, counters: counters, early: copy.early, progress: progress)
        // Every place of every file written, each once: else nothing is published.
        guard copy.files.allWritten else {
            throw XferError(
                .corruptChunk,
                "not every chunk of \(document) version \(answer.version) was written; nothing was published")
        }
        // The download bodies' pages, before the state is written.
        ProcessMemory.returnFreePages(afterFiles: manifest.entries.count, bytes: manifest.totalSize)
        try await finishFiles(copy, plan, manifest, job: job)
        try await putInPlace(copy, plan, manifest, info: info, answer: answer, job: job)
        return report(job, answer.version, manifest, counters.value, manifestBytes: answer.deltaSize)
    }

    /// The version a pull takes (prefetched, or asked while the destination's state opens: a
    /// file, its schema checked) and that state. End to end, the server is not trusted with
    /// what is current: a version older than one seen is refused.
    private func pullable(
        _ name: DocumentPath, at document: DocumentPath, version: Int64?, prefetched: Prefetched?,
        state given: ClientState?, root target: String
    ) async throws -> (DocumentInfo, ClientState) {
        let info: DocumentInfo
        let state: ClientState
        if let prefetched {
            try Self.checkPullable(prefetched.info, name, version: version)
            info = prefetched.info
            state = try given ?? remote.clientState(root: target)
        } else {
            async let asked = pullableVersion(name, version: version)
            state = try given ?? remote.clientState(root: target)
            info = try await asked
        }
        if version == nil, let seen = try remote.seenVersions() {
            try seen.check(info, at: document)
            try seen.raise([(document, info.version)])
        }
        return (info, state)
    }

    /// The `conflict` the destination's check gives (``checkReplaceable(target:exists:synced:known:name:)``),
    /// when ``PullPlanner/checksDestination(force:directoryOverDirectory:)`` says it is made;
    /// `nil` when it is not made or passes.
    private func destinationRefusal(_ job: Job, directoryOverDirectory: Bool) throws -> XferError? {
        guard PullPlanner.checksDestination(force: options.force, directoryOverDirectory: directoryOverDirectory)
        else { return nil }
        do {
            try Self.checkReplaceable(
                target: job.target, exists: job.parent.kind(job.baseName) != nil, synced: job.synced,
                known: job.known, name: job.document)
            return nil
        } catch let error as XferError where error.code == .conflict {
            return error
        }
    }

    /// The manifest of version `info`: the one the batch fetched, or asked of the server now.
    private func manifest(_ job: Job, info: DocumentInfo, prefetched: Prefetched?) async throws -> (
        answer: ManifestAnswer, manifest: Manifest
    ) {
        guard let prefetched else { return try await manifest(job.name, info: info, synced: job.synced) }
        let digest = prefetched.digest ?? prefetched.manifest.digest
        return ((deltaSize: 0, version: prefetched.info.version, digest: digest), prefetched.manifest)
    }

    /// Puts a directory document in place (``makeDirectory(_:in:_:replacing:trash:)``) and records it.
    private func pullDirectory(_ job: Job, _ manifest: Manifest, _ answer: ManifestAnswer, refusal: XferError?)
        throws -> PullReport
    {
        // End to end a directory's mode is not kept (``EndToEndKeys``): this device's is
        // recorded, so a pass sees the directory unchanged.
        let sealed = remote.endToEnd != nil
        let mode = try Self.makeDirectory(
            job.baseName, in: job.parent, sealed ? nil : manifest.entries[0].mode, replacing: refusal,
            trash: job.trash.map { trash in
                { kept in
                    try trash.keep(
                        kept, in: job.parent, path: job.document, reason: "replaced by version \(answer.version)")
                }
            })
        try job.state.recordSynced(
            server: remote.connection.server, container: remote.container, path: job.document,
            document: SyncedDocument(
                version: answer.version, manifest: sealed ? .directory(mode: mode) : manifest,
                serverDigest: sealed ? answer.digest.hex : nil), files: [])
        return report(job, answer.version, manifest, Counters(), manifestBytes: answer.deltaSize)
    }

    /// The version a pull of `name` takes (`version`, else the current one), as the server describes it.
    /// - Throws: `not_found` if it is deleted or has no committed version.
    func pullableVersion(_ name: DocumentPath, version: Int64?) async throws -> DocumentInfo {
        let info = try await remote.connection.stat(container: remote.container, path: name, version: version)
        try Self.checkPullable(info, name, version: version)
        return info
    }

    /// Throws `not_found` unless `info` is a version a pull may write: a committed one, and
    /// the current one when no version was asked for.
    static func checkPullable(_ info: DocumentInfo, _ name: DocumentPath, version: Int64?) throws {
        guard info.path == name, [.current, .superseded, .conflict].contains(info.state),
            version != nil || info.state == .current,
            version == nil || version == info.version
        else {
            throw XferError(
                .notFound,
                info.state == .deleted
                    ? "\(name) was deleted (version \(info.version))"
                    : "\(name) has no committed version yet (an upload is in progress)")
        }
    }

    /// What a pull keeps of the server's answer for a manifest: the delta's size, not its bytes
    /// (megabytes for a tree of many files, let go once the manifest is made).
    typealias ManifestAnswer = (deltaSize: Int, version: Int64, digest: ChunkID)

    /// The manifest of version `info`, as a delta against the synced copy's where the server
    /// still has that base, checked against its digest.
    /// In an end-to-end encrypted container, the carrier (a delta against the synced copy's,
    /// rebuilt here, the same way), checked against its digest, then the manifest sealed in it
    /// (``EndToEndKeys/manifest(in:sealedPath:version:fetch:)``), whose pieces come whole.
    func manifest(_ name: DocumentPath, info: DocumentInfo, synced: SyncedDocument?) async throws -> (
        answer: ManifestAnswer, manifest: Manifest
    ) {
        let connection = remote.connection
        // What the server records for the version (the manifest, or end to end its carrier), as
        // a delta against what it records for the version this copy holds: the synced manifest,
        // or its carrier rebuilt here (a list of ids, which changes where the content did).
        let base = synced.flatMap { synced in
            remote.endToEnd == nil ? synced.manifest : remote.serverCarrier(of: synced, at: name)
        }
        var answer = try await connection.manifest(
            container: remote.container, path: name, version: info.version,
            base: base == nil ? nil : synced?.version)
        var recorded: Manifest
        do {
            recorded = try Manifest(applying: answer.delta, to: answer.base != nil ? base : nil)
        } catch let error as XferError where error.code == .invalidManifest && answer.base != nil {
            // The server's version `base` is not the one this copy holds (a replaced or restored
            // server reusing numbers): ask for the whole of it instead.
            answer = try await connection.manifest(
                container: remote.container, path: name, version: info.version, base: nil)
            recorded = try Manifest(applying: answer.delta, to: nil)
        }
        guard recorded.digest == answer.digest, answer.version == info.version else {
            throw XferError(
                .invalidManifest,
                "the manifest the server records for \(name) version \(answer.version) does not match its digest")
        }
        guard let endToEnd = remote.endToEnd else {
            return ((answer.delta.count, answer.version, answer.digest), recorded)
        }
        var pieceBytes = 0  // the sealed manifest's pieces, counted with the manifest's bytes
        let manifest = try await endToEnd.manifest(in: recorded, sealedPath: name.value, version: answer.version) {
            ids in
            var pieces: [EncodedChunk] = []
            try await connection.download(ids, in: remote.container) { pieces.append($0) }
            pieceBytes += pieces.reduce(0) { $0 + $1.payload.count }
            return pieces
        }
        return ((answer.delta.count + pieceBytes, answer.version, answer.digest), manifest)
    }

    private func report(
        _ job: Job, _ version: Int64, _ manifest: Manifest, _ counters: Counters, manifestBytes: Int
    ) -> PullReport {
        return PullReport(
            document: job.document.value, destination: job.target, kind: DocumentKind(manifest.kind),
            version: version, files: manifest.fileCount, bytes: manifest.totalSize,
            chunksFetched: counters.chunksFetched, bytesFetched: counters.bytesFetched,
            chunksReused: counters.chunksReused, manifestBytes: manifestBytes,
            seconds: (ContinuousClock.now - job.started).seconds)
    }
}
