import CFuse3
import Foundation
import Glibc
import XferClient
import XferCore
import XferProtocol

/// The mount's answers to the kernel: names and attributes from the ``MountTree`` (no chunk
/// needed), a package's entries once its manifest came, and file data from the
/// ``ChunkSupply``, a read fetching only the chunks it covers; a file written here from its
/// staging copy (``StagedFiles``; the writes themselves are in MountFileSystem+Writes).
final class MountFileSystem: FuseOperations {
    /// How long the kernel may keep names and attributes; changes are pushed to it sooner
    /// (``FuseSession/invalidate(_:)``).
    static let timeout = 10.0
    /// The most a sequential reader's read-ahead grows to.
    static let maximumReadAhead = 16 << 20
    /// What one read-ahead request asks for.
    static let readAheadRequest = 8 << 20

    let tree: Locked<MountTree>
    let manifests: ManifestSupply
    let supply: ChunkSupply
    /// Where writes go, and what uploads them (both `nil`: a read-only mount).
    let staged: StagedFiles?
    let uploads: Uploads?
    /// The client that removes and makes documents (`nil`: read-only).
    let client: DocumentClient?
    /// Tells the kernel what changed (set once the session exists).
    let notifier: Locked<(@Sendable ([MountTree.Invalidation]) -> Void)?>
    let handles: Locked<Handles>
    private let owner = (uid: getuid(), gid: getgid())

    init(
        tree: Locked<MountTree>, manifests: ManifestSupply, supply: ChunkSupply, staged: StagedFiles? = nil,
        uploads: Uploads? = nil, client: DocumentClient? = nil,
        notifier: Locked<(@Sendable ([MountTree.Invalidation]) -> Void)?> = Locked(nil),
        handles: Locked<Handles> = Locked(Handles())
    ) {
        self.notifier = notifier
        self.handles = handles
        self.tree = tree
        self.manifests = manifests
        self.supply = supply
        self.staged = staged
        self.uploads = uploads
        self.client = client
    }

    /// Tells the kernel what changed.
    func notify(_ invalidations: [MountTree.Invalidation]) {
        guard !invalidations.isEmpty else { return }
        notifier.value?(invalidations)
    }

    // MARK: Names and attributes

    func lookup(_ request: FuseRequest, parent: UInt64, name: String) {
        answer(request, afterLoading: parent) { tree in
            guard let (number, _) = tree.lookup(parent, name) else { return request.fail(ENOENT) }
            self.revealing(number, request) { node in
                request.entry(number, self.attributes(number, node), timeout: Self.timeout)
            }
        }
    }

    func forget(inode: UInt64) {
        tree.withLock { $0.forget(inode) }
    }

    func getattr(_ request: FuseRequest, inode: UInt64) {
        revealing(inode, request) { node in request.attributes(self.attributes(inode, node), timeout: Self.timeout) }
    }

    /// Runs `body` with node `number` once its attributes are known: in an end-to-end
    /// encrypted container, once its document's manifest is read (MountTree+Sealed).
    private func revealing(
        _ number: UInt64, _ request: FuseRequest, _ body: @escaping @Sendable (MountTree.Node) -> Void
    ) {
        let (node, sealed) = tree.withLock { ($0[number], $0.needsAttributes(number)) }
        guard let node else { return request.fail(ENOENT) }
        guard let sealed else { return body(node) }
        Task {
            do {
                let manifest = try await manifests.manifest(of: sealed)
                let revealed = tree.withLock { tree in
                    tree.reveal(number, from: manifest, version: sealed.version)
                    return tree[number]
                }
                guard let revealed else { return request.fail(ENOENT) }
                body(revealed)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    func readlink(_ request: FuseRequest, inode: UInt64) {
        let (node, manifests) = tree.withLock { ($0[inode], $0.manifests) }
        guard let node, node.kind == .symlink else { return request.fail(EINVAL) }
        switch node.origin {
        case .entry(let package, let index):
            guard let target = manifests[package]?.entries.symlinkTarget(at: index) else {
                return failIO(request, "a package symlink without a target")
            }
            request.link(target)
        case .document(let info):
            Task {
                do {
                    let manifest = try await self.manifests.manifest(of: info)
                    guard let target = manifest.entries.first?.symlinkTarget else { return request.fail(EINVAL) }
                    request.link(target)
                } catch {
                    request.fail(Self.errno(for: error))
                }
            }
        case .staged:
            guard let target = staged?.made(tree.value.path(of: inode))?.target else { return request.fail(EINVAL) }
            request.link(target)
        case .local:
            guard let local = localPath(of: tree.value.path(of: inode)),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: local)
            else { return failIO(request, "a symlink in a package changed here") }
            request.link(target)
        case .implied, .stagedPackage:
            request.fail(EINVAL)
        }
    }

    func statfs(_ request: FuseRequest) {
        var statistics = statvfs()
        statistics.f_bsize = 65536
        statistics.f_frsize = 65536
        statistics.f_namemax = 255
        request.fileSystem(statistics)
    }

    // MARK: Directories

    func opendir(_ request: FuseRequest, inode: UInt64, info: fuse_file_info) {
        answer(request, afterLoading: inode) { tree in
            guard let node = tree[inode], node.kind == .directory else { return request.fail(ENOTDIR) }
            var entries = [(".", inode, Self.type(.directory)), ("..", node.parent, Self.type(.directory))]
            entries += tree.children(of: inode).map { ($0.name, $0.number, $0.kind.map(Self.type) ?? 0) }
            let handle = self.handles.withLock { handles in
                let handle = handles.next()
                handles.directories[handle] = entries
                return handle
            }
            request.opened(handle, info, keepCache: false)
        }
    }

    func readdir(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, size: Int) {
        guard let entries = handles.value.directories[handle] else { return request.fail(EBADF) }
        request.directory(entries, offset: Int(offset), size: size)
    }

    func releasedir(_ request: FuseRequest, inode: UInt64, handle: UInt64) {
        handles.withLock { _ = $0.directories.removeValue(forKey: handle) }
        request.fail(0)
    }

    // MARK: Files

    func open(_ request: FuseRequest, inode: UInt64, info: fuse_file_info) {
        let (node, manifests) = tree.withLock { ($0[inode], $0.manifests) }
        guard let node else { return request.fail(ENOENT) }
        guard node.kind == .file else { return request.fail(node.kind == .directory ? EISDIR : ELOOP) }
        guard info.flags & O_ACCMODE == O_RDONLY else { return openForWriting(request, inode, node, info: info) }
        switch node.origin {
        case .staged, .local:
            openLocalCopy(request, inode: inode, info: info)
        case .entry(let package, let index):
            guard let manifest = manifests[package] else {
                return failIO(request, "a package entry without its manifest")
            }
            opened(request, info, FileChunks(Array(manifest.entries.chunks(at: index))))
        case .document(let document):
            Task {
                do {
                    let manifest = try await self.manifests.manifest(of: document)
                    guard let entry = manifest.entries.first, entry.kind == .file else {
                        return failIO(request, "a file document whose manifest holds no file")
                    }
                    opened(request, info, FileChunks(entry.chunks))
                } catch {
                    request.fail(Self.errno(for: error))
                }
            }
        case .implied, .stagedPackage:
            request.fail(EISDIR)
        }
    }

    /// Opens for reading the copy here of a file this mount changed: its staging file, or the
    /// file in a package changed here. An upload settles under the handles' lock (the copy goes
    /// and the node shows the version at once), so opened under it too the copy is there, or
    /// the node is the server's now and the open starts over.
    private func openLocalCopy(_ request: FuseRequest, inode: UInt64, info: fuse_file_info) {
        let opened = handles.withLock { _ -> (fd: Int32, path: String)? in
            guard let origin = tree.value[inode]?.origin else { return nil }
            let path = tree.value.path(of: inode)
            switch origin {
            case .staged:
                return (staged.map { Glibc.open($0.dataPath(path), O_RDONLY | O_CLOEXEC) } ?? -1, path)
            case .local:
                return (localPath(of: path).map { Glibc.open($0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) } ?? -1, path)
            default:
                return nil
            }
        }
        guard let (fd, path) = opened else { return open(request, inode: inode, info: info) }
        guard fd >= 0 else { return failIO(request, "open of the copy here of \(path)") }
        request.opened(opening(fd, path: path, writer: false, dirty: false), info, keepCache: true)
    }

    func read(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, size: Int) {
        let plan = handles.withLock { handles -> (FileChunks, Range<Int>, [Range<Int>])? in
            guard var file = handles.files[handle] else { return nil }
            let range = file.chunks.covering(offset: offset, length: size)
            let ahead = file.read(offset: offset, size: size, range: range)
            handles.files[handle] = file
            return (file.chunks, range, ahead)
        }
        if let fd = handles.withLock({ $0.files[handle]?.staged }) {
            return readStaged(request, fd, offset: offset, size: size)
        }
        guard let (chunks, range, ahead) = plan else { return request.fail(EBADF) }
        for request in ahead { supply.prefetch(Array(chunks.references[request])) }
        if let plains = supply.held(Array(chunks.references[range])) {
            return request.data(chunks.pieces(offset: offset, length: size, from: plains))
        }
        Task {
            do {
                let plains = try await supply.plain(Array(chunks.references[range]))
                request.data(chunks.pieces(offset: offset, length: size, from: plains))
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    func release(_ request: FuseRequest, inode: UInt64, handle: UInt64) {
        let (file, closing) = handles.withLock { handles -> (OpenFile?, (path: String, dirty: Bool)?) in
            guard let file = handles.files.removeValue(forKey: handle) else { return (nil, nil) }
            guard file.writer, let path = file.path else { return (file, nil) }
            handles.writers[path, default: 1] -= 1
            guard handles.writers[path] == 0 else { return (file, nil) }
            handles.writers[path] = nil
            return (file, (path, handles.dirty.remove(path) != nil))
        }
        if let fd = file?.staged { close(fd) }
        guard let closing else { return request.fail(0) }
        // The last writer's close: what was written is due; a file opened for writing and not
        // written goes back to being the server's.
        do {
            if closing.dirty {
                try due(closing.path)
            } else if let package = tree.withLock({ $0.number(of: closing.path).flatMap($0.package(containing:)) }) {
                leaveUnchanged(package)  // if nothing in it changed
            } else if staged?.record(closing.path) == nil {
                unstage(closing.path)
            }
            request.fail(0)
        } catch {
            request.fail(EIO)
        }
    }

    /// Drops the staging copy of a file opened for writing and closed unwritten.
    private func unstage(_ path: String) {
        Task {
            guard let client, let current = try? await client.stat(path) else { return }
            // Unless a writer opened it again meanwhile (then it stays staged).
            let settled = handles.withLock { handles -> [MountTree.Invalidation]? in
                guard handles.writers[path] == nil, staged?.record(path) == nil else { return nil }
                staged?.drop(path)
                return tree.withLock { $0.settle(current, current: current) }
            }
            if let settled { notify(settled) }
        }
    }

    /// Answers a read of a staging file.
    private func readStaged(_ request: FuseRequest, _ fd: Int32, offset: Int64, size: Int) {
        var bytes = [UInt8](repeating: 0, count: size)
        let count = bytes.withUnsafeMutableBytes { buffer in
            (try? Syscall.pread(fd, into: buffer, at: offset, path: "a staging file")) ?? -1
        }
        guard count >= 0 else { return failIO(request, "a read of a staging file") }
        request.data([bytes[..<count]])
    }

    func opened(_ request: FuseRequest, _ info: fuse_file_info, _ chunks: FileChunks) {
        let handle = handles.withLock { handles in
            let handle = handles.next()
            handles.files[handle] = OpenFile(chunks: chunks)
            return handle
        }
        request.opened(handle, info, keepCache: true)
    }

    // MARK: Helpers

    /// Runs `body` with the tree once directory `number`'s entries are known: a package's
    /// manifest is fetched first if it is not yet.
    private func answer(
        _ request: FuseRequest, afterLoading number: UInt64, _ body: @escaping @Sendable (MountTree) -> Void
    ) {
        guard let package = tree.value.needsManifest(number) else { return body(tree.value) }
        Task {
            do {
                let manifest = try await manifests.manifest(of: package)
                let tree = self.tree.withLock { tree in
                    tree.fill(number, with: manifest, version: package.version)
                    return tree
                }
                body(tree)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    func attributes(_ number: UInt64, _ node: MountTree.Node) -> stat {
        var attributes = stat()
        attributes.st_ino = UInt(number)
        attributes.st_mode = Self.type(node.kind) | (node.mode & 0o7777)
        attributes.st_nlink = node.kind == .directory ? 2 : 1
        let size = max(0, node.size)  // what a server says; the reads give what the chunks hold
        attributes.st_size = Int(size)
        attributes.st_blocks = Int(size / 512 + (size % 512 == 0 ? 0 : 1))
        attributes.st_blksize = 65536
        attributes.st_uid = owner.uid
        attributes.st_gid = owner.gid
        // Seconds rounded down, so the nanoseconds are 0 ... 999,999,999 before 1970 too.
        let (seconds, nanoseconds) = node.mtimeNanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        let time =
            nanoseconds < 0
            ? timespec(tv_sec: Int(seconds) - 1, tv_nsec: Int(nanoseconds) + 1_000_000_000)
            : timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds))
        attributes.st_mtim = time
        attributes.st_ctim = time
        attributes.st_atim = time
        return attributes
    }

    static func type(_ kind: MountTree.Kind) -> UInt32 {
        switch kind {
        case .directory: return S_IFDIR
        case .file: return S_IFREG
        case .symlink: return S_IFLNK
        }
    }

    /// Fails `request` with EIO, saying where when debugging.
    func failIO(_ request: FuseRequest, _ site: String) {
        if Self.debugging { FileHandle.standardError.write(Data("xfer mount: EIO at \(site)\n".utf8)) }
        request.fail(EIO)
    }

    /// Whether failures are told on stderr (`XFER_MOUNT_DEBUG=1`).
    static let debugging = ProcessInfo.processInfo.environment["XFER_MOUNT_DEBUG"] == "1"

    /// The errno a failed fetch gives the reader.
    static func errno(for error: any Error) -> Int32 {
        if debugging { FileHandle.standardError.write(Data("xfer mount: \(error)\n".utf8)) }
        if let error = error as? SystemErrno { return error.rawValue }  // a local file system's answer
        guard let error = error as? XferError else { return EIO }
        switch error.code {
        case .notFound: return ENOENT
        case .conflict: return ESTALE  // changed on the server since the mount showed it
        case .cancelled: return EINTR
        case .unauthorized, .forbidden: return EACCES
        default: return EIO
        }
    }
}
