import CFuse3
import Foundation
import Glibc
import XferClient
import XferCore
import XferProtocol

/// Writes: a file opened for writing gets a staging copy (``StagedFiles``, its current bytes
/// fetched first unless it is truncated), every handle of it writes there, and when the last
/// one closes it is due for upload (``Uploads``) as a version based on the one it was edited
/// from. Removing, renaming and making directories and symlinks ask the server at once, with
/// the version they were decided from, so a stale view is refused rather than obeyed.
/// Inside a package, each goes to the package's staging directory (MountFileSystem+Packages).
extension MountFileSystem {
    /// Where a name under `parent` lives as a document (or in a package), or `nil` with
    /// `request` failed with the errno that refuses writing there (not a directory, not a valid name).
    func documentPath(_ parent: UInt64, _ name: String, or request: FuseRequest) -> String? {
        let (node, base) = tree.withLock { tree in (tree[parent], tree.path(of: parent)) }
        let path = base.isEmpty ? name : base + "/" + name
        let refusal: Int32? =
            node?.kind != .directory ? ENOTDIR : (try? DocumentPath(path)) == nil ? EINVAL : nil
        guard let refusal else { return path }
        request.fail(refusal)
        return nil
    }

    /// Opens `node` (a file at `path`) for writing: its staging file, filled with its current
    /// bytes when it is made (unless `truncate`).
    func openForWriting(_ request: FuseRequest, _ number: UInt64, _ node: MountTree.Node, info: fuse_file_info) {
        guard let staged else { return request.fail(EROFS) }
        let path = tree.value.path(of: number)
        let truncate = info.flags & O_TRUNC != 0
        if let package = tree.withLock({ $0.package(containing: number) }) {
            return openInPackage(request, package: package, path: path, truncate: truncate, create: nil, info: info)
        }
        Task {
            do {
                let fd = try await stage(path, node, truncate: truncate, staged: staged)
                request.opened(opening(fd, path: path, writer: true, dirty: truncate), info, keepCache: true)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// The staging file of `path` open for writing, made and filled with `node`'s bytes if new,
    /// and the tree showing it as staged. The caller is counted among `path`'s writers from
    /// before the file is opened (so no upload settles it meanwhile) until it closes the
    /// descriptor: through a handle (``opening(_:path:writer:dirty:)``), or ``endWriting(_:)``.
    func stage(_ path: String, _ node: MountTree.Node, truncate: Bool, staged: StagedFiles) async throws -> Int32 {
        handles.withLock { $0.writers[path, default: 0] += 1 }
        let fd: Int32
        let made: Bool
        do {
            (fd, made) = try staged.open(path)
        } catch {
            endWriting(path)
            throw error
        }
        // A staging file is the file's bytes if this mount staged it, a record says it was closed,
        // or another writer has it; any other (a crash in the middle of filling it) is no one's.
        let trusted =
            !made
            && (node.isStaged || staged.record(path) != nil || (handles.value.writers[path] ?? 0) > 1)
        let fresh = made || !trusted
        do {
            if !made, !trusted { ftruncate(fd, 0) }
            if fresh, !truncate, case .document(let info) = node.origin { try await fill(fd, from: info) }
            if truncate { ftruncate(fd, 0) }
            fchmod(fd, mode_t(node.mode & 0o7777))
            let size = Int64(lseek(fd, 0, SEEK_END))
            let invalidations = tree.withLock {
                $0.stage(path, mode: node.mode, size: size, mtimeNanoseconds: Syscall.wallClockNanoseconds())
                    .invalidations
            }
            notify(invalidations)
            return fd
        } catch {
            close(fd)
            if fresh { staged.discard(path) }
            endWriting(path)
            throw error
        }
    }

    /// A writer that held `path`'s staging file without a handle is done with it.
    func endWriting(_ path: String) {
        handles.withLock { handles in
            handles.writers[path, default: 1] -= 1
            if handles.writers[path] == 0 { handles.writers[path] = nil }
        }
    }

    /// Writes a document's current bytes into a new staging file.
    func fill(_ fd: Int32, from info: DocumentInfo) async throws {
        let manifest = try await manifests.manifest(of: info)
        guard let entry = manifest.entries.first, entry.kind == .file else { return }
        try await fill(fd, entry.chunks)
    }

    /// Writes the bytes of `chunks` (verified) into a new file, 8 MiB at a time.
    func fill(_ fd: Int32, _ chunks: [Manifest.ChunkReference]) async throws {
        var offset: Int64 = 0
        var start = 0
        while start < chunks.count {
            var end = start
            var bytes = 0
            while end < chunks.count, bytes < 8 << 20 {
                bytes += chunks[end].length
                end += 1
            }
            let plains = try await supply.plain(Array(chunks[start..<end]))
            try RawBuffers.with(plains) { try Syscall.pwrite(fd, $0, at: offset, path: "a staging file") }
            offset += Int64(bytes)
            start = end
        }
    }

    func create(_ request: FuseRequest, parent: UInt64, name: String, mode: UInt32, info: fuse_file_info) {
        guard let staged else { return request.fail(EROFS) }
        guard let path = documentPath(parent, name, or: request) else { return }
        if let package = tree.withLock({ $0.package(containing: parent) }) {
            return openInPackage(
                request, package: package, path: path, truncate: true, create: mode & 0o7777, info: info)
        }
        let existing = tree.withLock { $0.lookup(parent, name) }
        let node =
            existing?.node
            ?? MountTree.Node(
                name: name, parent: parent, kind: .file, mode: mode & 0o7777, size: 0,
                mtimeNanoseconds: Syscall.wallClockNanoseconds(),
                origin: .staged(base: nil))
        Task {
            do {
                let fd = try await stage(path, node, truncate: true, staged: staged)
                let handle = opening(fd, path: path, writer: true, dirty: true)
                guard let number = tree.withLock({ $0.number(of: path) }), let shown = tree.value[number] else {
                    return failIO(request, "a created file that does not show")
                }
                request.created(number, attributes(number, shown), timeout: Self.timeout, handle: handle, info)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    func write(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, bytes: UnsafeRawBufferPointer) {
        guard
            let fd = handles.withLock({ handles -> Int32? in
                guard let file = handles.files[handle], let path = file.path, file.writer else { return nil }
                handles.dirty.insert(path)
                return file.staged
            })
        else { return request.fail(EBADF) }
        do {
            try Syscall.pwrite(fd, bytes, at: offset, path: "a staging file")
        } catch {
            return failIO(request, "a write to a staging file")
        }
        tree.withLock { $0.grow(inode, to: offset + Int64(bytes.count), at: Syscall.wallClockNanoseconds()) }
        request.written(bytes.count)
    }

    func setattr(_ request: FuseRequest, inode: UInt64, attributes wanted: stat, changes: Int32, handle: UInt64?) {
        guard let node = tree.value[inode] else { return request.fail(ENOENT) }
        let changesContent =
            changes & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW) != 0
        guard changesContent else { return request.attributes(attributes(inode, node), timeout: Self.timeout) }
        let open = handle.flatMap { handle in handles.withLock { $0.files[handle]?.staged } }
        if open == nil, node.kind != .symlink, let package = tree.withLock({ $0.package(containing: inode) }) {
            guard staged != nil else { return request.fail(EROFS) }
            return setattrInPackage(request, package: package, inode: inode, wanted: wanted, changes: changes)
        }
        if node.kind == .directory { return setDirectoryMode(request, inode, node, wanted, changes: changes) }
        // A symlink's mode and times are not its own to change (Linux ignores the mode): taken.
        guard node.kind == .file else { return request.attributes(attributes(inode, node), timeout: Self.timeout) }
        Task {
            do {
                var fd = open
                var ownDescriptor = false
                if fd == nil {
                    guard let staged else { return request.fail(EROFS) }
                    fd = try await stage(tree.value.path(of: inode), node, truncate: false, staged: staged)
                    ownDescriptor = true
                }
                guard let fd else { return request.fail(EBADF) }
                try apply(wanted, changes: changes, to: fd, inode: inode)
                if ownDescriptor {
                    close(fd)
                    let path = tree.value.path(of: inode)
                    defer { endWriting(path) }
                    try due(path)
                } else {
                    let path = tree.value.path(of: inode)
                    handles.withLock { _ = $0.dirty.insert(path) }
                }
                guard let shown = tree.value[inode] else { return request.fail(ENOENT) }
                request.attributes(attributes(inode, shown), timeout: Self.timeout)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// A directory's mode, set: a new version of its directory document (made for a directory
    /// that had none). Its times are not kept (a directory document has none): a change of
    /// them is taken and forgotten, as `cp -a` and `tar` expect.
    private func setDirectoryMode(
        _ request: FuseRequest, _ inode: UInt64, _ node: MountTree.Node, _ wanted: stat, changes: Int32
    ) {
        let mode = wanted.st_mode & 0o7777
        guard changes & FUSE_SET_ATTR_MODE != 0, mode != node.mode else {
            return request.attributes(attributes(inode, node), timeout: Self.timeout)
        }
        guard let uploads, inode != MountTree.root else {
            return request.fail(EROFS)
        }
        var base: Int64? = nil
        if case .document(let info) = node.origin { base = info.version }
        let made = StagedFiles.Made(
            path: tree.value.path(of: inode), target: nil, mode: mode, queuedNs: Syscall.wallClockNanoseconds(),
            base: base)
        // A directory's mode is a directory document: shown at once, sent (or, offline, queued).
        tree.withLock { $0.setMode(inode, mode) }
        Task {
            do {
                try await uploads.sendOrQueue(made)
                guard let shown = tree.value[inode] else { return request.fail(ENOENT) }
                request.attributes(attributes(inode, shown), timeout: Self.timeout)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Applies a setattr's size, mode and time to a staging file and its node.
    func apply(_ wanted: stat, changes: Int32, to fd: Int32, inode: UInt64) throws {
        if changes & FUSE_SET_ATTR_SIZE != 0 {
            guard ftruncate(fd, off_t(wanted.st_size)) == 0 else {
                throw XferError(.io, "cannot truncate", cause: SystemErrno(Glibc.errno))
            }
        }
        if changes & FUSE_SET_ATTR_MODE != 0 { fchmod(fd, wanted.st_mode & 0o7777) }
        if changes & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW) != 0 {
            var times = [Glibc.timespec(tv_sec: 0, tv_nsec: Self.utimeOmit), wanted.st_mtim]
            if changes & FUSE_SET_ATTR_MTIME_NOW != 0 { times[1] = Glibc.timespec(tv_sec: 0, tv_nsec: Self.utimeNow) }
            futimens(fd, &times)
        }
        var info = stat()
        fstat(fd, &info)
        tree.withLock {
            $0.restat(
                inode, mode: changes & FUSE_SET_ATTR_MODE != 0 ? wanted.st_mode & 0o7777 : nil,
                size: Int64(info.st_size),
                mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
        }
    }

    /// A close (the kernel's flush comes before `close` returns; its release may come after):
    /// what was written is made due now, so a file closed is never lost, even to a kill -9.
    func flush(_ request: FuseRequest, inode: UInt64, handle: UInt64) {
        guard let file = handles.value.files[handle], file.writer, let path = file.path,
            handles.withLock({ $0.dirty.remove(path) != nil })
        else { return request.fail(0) }
        do {
            try due(path)
            request.fail(0)
        } catch {
            request.fail(Self.errno(for: error))
        }
    }

    func fsync(_ request: FuseRequest, inode: UInt64, handle: UInt64) {
        guard let file = handles.value.files[handle], let fd = file.staged, file.writer, let path = file.path else {
            return request.fail(0)
        }
        // Durable here, and queued: the upload follows the last close (a file still open may
        // be written again at once, as a database is between transactions).
        do {
            guard Glibc.fsync(fd) == 0 else { return failIO(request, "an fsync of a staging file") }
            if handles.withLock({ $0.dirty.contains(path) }) { try due(path) }
            request.fail(0)
        } catch {
            request.fail(Self.errno(for: error))
        }
    }

    /// Records `path`'s staging file as due for upload, based on what its node says (in a
    /// package, the package as changed).
    func due(_ path: String) throws {
        guard let staged, let number = tree.withLock({ $0.number(of: path) }) else { return }
        switch tree.value[number]?.origin {
        case .staged(let base)?:
            try staged.due(path, base: base)
            uploads?.kick()
        case .local?:
            try packageDue(number, path: path)
        default:
            return
        }
    }

    /// A handle on a staging file (`writer`: one of the document's writers, counted already by
    /// ``stage(_:_:truncate:staged:)``).
    func opening(_ fd: Int32, path: String, writer: Bool, dirty: Bool) -> UInt64 {
        handles.withLock { handles in
            let handle = handles.next()
            handles.files[handle] = OpenFile(chunks: FileChunks([]), staged: fd, path: path, writer: writer)
            if dirty { handles.dirty.insert(path) }
            return handle
        }
    }
}
