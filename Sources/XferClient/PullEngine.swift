import CXferShims
import Foundation
import XferCore
import XferProtocol

/// What a pull did (`xfer pull --json` prints it).
public struct PullReport: Codable, Sendable {
    /// The document's path.
    public var document: String
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
    /// Refuse (with `conflict`) to replace a destination whose files changed since this root
    /// last synced them, checked again just before the new version is put in place. The sync
    /// engine sets it: a local edit is never overwritten.
    public var protectLocalChanges = false

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
    struct Target: Sendable {
        var file: Int
        var offset: Int64
    }

    struct Counters: Sendable {
        var bytesDone: Int64 = 0
        var chunksFetched = 0
        var bytesFetched: Int64 = 0
        var chunksReused = 0
    }

    /// Pulls document `name` into `destination`.
    /// - Returns: What was done.
    /// - Throws: `not_found` (no such document, or deleted), `unavailable`, `unauthorized`,
    ///   `corrupt_chunk` (a chunk failed verification; nothing is published), `io`.
    /// - Parameters:
    ///   - name: The document.
    ///   - destination: Where it goes (a file or a directory for a package).
    ///   - version: A version to pull instead of the current one (a superseded or conflict one).
    ///   - state: The destination's state, if the caller keeps it (the sync engine does).
    ///   - progress: Called now and then from any thread.
    public func pull(_ name: DocumentPath, into destination: String, version: Int64? = nil, state: ClientState? = nil,
                     progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws -> PullReport {
        let started = ContinuousClock.now
        let connection = remote.connection
        let info = try await connection.stat(container: remote.container, path: name, version: version)
        guard [.current, .superseded, .conflict].contains(info.state), version != nil || info.state == .current else {
            throw XferError(.notFound, info.state == .deleted ? "\(name) was deleted (version \(info.version))"
                                                              : "\(name) has no committed version yet (an upload is in progress)")
        }
        let target = ClientState.absolute(destination)
        let state = try state ?? ClientState(root: target, stateDirectory: remote.stateDirectory)
        let synced = try state.document(server: connection.server, container: remote.container, path: name)

        let known = try state.files()
        func fullPath(_ relative: String) -> String { relative.isEmpty ? target : target + "/" + relative }

        // Already there? Same version and every file untouched since it was written.
        if let synced, synced.version == info.version, synced.manifest.entries.allSatisfy({ entry in
            entry.kind != .file || known[entry.path].map { FileStamp.of(fullPath(entry.path)) == $0.stamp } == true
        }) {
            return report(name, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
        }

        let answer = try await connection.manifest(container: remote.container, path: name, version: info.version, base: synced?.version)
        let manifest = try Manifest(applying: answer.delta, to: answer.base != nil ? synced?.manifest : nil)
        guard manifest.digest == answer.digest else {
            throw XferError(.invalidManifest, "the manifest of \(name) version \(answer.version) does not match its digest")
        }

        // Local sources: files this root (and every root sharing its state database) synced
        // that are unchanged since; a document renamed elsewhere arrives without downloading.
        var sources: [ChunkID: (path: String, offset: Int64, length: Int)] = [:]
        for (path, file) in try state.sources() {
            var offset: Int64 = 0
            for chunk in file.chunks {
                if sources[chunk.id] == nil { sources[chunk.id] = (path, offset, chunk.length) }
                offset += Int64(chunk.length)
            }
        }

        let parent = (target as NSString).deletingLastPathComponent
        let baseName = (target as NSString).lastPathComponent
        let staging = "\(parent)/.\(baseName).xfer-\(answer.version).partial"
        do {
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        } catch {
            throw XferError(.io, "cannot create the directory \(parent)", cause: DescribedError(error))
        }
        try Self.removeStaleStaging(parent: parent, baseName: baseName, keep: staging)
        let resuming = access(staging, F_OK) == 0

        // Lay out the staging copy: directories, symlinks, files at their final size.
        var files: [(entry: Manifest.Entry, path: String, fd: Int32)] = []
        defer { for file in files where file.fd >= 0 { close(file.fd) } }
        if manifest.kind == .package {
            if !resuming { try Self.check(mkdir(staging, 0o755), "create", staging) }
        }
        for entry in manifest.entries {
            let path = manifest.kind == .package ? staging + "/" + entry.path : staging
            switch entry.kind {
            case .directory:
                // A resumed staging copy may hold anything at this path: only a real directory
                // is kept, so nothing below it is ever written through a symlink.
                Self.removeUnless(S_IFDIR, at: path)
                if mkdir(path, 0o755) != 0 && errno != EEXIST { try Self.check(-1, "create", path) }
            case .symlink:
                Self.removeUnless(nil, at: path)
                try Self.check(symlink(entry.symlinkTarget ?? "", path), "create the symlink", path)
            case .file:
                Self.removeUnless(S_IFREG, at: path)
                let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
                try Self.check(fd, "create", path)
                files.append((entry, path, fd))
                try Self.check(ftruncate(fd, off_t(entry.size)), "size", path)
            }
        }

        // Decide where each chunk comes from: the staging copy (a resumed pull), a local file, or the server.
        let counters = Locked(Counters())
        var needed: [ChunkID: [Target]] = [:]
        var order: [(id: ChunkID, length: Int)] = []
        var buffer = [UInt8](repeating: 0, count: manifest.chunker.maximumSize)
        for (index, file) in files.enumerated() {
            var offset: Int64 = 0
            for chunk in file.entry.chunks {
                defer { offset += Int64(chunk.length) }
                if resuming, try Self.readVerified(file.fd, offset: offset, chunk: chunk, into: &buffer) {
                    counters.withLock { $0.chunksReused += 1; $0.bytesDone += Int64(chunk.length) }
                    continue
                }
                if let source = sources[chunk.id] {
                    let fd = open(source.path, O_RDONLY | O_CLOEXEC)
                    if fd >= 0 {
                        defer { close(fd) }
                        if try Self.readVerified(fd, offset: source.offset, chunk: chunk, into: &buffer) {
                            try Self.write(buffer, count: chunk.length, to: file.fd, at: offset, path: file.path)
                            counters.withLock { $0.chunksReused += 1; $0.bytesDone += Int64(chunk.length) }
                            continue
                        }
                    }
                }
                if needed[chunk.id] == nil { order.append((chunk.id, chunk.length)) }
                needed[chunk.id, default: []].append(Target(file: index, offset: offset))
            }
        }

        try await download(order, needed: needed, files: files.map { ($0.path, $0.fd) }, maximumLength: manifest.chunker.maximumSize,
                           total: manifest.totalSize, counters: counters, progress: progress)

        // Metadata, durability, then publish.
        for file in files {
            try Self.check(fchmod(file.fd, Self.safeMode(file.entry.mode)), "set the mode of", file.path)
            try Self.check(fsync(file.fd), "fsync", file.path)
            try Self.setTimes(file.fd, path: nil, mtime: file.entry.mtimeNanoseconds, name: file.path)
        }
        if manifest.kind == .package {
            for entry in manifest.entries.reversed() where entry.kind == .directory {
                let path = staging + "/" + entry.path
                try Self.check(chmod(path, Self.safeMode(entry.mode)), "set the mode of", path)
                try Self.syncDirectory(path)
                try Self.setTimes(-1, path: path, mtime: entry.mtimeNanoseconds, name: path)
            }
            // The package root's own mode and mtime travel in the version's metadata.
            try Self.check(chmod(staging, Self.safeMode(UInt32(truncatingIfNeeded: info.mode))), "set the mode of", staging)
            try Self.syncDirectory(staging)
            try Self.setTimes(-1, path: staging, mtime: info.mtimeNs, name: staging)
        }
        if options.protectLocalChanges {
            try Self.checkUnchanged(target: target, known: known, name: name)
        }
        try Self.publish(staging: staging, target: target, package: manifest.kind == .package)
        try Self.syncDirectory(parent)

        let written = files.compactMap { file -> KnownFile? in
            let final = manifest.kind == .package ? target + "/" + file.entry.path : target
            return FileStamp.of(final).map { KnownFile(path: file.entry.path, stamp: $0, chunks: file.entry.chunks) }
        }
        try state.recordSynced(server: connection.server, container: remote.container, path: name,
                               document: SyncedDocument(version: answer.version, manifest: manifest), files: written)
        return report(name, answer.version, manifest, counters.value, manifestBytes: answer.delta.count, started: started)
    }

    private func report(_ name: DocumentPath, _ version: Int64, _ manifest: Manifest, _ counters: Counters,
                        manifestBytes: Int, started: ContinuousClock.Instant) -> PullReport {
        return PullReport(document: name.value, version: version,
                          files: manifest.fileCount, bytes: manifest.totalSize,
                          chunksFetched: counters.chunksFetched, bytesFetched: counters.bytesFetched,
                          chunksReused: counters.chunksReused, manifestBytes: manifestBytes,
                          seconds: (ContinuousClock.now - started).seconds)
    }

    /// Downloads `order` in batches, several in flight, verifying each chunk and writing it to every target.
    private func download(_ order: [(id: ChunkID, length: Int)], needed: [ChunkID: [Target]], files: [(path: String, fd: Int32)],
                          maximumLength: Int, total: Int64, counters: Locked<Counters>,
                          progress: @escaping @Sendable (TransferProgress) -> Void) async throws {
        var batches: [[ChunkID]] = []
        var current: [ChunkID] = []
        var bytes = 0
        for chunk in order {
            current.append(chunk.id)
            bytes += chunk.length
            if bytes >= options.downloadBatchBytes || current.count >= ProtocolLimits.maximumIDsPerRequest {
                batches.append(current)
                current = []
                bytes = 0
            }
        }
        if !current.isEmpty { batches.append(current) }
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
                    let asked = Set(batch)
                    try await connection.download(batch) { chunk in
                        guard asked.contains(chunk.id), let targets = needed[chunk.id] else {
                            throw XferError(.corruptChunk, "the server sent chunk \(chunk.id), which was not asked for")
                        }
                        let plain = try chunk.decoded(maximumLength: maximumLength)
                        for target in targets {
                            try Self.write(plain, count: plain.count, to: files[target.file].fd, at: target.offset, path: files[target.file].path)
                        }
                        let c = counters.withLock { c in
                            c.chunksFetched += 1
                            c.bytesFetched += Int64(chunk.payload.count)
                            c.bytesDone += Int64(plain.count * targets.count)
                            return c
                        }
                        progress(TransferProgress(bytesDone: c.bytesDone, bytesTotal: total, bytesOnWire: c.bytesFetched))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    // MARK: File system helpers

    /// The permission bits a pulled file or directory gets: setuid and setgid never travel
    /// (a document must not become a privilege on the machine that pulls it); the sticky bit
    /// and rwx bits do.
    static func safeMode(_ mode: UInt32) -> mode_t { mode_t(mode & 0o1777) }

    /// Removes whatever is at `path` unless it is of `kind` (S_IFDIR, S_IFREG); with `nil`,
    /// removes anything. Never follows a symlink.
    private static func removeUnless(_ kind: mode_t?, at path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) != kind else { return }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            unlink(path)
        }
    }

    private static func check(_ result: Int32, _ action: String, _ path: String) throws {
        guard result >= 0 else {
            let err = errno
            throw XferError(.io, "cannot \(action) \(path)", cause: SystemErrno(err))
        }
    }

    /// Reads `chunk.length` bytes at `offset` and reports whether they hash to the chunk's id.
    private static func readVerified(_ fd: Int32, offset: Int64, chunk: Manifest.ChunkReference, into buffer: inout [UInt8]) throws -> Bool {
        // An unreadable source is only a chunk to fetch instead.
        let got = buffer.withUnsafeMutableBytes { raw in
            (try? PositionalIO.read(fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<chunk.length]), at: offset, path: "")) ?? 0
        }
        guard got == chunk.length else { return false }
        return buffer.withUnsafeBytes { ChunkID.of(UnsafeRawBufferPointer(rebasing: $0[0..<chunk.length])) } == chunk.id
    }

    private static func write(_ bytes: [UInt8], count: Int, to fd: Int32, at offset: Int64, path: String) throws {
        try bytes.withUnsafeBytes { raw in
            try PositionalIO.write(fd, UnsafeRawBufferPointer(rebasing: raw[0..<count]), at: offset, path: path)
        }
    }

    private static func setTimes(_ fd: Int32, path: String?, mtime: Int64, name: String) throws {
        let seconds = mtime >= 0 ? mtime / 1_000_000_000 : (mtime - 999_999_999) / 1_000_000_000
        let nanoseconds = mtime - seconds * 1_000_000_000
        let stamp = timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
        var times = [stamp, stamp]
        let result = times.withUnsafeMutableBufferPointer { pointer in
            if let path { return utimensat(AT_FDCWD, path, pointer.baseAddress, AT_SYMLINK_NOFOLLOW) }
            return futimens(fd, pointer.baseAddress)
        }
        try check(result, "set the modification time of", name)
    }

    private static func syncDirectory(_ path: String) throws {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try check(fd, "open", path)
        defer { close(fd) }
        try check(fsync(fd), "fsync", path)
    }

    /// Throws `conflict` if the destination holds anything this root did not sync as it is.
    private static func checkUnchanged(target: String, known: [String: KnownFile], name: DocumentPath) throws {
        var info = stat()
        guard lstat(target, &info) == 0 else { return }
        let changed: Bool
        if (info.st_mode & S_IFMT) == S_IFDIR {
            let files = (try? DirectoryWalker.walk(target).filter { $0.kind == .file }) ?? []
            changed = files.count != known.count || files.contains { entry in
                known[entry.relativePath].map { FileStamp.of(target + "/" + entry.relativePath) != $0.stamp } ?? true
            }
        } else {
            changed = known[""].map { FileStamp.of(target) != $0.stamp } ?? ((info.st_mode & S_IFMT) == S_IFREG)
        }
        if changed {
            throw XferError(.conflict, "\(target) changed on this device since it was last synced; it was not replaced by the server's \(name)")
        }
    }

    /// Puts the staging copy in place in one step.
    private static func publish(staging: String, target: String, package: Bool) throws {
        var info = stat()
        let exists = lstat(target, &info) == 0
        let targetIsDirectory = exists && (info.st_mode & S_IFMT) == S_IFDIR
        if !package {
            guard !targetIsDirectory else {
                throw XferError(.io, "\(target) is a directory; the document is a file. Pull into another path, or remove it")
            }
            try check(rename(staging, target), "rename into place", target)
            return
        }
        guard exists else {
            try check(rename(staging, target), "rename into place", target)
            return
        }
        guard targetIsDirectory else {
            throw XferError(.io, "\(target) is a file; the document is a package (a directory). Pull into another path, or remove it")
        }
        if cxfer_exchange_paths(staging, target) == 0 {
            // staging now holds the old tree.
            try removeTree(staging)
            return
        }
        // No RENAME_EXCHANGE on this file system: move the old tree aside, then the new one in.
        let aside = staging + ".old"
        try check(rename(target, aside), "move aside", target)
        try check(rename(staging, target), "rename into place", target)
        try removeTree(aside)
    }

    private static func removeStaleStaging(parent: String, baseName: String, keep: String) throws {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: parent) else { return }
        let prefix = ".\(baseName).xfer-"
        for name in names where name.hasPrefix(prefix) && (name.hasSuffix(".partial") || name.hasSuffix(".partial.old")) {
            let path = parent + "/" + name
            if path != keep { try removeTree(path) }
        }
    }

    private static func removeTree(_ path: String) throws {
        do {
            try FileManager.default.removeItem(atPath: path)
        } catch {
            throw XferError(.io, "cannot remove \(path)", cause: DescribedError(error))
        }
    }
}
