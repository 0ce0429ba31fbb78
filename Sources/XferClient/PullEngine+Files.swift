import Foundation
import XferCore
import XferProtocol

// The file-system side of a pull: verified reads and writes, the checks before replacing
// anything, and putting the staging copy in place. Every write goes through a ConfinedDirectory.
extension PullEngine {
    /// The permission bits a pulled file or directory gets: setuid and setgid never travel
    /// (a document must not become a privilege on the machine that pulls it); the sticky bit
    /// and rwx bits do.
    static func safeMode(_ mode: UInt32) -> mode_t { mode_t(mode & 0o1777) }

    /// Reads `chunk.length` bytes at `offset` and reports whether they give the chunk's id
    /// (under `codec`: a keyed one in an end-to-end encrypted container).
    static func readVerified(
        _ fd: Int32, offset: Int64, chunk: Manifest.ChunkReference, codec: ChunkCodec = .plain,
        into buffer: inout [UInt8]
    ) throws -> Bool {
        // An unreadable source is only a chunk to fetch instead.
        let got = buffer.withUnsafeMutableBytes { raw in
            (try? Syscall.pread(
                fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<chunk.length]), at: offset, path: "")) ?? 0
        }
        guard got == chunk.length else { return false }
        return buffer.withUnsafeBytes { codec.id(of: UnsafeRawBufferPointer(rebasing: $0[0..<chunk.length])) }
            == chunk.id
    }

    /// Puts `step`'s chunk in place from `source` (the staging copy already holds it there; a
    /// disk source's bytes are verified against the chunk's id first).
    /// - Returns: Whether the source yielded it.
    static func fill(
        _ step: ChunkSourcing.Step, from source: ChunkSourcing.Source, into fd: Int32, path: String,
        prefetched: Prefetched?, codec: ChunkCodec = .plain, buffer: inout [UInt8]
    ) throws -> Bool {
        switch source {
        case .staging:
            return try readVerified(fd, offset: step.offset, chunk: step.chunk, codec: codec, into: &buffer)
        case .local(let sourcePath, let offset):
            let sourceFD = open(sourcePath, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            guard sourceFD >= 0 else { return false }
            defer { close(sourceFD) }
            guard try readVerified(sourceFD, offset: offset, chunk: step.chunk, codec: codec, into: &buffer) else {
                return false
            }
            try write(buffer, count: step.chunk.length, to: fd, at: step.offset, path: path)
            return true
        case .prefetched:
            guard let plain = prefetched?.chunks[step.chunk.id], plain.count == step.chunk.length else { return false }
            try write(plain, count: plain.count, to: fd, at: step.offset, path: path)
            return true
        }
    }

    static func write(_ bytes: [UInt8], count: Int, to fd: Int32, at offset: Int64, path: String) throws {
        try bytes.withUnsafeBytes { raw in
            try Syscall.pwrite(
                fd, UnsafeRawBufferPointer(rebasing: raw[0..<count]), at: offset, path: path,
                whenFull: "free some disk space and retry (what arrived is kept)")
        }
    }

    /// Puts a directory document in place: a directory already there is kept with all it
    /// holds (only its rwx bits become the version's, the owner's always set), and a missing one is made. A file or
    /// symlink in the way is replaced only when the pull may replace it (`refusal` is `nil`:
    /// this client's own unchanged copy), and goes to `keep` first when given.
    /// - Parameter mode: The version's mode; `nil` for none (an end-to-end encrypted
    ///   container's directory): one already there keeps its own, a new one gets this
    ///   device's default (0777 less the umask).
    /// - Returns: The directory's mode bits as it is now.
    @discardableResult
    static func makeDirectory(
        _ name: String, in parent: ConfinedDirectory, _ mode: UInt32?, replacing refusal: XferError?,
        trash keep: ((String) throws -> Void)?
    ) throws -> UInt32 {
        let created = mode_t(mode.map(LocalSnapshot.directoryMode) ?? 0o777)
        switch parent.kind(name) {
        case S_IFDIR?:
            break
        case nil:
            try parent.makeDirectory(name, mode: created)
        default:
            if let refusal { throw refusal }
            if let keep { try keep(name) } else { try parent.remove(name) }
            try parent.makeDirectory(name, mode: created)
        }
        let directory = try parent.directory([name], create: false)
        let current = try directory.mode()
        guard let mode = mode.map(LocalSnapshot.directoryMode) else {
            try parent.synchronize()
            return LocalSnapshot.directoryMode(current)
        }
        // Special bits (setgid inherited from a parent, sticky) are this machine's own.
        let wanted = (current & ~0o777) | mode
        if current != wanted { try directory.setMode(mode_t(wanted)) }
        try parent.synchronize()
        return mode
    }

    /// Hard-links into the staging copy every entry of the old tree at `target` that its
    /// ignore rules leave out (built-in defaults, its `.xferignore` files) and that the new
    /// version does not have: they were never pushed, so nowhere else holds them. The old tree
    /// keeps them too until it is replaced (and then in the trash, when there is one).
    static func carryIgnoredFiles(
        from old: ConfinedDirectory, at target: String, to staging: ConfinedDirectory,
        manifest: Manifest
    ) throws {
        let synced = Set(try IgnoreRules.walk(target).map(\.relativePath))
        let arriving = Set(manifest.entries.map(\.path))
        for entry in try DirectoryWalker.walk(target)
        where !entry.relativePath.isEmpty
            && !synced.contains(entry.relativePath) && !arriving.contains(entry.relativePath)
        {
            let components = entry.relativePath.split(separator: "/")
            let name = String(components.last!)
            let destination = try staging.directory(components.dropLast(), create: true)
            guard destination.kind(name) == nil else { continue }
            switch entry.kind {
            case .directory:
                try destination.makeDirectory(name, mode: safeMode(entry.mode))
            case .symlink:
                try destination.makeSymlink(name, target: entry.symlinkTarget ?? "")
            case .file:
                try old.directory(components.dropLast(), create: false).link(name, to: destination, as: name)
            }
        }
    }

    /// Whether `target` holds exactly the files of `manifest` (what the package's ignore rules
    /// leave out aside), read and chunked as that version was (cut and named by `codec`, the
    /// container's): only asked when its stamps say something changed.
    static func holds(_ target: String, _ manifest: Manifest, codec: ChunkCodec) throws -> Bool {
        let tree: [TreeEntry]
        do {
            tree =
                manifest.kind == .package
                ? Array(try IgnoreRules.walk(target)) : [try DirectoryWalker.entry(at: target)]
        } catch {
            return false
        }
        let files = tree.filter { $0.kind == .file }
        let expected = manifest.entries.filter { $0.kind == .file }
        guard files.map(\.relativePath) == expected.map(\.path), zip(files, expected).allSatisfy({ $0.size == $1.size })
        else { return false }
        let lists = Locked([[ChunkID]](repeating: [], count: files.count))
        var options = ChunkPipeline.Options()
        options.chunker = manifest.chunker
        options.codec = codec
        do {
            try ChunkPipeline(options: options).run(
                files.map { .file($0.relativePath.isEmpty ? target : target + "/" + $0.relativePath) }
            ) { event in
                if case .chunk(let file, let record) = event { lists.withLock { $0[file].append(record.id) } }
            }
        } catch {
            return false
        }
        return lists.value == expected.map { $0.chunks.map(\.id) }
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

    /// Throws `conflict` if the destination holds anything this root did not sync as it is.
    static func checkUnchanged(target: String, known: [String: KnownFile], name: DocumentPath) throws {
        var info = stat()
        guard lstat(target, &info) == 0 else { return }
        let changed: Bool
        if (info.st_mode & S_IFMT) == S_IFDIR {
            // What the package's ignore rules leave out is not part of any version: it is kept, not compared.
            let files = (try? IgnoreRules.walk(target).filter { $0.kind == .file }) ?? []
            changed =
                files.count != known.count
                || files.contains { entry in
                    known[entry.relativePath].map { FileStamp.of(target + "/" + entry.relativePath) != $0.stamp }
                        ?? true
                }
        } else {
            changed = known[""].map { FileStamp.of(target) != $0.stamp } ?? ((info.st_mode & S_IFMT) == S_IFREG)
        }
        if changed {
            throw XferError(
                .conflict,
                "\(target) changed on this device since it was last synced; it was not replaced by the server's \(name) (pass --force to replace it)"
            )
        }
    }

    /// Puts the staging copy (`staging` in `area`) in place in one step. `keep`, when given,
    /// receives what is replaced first (its directory and name, and whether to keep a hard link
    /// and leave it in place).
    static func publish(
        _ staging: String, from area: ConfinedDirectory, as name: String, in parent: ConfinedDirectory,
        package: Bool, keep: ((ConfinedDirectory, String, Bool) throws -> Void)? = nil
    ) throws {
        let existing = parent.kind(name)
        let target = parent.describe(name)
        if !package {
            // An empty directory holds nothing to lose (a directory document whose place a
            // file took elsewhere); one that holds anything stays.
            guard try existing != S_IFDIR || parent.removeEmptyDirectory(name) else {
                throw XferError(
                    .io,
                    "\(target) is a directory that is not empty; the document is a file. Pull into another path, or empty it"
                )
            }
            // A replaced file is kept as a hard link (readers still see the old file or the new
            // one); a replaced symlink is moved aside.
            if let keep, let existing { try keep(parent, name, existing == S_IFREG) }
            try area.rename(staging, to: parent, as: name)
            return
        }
        guard let existing else {
            try area.rename(staging, to: parent, as: name)
            return
        }
        guard existing == S_IFDIR else {
            throw XferError(
                .io,
                "\(target) is a file; the document is a package (a directory). Pull into another path, or remove it")
        }
        if try area.exchange(staging, with: parent, name) {
            // staging now holds the old tree.
            if let keep { try keep(area, staging, false) } else { try area.remove(staging) }
            return
        }
        // No RENAME_EXCHANGE on this file system: move the old tree aside, then the new one in.
        let aside = staging + ".old"
        try parent.rename(name, to: area, as: aside)
        try area.rename(staging, to: parent, as: name)
        if let keep { try keep(area, aside, false) } else { try area.remove(aside) }
    }

    /// The name a document's staging copies start with in a staging area: a digest of its
    /// path (any path fits in one name, and two documents never share one).
    static func stagingKey(_ name: DocumentPath) -> String {
        String(ChunkID.of(Array(name.value.utf8)).hex.prefix(32))
    }

    /// Removes this document's staging copies of other versions (`prefix` names them).
    static func removeStaleStaging(in area: ConfinedDirectory, prefix: String, keep: String) throws {
        guard let names = try? area.names() else { return }
        for name in names
        where name.hasPrefix(prefix) && (name.hasSuffix(".partial") || name.hasSuffix(".partial.old")) && name != keep {
            try area.remove(name)
        }
    }
}
