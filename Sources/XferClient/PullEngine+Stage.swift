import Foundation
import XferCore
import XferProtocol

// The executor of a pull's plan (``PullPlanner/Plan``): lays out the staging copy, fills it
// from disk, finishes its files and directories, checks the destination again and puts the copy
// in place. Each step does what the plan names; the decisions are the planner's.
extension PullEngine {
    /// Lays out the staging copy as `plan` says: directories, symlinks, files at their final
    /// size (or, in a new package copy, to be created by their first chunk's write).
    /// - Returns: The copy, its files ready to be written.
    func layOut(_ plan: PullPlanner.Plan, _ manifest: Manifest, in area: ConfinedDirectory) throws -> StagingCopy {
        var tree: ConfinedDirectory? = nil
        if plan.package {
            // A resumed staging copy may hold anything: only a real directory is kept.
            try area.remove(plan.stagingName, unless: S_IFDIR)
            try area.makeDirectory(plan.stagingName)
            tree = try area.directory([plan.stagingName], create: false)
        }
        var links: [(entry: Manifest.Entry, directory: ConfinedDirectory, name: String)] = []
        var lastDirectory: (path: Substring, directory: ConfinedDirectory)? = nil
        for entry in manifest.entries {
            let directory: ConfinedDirectory
            let leaf: String
            if let tree {
                let (parentPath, name) = PullPlanner.split(entry.path)
                leaf = String(name)
                if let last = lastDirectory, last.path == parentPath {
                    directory = last.directory
                } else {
                    directory = try tree.directory(parentPath.split(separator: "/"), create: false)
                    lastDirectory = (parentPath, directory)
                }
            } else {
                directory = area
                leaf = plan.stagingName
            }
            try Self.make(plan.step(for: entry), of: entry, as: leaf, in: directory)
            if entry.kind == .symlink { links.append((entry, directory, leaf)) }
        }
        let files = stagingFiles(plan, manifest, in: area, tree: tree)
        let early =
            plan.durability.wholeFileSystem
            ? tree.flatMap { EarlyWriteback($0, threshold: Self.earlyWritebackEvery) } : nil
        return StagingCopy(area: area, name: plan.stagingName, tree: tree, links: links, files: files, early: early)
    }

    /// Makes `entry` in `directory` under `leaf` as `step` says.
    static func make(
        _ step: PullPlanner.Step, of entry: Manifest.Entry, as leaf: String, in directory: ConfinedDirectory
    )
        throws
    {
        switch step {
        case .directory(let clear):
            if clear { try directory.remove(leaf, unless: S_IFDIR) }
            try directory.makeDirectory(leaf)
        case .symlink(let clear):
            if clear { try directory.remove(leaf) }
            try directory.makeSymlink(leaf, target: entry.symlinkTarget ?? "")
        case .createdByFirstWrite(let empty):
            // Created by its first chunk's write; an empty file has none, so it is made here.
            if empty { close(try directory.openFile(leaf, flags: O_RDWR | O_CREAT | O_EXCL)) }
        case .sized(let size):
            try directory.remove(leaf, unless: S_IFREG)
            // Created at its final size and closed: StagingFiles opens it again to write.
            let fd = try directory.openFile(leaf, flags: O_RDWR | O_CREAT)
            defer { close(fd) }
            try Syscall.ftruncate(fd, to: Int64(size), path: directory.describe(leaf))
        }
    }

    /// The staging copy's files, each opened as it is written. After its last chunk a file's
    /// writeback starts, and one with no fsync of its own to come is finished then too
    /// (``PullPlanner/Durability``).
    private func stagingFiles(
        _ plan: PullPlanner.Plan, _ manifest: Manifest, in area: ConfinedDirectory, tree: ConfinedDirectory?
    ) -> StagingFiles {
        let entries = manifest.entries
        let files = plan.files
        let durability = plan.durability
        let stagingName = plan.stagingName
        let stagingPath = area.describe(stagingName)
        let inPackage = tree != nil
        return StagingFiles(
            root: tree ?? area, prefix: inPackage ? stagingPath : area.path, count: files.count,
            path: { inPackage ? entries.path(at: files[$0]) : stagingName },
            writes: files.map { entries.chunks(at: $0).count },
            creating: plan.creating(entries)
        ) { index, fd in
            let entry = entries[files[index]]
            if durability.startsWriteback(size: entry.size) { Syscall.startWriteback(fd) }
            guard durability.finishesOnLastWrite(mode: entry.mode) else { return false }
            try Self.finish(fd, entry, path: "\(stagingPath)/\(entry.path)", durable: false)
            return true
        }
    }

    /// Puts in place every chunk a source on disk or the batch yields, trying each place's
    /// sources in the order `plan.sourcing` gives (the staging copy of a resumed pull, a local
    /// file, the batch's prefetched chunks); a disk source's bytes are verified first.
    /// - Returns: What is left to download: the places no step has, and those whose every source fell through.
    func fillFromDisk(
        _ plan: inout PullPlanner.Plan, _ copy: StagingCopy, manifest: Manifest, prefetched: Prefetched?,
        counters: Locked<Counters>
    ) throws -> ChunkSourcing.Downloads {
        let handles = copy.files
        var buffer = [UInt8](repeating: 0, count: manifest.chunker.maximumSize)
        var failed: [Int] = []
        for (index, step) in plan.sourcing.steps.enumerated() {
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
            try handles.wrote(step.file, bytes: step.chunk.length)
            // (A resumed pull's chunks in the staging copy were written before.)
            if source != .staging { copy.early?.wrote(step.chunk.length) }
            // A chunk from disk was reused; one the batch fetched was downloaded all the same.
            counters.withLock {
                if source != .prefetched { $0.chunksReused += 1 }
                $0.bytesDone += Int64(step.chunk.length)
            }
        }
        let order = plan.sourcing.downloads(failed: failed)
        plan.sourcing.steps = []  // the downloads hold what is left to do
        return order
    }

    /// What the downloads are asked against. A changed chunk comes against the one at its place
    /// in this client's version, where the cache or the file on disk still has it (any file
    /// size: the old file is still here). Only the files with chunks to download are looked up.
    func pullAgainst(
        _ order: ChunkSourcing.Downloads, plan: PullPlanner.Plan, manifest: Manifest, job: Job,
        sources: [ChunkID: ChunkSources.Location], offers: Bool
    ) -> PullAgainst {
        var previous = PreviousChunks(sizeLimit: .max)
        var against = PullAgainst(
            cache: ChunkCache(database: job.state.database, maximumBytes: options.cacheBytes), sources: sources,
            offers: offers, codec: remote.codec)
        // A file's path and size are read once for its run of places (a large file's entry is
        // tens of thousands of chunks: read whole per place, it made a 1 GiB restore quadratic).
        var current: (file: Int, path: String, size: Int64)? = nil
        for download in order {
            for target in download.targets {
                if current?.file != target.file {
                    let index = plan.files[target.file]
                    current = (target.file, manifest.entries.path(at: index), manifest.entries.size(at: index))
                    if let synced = job.synced, let path = current?.path {
                        previous.add(fullPath: path, relativePath: path, previous: synced.manifest)
                    }
                }
                guard let file = current else { continue }
                against.add(download.chunk, at: target.offset, in: file.path, size: file.size, previous: previous)
            }
        }
        return against
    }

    /// Finishes the staging copy's files once every chunk is written: the files the package's
    /// ignore rules leave out carried over from the old tree, every file not finished by its
    /// last chunk given its mode and time (fsynced, unless one syncfs makes the copy durable),
    /// and the symlinks their times.
    func finishFiles(_ copy: StagingCopy, _ plan: PullPlanner.Plan, _ manifest: Manifest, job: Job) async throws {
        // Files the package's ignore rules leave out (never on any server) go on in the new
        // tree; before the directories' times are set, so those stay the version's.
        if let tree = copy.tree,
            plan.carriesIgnoredFiles(destinationIsDirectory: job.parent.kind(job.baseName) == S_IFDIR)
        {
            try Self.carryIgnoredFiles(
                from: job.parent.directory([job.baseName], create: false), at: job.target, to: tree,
                manifest: manifest)
        }
        // The fsyncs run several at once (each mostly waits on writeback that started as its
        // file's last chunk was written). Files finished by their last chunk (StagingFiles'
        // whenWritten) are done already.
        let handles = copy.files
        let placed = plan.files
        let durable = !plan.durability.wholeFileSystem
        let unfinished = placed.indices.filter { !handles.isFinished($0) }
        try await concurrentForEach(unfinished, width: Self.fsyncsInFlight) { index in
            let entry = manifest.entries[placed[index]]
            try handles.with(index) { fd in
                try Self.finish(fd, entry, path: handles.path(index), durable: durable)
            }
            handles.close(index)
        }
        // A symlink keeps its version's mtime too, or the next scan takes it for a local edit.
        for link in copy.links {
            try link.directory.setModificationTime(link.entry.mtimeNanoseconds, of: link.name)
        }
    }

    /// Makes the finished staging copy durable and puts it in place: a package's directories
    /// given their modes and times (fsynced, or one syncfs of the whole copy), the destination
    /// checked again as the plan says, then one rename or exchange, and the version recorded.
    func putInPlace(
        _ copy: StagingCopy, _ plan: PullPlanner.Plan, _ manifest: Manifest, info: DocumentInfo,
        answer: ManifestAnswer, job: Job
    ) async throws {
        // A package's files are finished: their rows go into the state (held aside until the
        // version is published) while the disk makes the staging copy durable, with the stamps
        // they have there, which renaming the copy into place does not change.
        let stagedFiles = copy.tree.map { ManifestFiles(staged: manifest, files: plan.files, root: $0) }
        async let staged = Self.stageRows(job.state, stagedFiles)
        if let tree = copy.tree {
            try Self.finishDirectories(
                tree, manifest, info: info, wholeFileSystem: plan.durability.wholeFileSystem, early: copy.early,
                path: copy.path)
        }
        try Self.recheck(plan.recheck, manifest, job: job, codec: remote.codec)
        // The staged files' rows are taken before the copy moves (their paths are the staging copy's).
        let rowsStaged = try await staged
        try Self.publish(
            copy.name, from: copy.area, as: job.baseName, in: job.parent, package: plan.package,
            keep: job.trash.map { trash in
                { directory, kept, hardLink in
                    try trash.keep(
                        kept, in: directory, path: job.document, reason: "replaced by version \(answer.version)",
                        hardLink: hardLink, as: job.baseName)
                }
            })
        try job.parent.synchronize()

        let synced = SyncedDocument(
            version: answer.version, manifest: manifest,
            serverDigest: remote.endToEnd == nil ? nil : answer.digest.hex)
        let server = remote.connection.server
        if rowsStaged {
            try job.state.recordStagedSynced(
                server: server, container: remote.container, path: job.document, document: synced)
        } else {
            let written = ManifestFiles(written: manifest, files: plan.files, target: job.target)
            try job.state.recordSynced(
                server: server, container: remote.container, path: job.document, document: synced, files: written)
        }
    }

    /// Gives a package's staging copy its directories' modes and times, deepest first, and
    /// makes it durable: an fsync per directory, or one syncfs of its file system for the copy
    /// whole (``PullPlanner/Durability``).
    static func finishDirectories(
        _ tree: ConfinedDirectory, _ manifest: Manifest, info: DocumentInfo, wholeFileSystem: Bool,
        early: EarlyWriteback?, path: String
    ) throws {
        for entry in manifest.entries.reversed() where entry.kind == .directory {
            let directory = try tree.directory(entry.path.split(separator: "/"), create: false)
            try directory.setMode(safeMode(entry.mode))
            if !wholeFileSystem { try directory.synchronize() }
            try directory.setModificationTime(entry.mtimeNanoseconds)
        }
        // The package root's own mode and mtime travel in the version's metadata.
        try tree.setMode(safeMode(UInt32(truncatingIfNeeded: info.mode)))
        if wholeFileSystem {
            try tree.setModificationTime(info.mtimeNs)
            try tree.synchronizeFileSystem()  // every staged file and directory, at once
            // An error only an early writeback met (one of the file system's own) fails the pull too.
            if let failure = early?.failure { throw XferError.writing(failure, "syncfs", path) }
        } else {
            try tree.synchronize()
            try tree.setModificationTime(info.mtimeNs)
        }
    }

    /// Checks the destination just before the copy is put in place, as `recheck` says.
    /// - Throws: `conflict` if it changed on this device during the pull: it is not replaced.
    static func recheck(_ recheck: PullPlanner.Recheck, _ manifest: Manifest, job: Job, codec: ChunkCodec) throws {
        switch recheck {
        case .none:
            return
        case .stillHoldsVersion:
            guard try holds(job.target, manifest, codec: codec) else {
                throw XferError(
                    .conflict,
                    "\(job.target) changed on this device during the pull; it was not replaced by the server's \(job.document) (pass --force to replace it)"
                )
            }
        case .unchangedSinceSynced:
            try checkUnchanged(target: job.target, known: job.known, name: job.document)
        }
    }

    /// Holds a staged package's file rows aside in `state` (``ClientState/stageSynced(files:)``).
    /// - Returns: Whether it did (`files` is `nil` for a file document, whose stamp is taken
    ///   once it is in place: renaming a file changes its ctime).
    static func stageRows(_ state: ClientState, _ files: ManifestFiles?) throws -> Bool {
        guard let files else { return false }
        try state.stageSynced(files: files)
        return true
    }

    /// Gives a staged file its version's mode and modification time, fsynced between the two
    /// when `durable` (else a syncfs of the whole staging copy makes it durable later).
    static func finish(_ fd: Int32, _ entry: Manifest.Entry, path: String, durable: Bool) throws {
        try Syscall.fchmod(fd, safeMode(entry.mode), path: path)
        if durable { try Syscall.fsync(fd, path: path) }
        try Syscall.setTimes(fd, nil, to: ConfinedDirectory.timeSpec(entry.mtimeNanoseconds), path: path)
    }
}
