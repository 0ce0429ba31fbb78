import CXferShims
import Foundation
import XferCore
import XferProtocol

/// What a pull did (`xfer pull --json` prints it).
public struct PullReport: Codable, Sendable {
    /// The document's path.
    public var document: String
    /// Where it was put (a pull into an existing directory puts it inside, as `cp -r` does).
    public var destination: String = ""
    /// A file (or symlink), a package, or a directory alone.
    public var kind: DocumentKind = .file
    /// The version now on disk.
    public var version: Int64
    /// Files in the document.
    public var files: Int
    /// Content bytes.
    public var bytes: Int64
    /// Chunks downloaded.
    public var chunksFetched: Int
    /// Payload bytes downloaded (compressed chunk bytes).
    public var bytesFetched: Int64
    /// Chunk references satisfied from disk (the previous version, other synced files, an interrupted pull).
    public var chunksReused: Int
    /// Bytes of the manifest (delta) downloaded.
    public var manifestBytes: Int
    /// Wall-clock seconds.
    public var seconds: Double
}

/// Tuning for pull.
public struct PullOptions: Sendable {
    /// Download requests in flight at once.
    public var downloadsInFlight = 4
    /// Plain bytes asked for per download request.
    public var downloadBatchBytes = 8 << 20
    /// Replace whatever is at the destination (`xfer pull --force`). Without it a pull
    /// replaces only what this client itself wrote there from the same document and what has
    /// not changed since; anything else is refused with `conflict` and left as it is, checked
    /// before anything is downloaded and again just before the new version is put in place.
    public var force = false
    /// Payload bytes of recently synced small files' chunks the client state keeps, to fetch
    /// their next edits against (``ChunkCache``); a pull offers it at most this many plain bytes.
    public var cacheBytes = ChunkCache.defaultMaximumBytes

    /// Defaults.
    public init() {}
}

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

    /// A place a chunk's bytes go: a file (by index) and offset.
    struct Target: Sendable, Equatable {
        var file: Int
        var offset: Int64
    }

    struct Counters: Sendable {
        var bytesDone: Int64 = 0
        var chunksFetched = 0
        var bytesFetched: Int64 = 0
        var chunksReused = 0
    }

    /// Staging files fsynced at once at the end of a pull.
    static let fsyncsInFlight = 4

    /// From this many files, a package's staging copy is made durable by one `syncfs` of its
    /// file system rather than an fsync per file and directory: 200,000 fsyncs each wait on a
    /// journal commit, and one syncfs does the same work once (docs/PERFORMANCE.md). Below it,
    /// fsyncs, which flush nothing of other programs'.
    static let syncWholeFileSystemFrom = 64
    /// In a package made durable by one syncfs, files from this size have their writeback
    /// started as their last chunk is written (smaller ones are left to the syncfs).
    static let writebackFrom: Int64 = 1 << 20
    /// In a package made durable by one syncfs, the file system's writeback starts after every
    /// this many bytes written (``EarlyWriteback``): the disk works on the small files while the
    /// rest download, and the final syncfs has less left (docs/PERFORMANCE.md, sixteenth step).
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

    private func staged(
        _ document: DocumentPath, in parent: ConfinedDirectory, as baseName: String, version: Int64?,
        state given: ClientState?, trash: Trash?, sources shared: ChunkSources?, prefetched: Prefetched?,
        stagingArea: ConfinedDirectory?, progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> PullReport {
        let started = ContinuousClock.now
        // The server knows the document by `name`: its sealed path in an end-to-end encrypted
        // container. This device (its state, its trash, the report) by `document`.
        let name = try remote.serverPath(document)
        let connection = remote.connection
        let info: DocumentInfo
        let target = parent.describe(baseName)
        let state: ClientState
        if let prefetched {
            try Self.checkPullable(prefetched.info, name, version: version)
            info = prefetched.info
            state = try given ?? remote.clientState(root: target)
        } else {
            // The state database opens (a file, its schema checked) while the server answers.
            async let asked = pullableVersion(name, version: version)
            state = try given ?? remote.clientState(root: target)
            info = try await asked
        }
        let synced = try state.document(server: connection.server, container: remote.container, path: document)
        if version == nil, let seen = try remote.seenVersions() {
            // End to end, the server is not trusted with what is current: never older than seen.
            try seen.check(info, at: document)
            try seen.raise([(document, info.version)])
        }

        let known = try state.files()
        // Asked before anything moves: what is there must be this client's own unchanged copy,
        // or the very version being pulled (a pull killed after putting it in place and before
        // recording it): that is no local change either.
        var refusal: XferError? = nil
        // A directory document over a directory replaces nothing: what is in it stays.
        let directoryOverDirectory = info.kind == .directory && parent.kind(baseName) == S_IFDIR
        if !options.force && !directoryOverDirectory {
            do {
                try Self.checkReplaceable(
                    target: target, exists: parent.kind(baseName) != nil, synced: synced, known: known, name: document)
            } catch let error as XferError where error.code == .conflict {
                refusal = error
            }
        }
        if refusal == nil, let synced,
            Self.isInPlace(
                info, synced: synced, target: target, known: known, digest: remote.serverDigest(of: synced, at: name))
        {
            return report(
                document, target, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
        }
        // Asked while the manifest is fetched and the staging copy laid out, not one round trip
        // after (a tree's pull waited for it with every file laid out and nothing fetched). Left
        // unawaited by an early return, it is cancelled.
        async let offersAgainst = connection.features().contains(.chunksAgainst)
        let (answer, manifest): (answer: ManifestAnswer, manifest: Manifest)
        if let prefetched {
            (answer, manifest) = (
                (
                    deltaSize: 0, version: prefetched.info.version,
                    digest: prefetched.digest ?? prefetched.manifest.digest
                ), prefetched.manifest
            )
        } else {
            (answer, manifest) = try await self.manifest(name, info: info, synced: synced)
        }
        guard !directoryOverDirectory || manifest.kind == .directory else {
            throw XferError(
                .invalidManifest,
                "the server describes \(document) version \(answer.version) as a directory, but its manifest is a \(DocumentKind(manifest.kind).rawValue); nothing was changed"
            )
        }
        if manifest.kind == .directory {
            // End to end a directory's mode is not kept (``EndToEndKeys``): this device's is
            // recorded, so a pass sees the directory unchanged.
            let sealed = remote.endToEnd != nil
            let mode = try Self.makeDirectory(
                baseName, in: parent, sealed ? nil : manifest.entries[0].mode, replacing: refusal,
                trash: trash.map { trash in
                    { kept in
                        try trash.keep(
                            kept, in: parent, path: document, reason: "replaced by version \(answer.version)")
                    }
                })
            try state.recordSynced(
                server: connection.server, container: remote.container, path: document,
                document: SyncedDocument(
                    version: answer.version, manifest: sealed ? .directory(mode: mode) : manifest,
                    serverDigest: sealed ? answer.digest.hex : nil), files: [])
            return report(
                document, target, answer.version, manifest, Counters(), manifestBytes: answer.deltaSize,
                started: started)
        }
        // The delta's pages, before the staging copy is laid out.
        ProcessMemory.returnFreePages(afterFiles: manifest.entries.count, bytes: 0)
        if let refusal, try !Self.holds(target, manifest, codec: remote.codec) { throw refusal }
        let alreadyThere = refusal != nil
        let sources = try (shared ?? ChunkSources(state)).locations()

        // The staging copy: in the staging area under a name of this document's own, or beside the target.
        let (area, prefix) = Self.stagingPlace(name, in: parent, as: baseName, area: stagingArea)
        let stagingName = "\(prefix)\(answer.version).partial"
        try Self.removeStaleStaging(in: area, prefix: prefix, keep: stagingName)
        let resuming = area.kind(stagingName) != nil

        // Lay out the staging copy: directories, symlinks, files at their final size. Every
        // name is created in a directory opened beneath the staging copy, never through a symlink.
        // Each staged file: its entry's index in the manifest (where it is staged is its entry's
        // path below the staging copy, or the staging file's name in the area for a single file).
        var fileEntries = SpillArray<Int>()
        let fileCount = manifest.entries.indices.reduce(0) { $0 + (manifest.entries.kind(at: $1) == .file ? 1 : 0) }
        fileEntries.reserveCapacity(fileCount)
        var links: [(entry: Manifest.Entry, directory: ConfinedDirectory, name: String)] = []
        var staging: ConfinedDirectory? = nil
        if manifest.kind == .package {
            // A resumed staging copy may hold anything: only a real directory is kept.
            try area.remove(stagingName, unless: S_IFDIR)
            try area.makeDirectory(stagingName)
            staging = try area.directory([stagingName], create: false)
        }
        // A new staging copy is empty: nothing in it to remove first, and its files are created
        // by their first write (exclusively: a name that appears meanwhile stops the pull).
        let fresh = staging != nil && !resuming
        var creating: [Bool] = []
        if fresh { creating.reserveCapacity(fileCount) }
        var lastDirectory: (path: Substring, directory: ConfinedDirectory)? = nil
        let stagingPath = area.describe(stagingName)
        for (entryIndex, entry) in manifest.entries.enumerated() {
            let directory: ConfinedDirectory
            let leaf: String
            var parentPath: Substring = ""
            if let staging {
                let slash = entry.path.lastIndex(of: "/")
                parentPath = slash.map { entry.path[..<$0] } ?? ""
                leaf = String(slash.map { entry.path[entry.path.index(after: $0)...] } ?? entry.path[...])
                if let last = lastDirectory, last.path == parentPath {
                    directory = last.directory
                } else {
                    directory = try staging.directory(parentPath.split(separator: "/"), create: false)
                    lastDirectory = (parentPath, directory)
                }
            } else {
                directory = area
                leaf = stagingName
            }
            switch entry.kind {
            case .directory:
                if !fresh { try directory.remove(leaf, unless: S_IFDIR) }
                try directory.makeDirectory(leaf)
            case .symlink:
                if !fresh { try directory.remove(leaf) }
                try directory.makeSymlink(leaf, target: entry.symlinkTarget ?? "")
                links.append((entry, directory, leaf))
            case .file:
                if fresh {
                    // Created by its first chunk's write; an empty file has none, so it is made here.
                    if entry.size == 0 { close(try directory.openFile(leaf, flags: O_RDWR | O_CREAT | O_EXCL)) }
                    creating.append(entry.size > 0)
                } else {
                    try directory.remove(leaf, unless: S_IFREG)
                    // Created at its final size and closed: StagingFiles opens it again to write.
                    let fd = try directory.openFile(leaf, flags: O_RDWR | O_CREAT)
                    defer { close(fd) }
                    try Self.check(ftruncate(fd, off_t(entry.size)), "size", directory.describe(leaf))
                }
                fileEntries.append(entryIndex)
            }
        }
        lastDirectory = nil
        // A package of many files is made durable by one syncfs at the end, which writes its
        // small files out together: their writeback is not started one by one (a write request
        // per file of a few kB); a large file's still is, so the syncfs finds little left.
        let wholeFileSystem = staging != nil && fileEntries.count >= Self.syncWholeFileSystemFrom
        let entries = manifest.entries
        let filesEntries = fileEntries
        // After its last chunk a file's writeback starts (not a small one's when one syncfs
        // makes the package durable); with no fsync of its own to come, it is finished then too.
        let inPackage = staging != nil
        let handles = StagingFiles(
            root: staging ?? area, prefix: inPackage ? stagingPath : area.path, count: fileEntries.count,
            path: { [stagingName] in inPackage ? entries.path(at: filesEntries[$0]) : stagingName },
            writes: fileEntries.map { manifest.entries.chunks(at: $0).count },
            creating: fresh ? creating : nil
        ) { index, fd in
            let entry = entries[filesEntries[index]]
            if !wholeFileSystem || entry.size >= Self.writebackFrom { Syscall.startWriteback(fd) }
            // Only a mode its owner can read and write: a pull resumed from this staging copy
            // opens the file again to write (a read-only one is given its mode at the end).
            guard wholeFileSystem, Self.safeMode(entry.mode) & 0o600 == 0o600 else { return false }
            try Self.finish(fd, entry, path: "\(stagingPath)/\(entry.path)", durable: false)
            return true
        }
        creating = []
        defer { handles.closeAll() }
        let early = wholeFileSystem ? staging.flatMap { EarlyWriteback($0, threshold: Self.earlyWritebackEvery) } : nil
        defer { early?.close() }

        // Decide where each chunk comes from (the staging copy of a resumed pull, a local file,
        // the batch's prefetched chunks, or the server), then try each source in that order.
        var plan = ChunkSourcing.make(
            files: FileChunks(manifest.entries, entryIndexes: fileEntries), resuming: resuming, local: sources,
            prefetched: Set(prefetched.map { Array($0.chunks.keys) } ?? []))
        let counters = Locked(
            Counters(chunksFetched: prefetched?.chunksFetched ?? 0, bytesFetched: prefetched?.bytesFetched ?? 0))
        var buffer = [UInt8](repeating: 0, count: manifest.chunker.maximumSize)
        var failed: [Int] = []
        for (index, step) in plan.steps.enumerated() {
            let path = handles.path(step.file)
            guard
                let source = try step.sources.first(where: { source in
                    try handles.with(step.file) { fd in
                        try Self.fill(
                            step, from: source, into: fd, path: path, prefetched: prefetched, codec: remote.codec,
                            buffer: &buffer)
                    }
                })
            else {
                failed.append(index)
                continue
            }
            try handles.wrote(step.file)
            if source != .staging { early?.wrote(step.chunk.length) }  // (a resumed pull's chunks were written before)
            // A chunk from disk was reused; one the batch fetched was downloaded all the same.
            counters.withLock {
                if source != .prefetched { $0.chunksReused += 1 }
                $0.bytesDone += Int64(step.chunk.length)
            }
        }
        let order = plan.downloads(failed: failed)
        plan.steps = []  // the downloads hold what is left to do
        failed = []

        // A changed chunk comes against the one at its place in this client's version, where the
        // cache or the file on disk still has it (any file size: the old file is still here).
        // Only the files with chunks to download are looked up.
        var previous = PreviousChunks(sizeLimit: .max)
        var against = PullAgainst(
            cache: ChunkCache(database: state.database, maximumBytes: options.cacheBytes), sources: sources,
            offers: await offersAgainst, codec: remote.codec)
        // A file's path and size are read once for its run of places (a large file's entry is
        // tens of thousands of chunks: read whole per place, it made a 1 GiB restore quadratic).
        var current: (file: Int, path: String, size: Int64)? = nil
        for download in order {
            for target in download.targets {
                if current?.file != target.file {
                    let index = fileEntries[target.file]
                    current = (target.file, manifest.entries.path(at: index), manifest.entries.size(at: index))
                    if let synced, let path = current?.path {
                        previous.add(fullPath: path, relativePath: path, previous: synced.manifest)
                    }
                }
                guard let file = current else { continue }
                against.add(download.chunk, at: target.offset, in: file.path, size: file.size, previous: previous)
            }
        }

        try await download(
            order, files: handles, maximumLength: manifest.chunker.maximumSize,
            against: against, total: manifest.totalSize, counters: counters, early: early, progress: progress)
        // Every place of every file written, each once: else nothing is published.
        guard handles.allWritten else {
            throw XferError(
                .corruptChunk,
                "not every chunk of \(document) version \(answer.version) was written; nothing was published")
        }
        // The download bodies' pages, before the state is written.
        ProcessMemory.returnFreePages(afterFiles: manifest.entries.count, bytes: manifest.totalSize)

        // Files the package's ignore rules leave out (never on any server) go on in the new
        // tree; before the directories' times are set, so those stay the version's.
        if !options.force, let staging, parent.kind(baseName) == S_IFDIR {
            try Self.carryIgnoredFiles(
                from: parent.directory([baseName], create: false), at: target, to: staging, manifest: manifest)
        }

        // Metadata, durability, then publish. The fsyncs run several at once (each mostly waits
        // on writeback that started as its file's last chunk was written). A package of many
        // files is made durable by one syncfs at the end instead (Self.syncWholeFileSystemFrom).
        let placed = fileEntries
        // Files finished by their last chunk (StagingFiles' whenWritten) are done already.
        let unfinished = placed.indices.filter { !handles.isFinished($0) }
        try await concurrentForEach(unfinished, width: Self.fsyncsInFlight) { index in
            let entry = manifest.entries[placed[index]]
            try handles.with(index) { fd in
                try Self.finish(fd, entry, path: handles.path(index), durable: !wholeFileSystem)
            }
            handles.close(index)
        }
        // A symlink keeps its version's mtime too, or the next scan takes it for a local edit.
        for link in links {
            try link.directory.setModificationTime(link.entry.mtimeNanoseconds, of: link.name)
        }
        // A package's files are finished: their rows go into the state (held aside until the
        // version is published) while the disk makes the staging copy durable, with the stamps
        // they have there, which renaming the copy into place does not change.
        let stagedFiles = staging.map { StagedFiles(manifest: manifest, files: fileEntries, root: $0) }
        async let staged = Self.stageRows(state, stagedFiles)
        if let staging {
            for entry in manifest.entries.reversed() where entry.kind == .directory {
                let directory = try staging.directory(entry.path.split(separator: "/"), create: false)
                try directory.setMode(Self.safeMode(entry.mode))
                if !wholeFileSystem { try directory.synchronize() }
                try directory.setModificationTime(entry.mtimeNanoseconds)
            }
            // The package root's own mode and mtime travel in the version's metadata.
            try staging.setMode(Self.safeMode(UInt32(truncatingIfNeeded: info.mode)))
            if wholeFileSystem {
                try staging.setModificationTime(info.mtimeNs)
                try staging.synchronizeFileSystem()  // every staged file and directory, at once
                // An error only an early writeback met (one of the file system's own) fails the pull too.
                if let failure = early?.failure { throw XferError.writing(failure, "syncfs", stagingPath) }
            } else {
                try staging.synchronize()
                try staging.setModificationTime(info.mtimeNs)
            }
        }
        if !options.force {
            if alreadyThere {
                guard try Self.holds(target, manifest, codec: remote.codec) else {
                    throw XferError(
                        .conflict,
                        "\(target) changed on this device during the pull; it was not replaced by the server's \(document) (pass --force to replace it)"
                    )
                }
            } else {
                try Self.checkUnchanged(target: target, known: known, name: document)
            }
        }
        // The staged files' rows are taken before the copy moves (their paths are the staging copy's).
        let rowsStaged = try await staged
        try Self.publish(
            stagingName, from: area, as: baseName, in: parent, package: manifest.kind == .package,
            keep: trash.map { trash in
                { directory, kept, hardLink in
                    try trash.keep(
                        kept, in: directory, path: document, reason: "replaced by version \(answer.version)",
                        hardLink: hardLink, as: baseName)
                }
            })
        try parent.synchronize()

        if rowsStaged {
            try state.recordStagedSynced(
                server: connection.server, container: remote.container, path: document,
                document: SyncedDocument(
                    version: answer.version, manifest: manifest,
                    serverDigest: remote.endToEnd == nil ? nil : answer.digest.hex))
        } else {
            let written = WrittenFiles(manifest: manifest, files: fileEntries, target: target)
            try state.recordSynced(
                server: connection.server, container: remote.container, path: document,
                document: SyncedDocument(
                    version: answer.version, manifest: manifest,
                    serverDigest: remote.endToEnd == nil ? nil : answer.digest.hex), files: written)
        }
        return report(
            document, target, answer.version, manifest, counters.value, manifestBytes: answer.deltaSize,
            started: started)
    }

    /// Holds a staged package's file rows aside in `state` (``ClientState/stageSynced(files:)``).
    /// - Returns: Whether it did (`files` is `nil` for a file document, whose stamp is taken
    ///   once it is in place: renaming a file changes its ctime).
    static func stageRows(_ state: ClientState, _ files: StagedFiles?) throws -> Bool {
        guard let files else { return false }
        try state.stageSynced(files: files)
        return true
    }

    /// Gives a staged file its version's mode and modification time, fsynced between the two
    /// when `durable` (else a syncfs of the whole staging copy makes it durable later).
    static func finish(_ fd: Int32, _ entry: Manifest.Entry, path: String, durable: Bool) throws {
        try check(fchmod(fd, safeMode(entry.mode)), "set the mode of", path)
        if durable { try Syscall.fsync(fd, path: path) }
        try check(
            futimens(
                fd,
                [
                    ConfinedDirectory.timeSpec(entry.mtimeNanoseconds),
                    ConfinedDirectory.timeSpec(entry.mtimeNanoseconds)
                ]),
            "set the modification time of", path)
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

    /// The rule for replacing what is at `target` without `--force`: only this client's own
    /// copy of the same document (per `synced`), unchanged since it was written.
    /// - Throws: `conflict`, saying what to do, if anything else is there.
    static func checkReplaceable(
        target: String, exists: Bool, synced: SyncedDocument?, known: [String: KnownFile],
        name: DocumentPath
    ) throws {
        if exists && synced == nil {
            throw XferError(
                .conflict,
                "\(target) already exists and was not pulled from \(name) here; nothing was changed. Pull into another path, or pass --force to replace it"
            )
        }
        try checkUnchanged(target: target, known: known, name: name)
    }

    /// Whether `target` already holds version `info` as it was written: the same version and
    /// manifest, every file untouched since.
    /// - Parameter digest: The digest the server records for `synced`, when not its manifest's
    ///   (``Remote/serverDigest(of:at:)``).
    static func isInPlace(
        _ info: DocumentInfo, synced: SyncedDocument, target: String, known: [String: KnownFile],
        digest: String? = nil
    ) -> Bool {
        guard synced.version == info.version,
            info.manifestDigest == nil || info.manifestDigest == (digest ?? synced.manifest.digest.hex)
        else {
            return false
        }
        return synced.manifest.entries.allSatisfy { entry in
            let path = entry.path.isEmpty ? target : target + "/" + entry.path
            return entry.kind != .file || known[entry.path].map { FileStamp.of(path) == $0.stamp } == true
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
            try await connection.download(ids) { pieces.append($0) }
            pieceBytes += pieces.reduce(0) { $0 + $1.payload.count }
            return pieces
        }
        return ((answer.delta.count + pieceBytes, answer.version, answer.digest), manifest)
    }

    private func report(
        _ name: DocumentPath, _ target: String, _ version: Int64, _ manifest: Manifest, _ counters: Counters,
        manifestBytes: Int, started: ContinuousClock.Instant
    ) -> PullReport {
        return PullReport(
            document: name.value, destination: target, kind: DocumentKind(manifest.kind), version: version,
            files: manifest.fileCount, bytes: manifest.totalSize,
            chunksFetched: counters.chunksFetched, bytesFetched: counters.bytesFetched,
            chunksReused: counters.chunksReused, manifestBytes: manifestBytes,
            seconds: (ContinuousClock.now - started).seconds)
    }

    /// How many bytes of downloaded chunks a request holds for the cache before writing them to it.
    static let keptBatchBytes = 1 << 20

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
    /// seventeenth and eighteenth steps).
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
    private func download(
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
        let connection = remote.connection
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for batch in batches {
                if running >= options.downloadsInFlight {
                    try await group.next()
                    running -= 1
                }
                running += 1
                group.addTask {
                    let ids = order[batch].map(\.chunk.id)
                    // Which download each asked chunk is: a map of this request's chunks only,
                    // each taken out as it arrives (a chunk sent twice is refused, so with the
                    // count of chunks checked, every asked one came).
                    var asked = Dictionary(zip(ids, batch), uniquingKeysWith: { first, _ in first })
                    let offer = against.offer(for: ids)
                    // Chunks for the cache go to it a megabyte at a time, not a whole body's worth
                    // per request in flight (at the start of a pull of many small files, all of them are).
                    var kept: [EncodedChunk] = []
                    var keptBytes = 0
                    try await connection.download(ids, against: offer.references) { chunk in
                        guard let index = asked.removeValue(forKey: chunk.id) else {
                            throw XferError(
                                .corruptChunk,
                                "the server sent chunk \(chunk.id), which was not asked for or was sent already; nothing was published"
                            )
                        }
                        let download = order[index]
                        let before = kept.count
                        let plain = try against.decode(chunk, offer, maximumLength: maximumLength, kept: &kept)
                        if kept.count > before { keptBytes += kept[before].payload.count }
                        if keptBytes >= Self.keptBatchBytes {
                            against.keep(kept)
                            kept.removeAll(keepingCapacity: true)
                            keptBytes = 0
                        }
                        // The hash vouches for the bytes; the manifest's length must agree too, or
                        // the file would be written at a size the server made up.
                        guard plain.count == download.chunk.length else {
                            throw XferError(
                                .corruptChunk,
                                "chunk \(chunk.id) holds \(plain.count) bytes, but the manifest declares \(download.chunk.length); nothing was published"
                            )
                        }
                        let targets = download.targets
                        for target in targets {
                            try files.with(target.file) { fd in
                                try Self.write(
                                    plain, count: plain.count, to: fd, at: target.offset, path: files.path(target.file))
                            }
                            try files.wrote(target.file)
                        }
                        early?.wrote(plain.count * targets.count)
                        let c = counters.withLock { c in
                            c.chunksFetched += 1
                            c.bytesFetched += Int64(chunk.payload.count)
                            c.bytesDone += Int64(plain.count * targets.count)
                            return c
                        }
                        progress(
                            TransferProgress(bytesDone: c.bytesDone, bytesTotal: total, bytesOnWire: c.bytesFetched))
                    }
                    against.keep(kept)
                }
            }
            try await group.waitForAll()
        }
    }

    /// A version fetched with others' for one pull: its state, its manifest (checked against
    /// the state's digest) and the plain bytes of those of its chunks that came with it
    /// (each checked against its id).
    struct Prefetched: Sendable {
        var info: DocumentInfo
        var manifest: Manifest
        var chunks: [ChunkID: [UInt8]]
        /// The batch's downloads charged to this document (each chunk to the first document
        /// of the batch that wanted it), so a pass's report counts every byte on the wire once.
        var chunksFetched = 0
        var bytesFetched: Int64 = 0
        /// The digest the server records for the version: its carrier's, end to end (`nil`:
        /// the manifest's own).
        var digest: ChunkID? = nil
    }
}

/// A package's files as its staging copy holds them, as the state records them: each one's
/// stamp looked at beneath the staging copy's open directory (never by a path resolved again),
/// with its chunk list, made one at a time. A file that cannot be looked at gets no row (the
/// next push reads it again).
struct StagedFiles: Sequence, Sendable {
    let manifest: Manifest
    /// Indexes of the file entries in `manifest`.
    let files: SpillArray<Int>
    /// The staging copy's root.
    let root: ConfinedDirectory

    struct Iterator: IteratorProtocol {
        let staged: StagedFiles
        var index = 0
        /// The directory of the file before (files come in path order: a directory's files together).
        var directory: (path: Substring, opened: ConfinedDirectory?)? = nil

        mutating func next() -> KnownFile? {
            while index < staged.files.count {
                defer { index += 1 }
                let entry = staged.manifest.entries[staged.files[index]]
                let slash = entry.path.lastIndex(of: "/")
                let parent = slash.map { entry.path[..<$0] } ?? ""
                let name = String(slash.map { entry.path[entry.path.index(after: $0)...] } ?? entry.path[...])
                if directory?.path != parent {
                    directory = (
                        parent,
                        parent.isEmpty
                            ? staged.root : try? staged.root.directory(parent.split(separator: "/"), create: false)
                    )
                }
                if let info = directory?.opened?.status(name), (info.st_mode & S_IFMT) == S_IFREG {
                    return KnownFile(path: entry.path, stamp: FileStamp(info), chunks: entry.chunks)
                }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(staged: self) }
}

/// A pull's files as the state records them: each one's stamp on disk now, with its chunk
/// list, made one at a time as the state database takes them (no array of every file).
struct WrittenFiles: Sequence, Sendable {
    let manifest: Manifest
    /// Indexes of the file entries in `manifest`.
    let files: SpillArray<Int>
    /// Where the document is.
    let target: String

    struct Iterator: IteratorProtocol {
        let written: WrittenFiles
        var index = 0

        mutating func next() -> KnownFile? {
            while index < written.files.count {
                defer { index += 1 }
                let entry = written.manifest.entries[written.files[index]]
                let path = entry.path.isEmpty ? written.target : written.target + "/" + entry.path
                if let stamp = FileStamp.of(path) {
                    return KnownFile(path: entry.path, stamp: stamp, chunks: entry.chunks)
                }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(written: self) }
}
