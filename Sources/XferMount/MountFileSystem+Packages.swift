import CFuse3
import Foundation
import Glibc
import XferClient
import XferCore
import XferProtocol

/// Writes inside a package. A package is one document, so the first change inside one checks
/// it out whole into a staging directory (StagedFiles+Packages; its files' bytes from verified
/// chunks, as reads fetch them), every change inside it is made there, and once nothing in it
/// has been written for a quiet period ``Uploads`` pushes the directory as the package's next
/// version, based on the one checked out (a stale base becomes a conflict version).
extension MountFileSystem {
    /// A package being changed here.
    struct PackageEdit {
        /// The package's document path, and its staging directory.
        let path: String
        let directory: String

        /// Where `documentPath` (the package, or a path inside it) is in the staging directory.
        func local(_ documentPath: String) -> String {
            documentPath == path ? directory : directory + "/" + documentPath.dropFirst(path.count + 1)
        }
    }

    /// Runs `body` on package `number` checked out, while no upload of it runs; then records the
    /// package as changed once what `body` says it touched is durable (nothing: no change).
    func editing<T>(_ number: UInt64, _ body: (PackageEdit) throws -> (T, touched: [String])) async throws -> T {
        let path = tree.withLock { $0.path(of: number) }
        return try await exclusive([path]) {
            let edit = try await checkout(number, path: path)
            do {
                let (result, touched) = try body(edit)
                if touched.isEmpty { leaveUnchanged(number) } else { try packageChanged(number, touched: touched) }
                return result
            } catch {
                leaveUnchanged(number)  // if nothing else changed it
                throw error
            }
        }
    }

    /// Package `number`'s staging directory, checked out from the version shown if it is not
    /// yet (or, if an earlier mount changed it and its upload has not happened, as it left it).
    private func checkout(_ number: UInt64, path: String) async throws -> PackageEdit {
        guard let staged else { throw XferError(.forbidden, "the mount is read-only") }
        let edit = PackageEdit(path: path, directory: staged.packageDirectory(path))
        if tree.value.packageBase(number) != nil, staged.hasPackage(path) { return edit }
        guard case .document(let info)? = tree.value[number]?.origin, info.kind == .package else {
            throw XferError(.notFound, "\(path) is not a package")
        }
        var base = info.version
        if let record = staged.packageRecord(path), staged.hasPackage(path) {
            base = record.base
        } else {
            let manifest = try await manifests.manifest(of: info)
            staged.dropPackage(path)
            try await staged.checkOut(path) { scratch in
                try await PackageCheckout.write(manifest, into: scratch) { fd, chunks in try await fill(fd, chunks) }
            }
        }
        let entries = try PackageCheckout.scan(edit.directory)
        notify(tree.withLock { $0.stagePackage(number, base: base, entries: entries) })
        return edit
    }

    /// Records package `number` as changed, once `touched` is durable.
    private func packageChanged(_ number: UInt64, touched: [String]) throws {
        let (path, base) = tree.withLock { ($0.path(of: number), $0.packageBase(number)) }
        guard let staged, let base else { return }
        try staged.packageChanged(path, base: base, touched: touched)
        uploads?.kick()
    }

    /// Records the package that file `number` (at `path`) lies in as changed, its bytes durable
    /// first: a file in it was closed or synced after a write.
    func packageDue(_ number: UInt64, path: String) throws {
        guard let package = tree.withLock({ $0.package(containing: number) }), let local = localPath(of: path) else {
            return
        }
        try packageChanged(package, touched: [local])
    }

    /// Where `path`, inside a package changed here, is on disk.
    func localPath(of path: String) -> String? {
        let package = tree.withLock { tree in
            tree.number(of: path).flatMap { tree.package(containing: $0) }.map { tree.path(of: $0) }
        }
        guard let package, let staged else { return nil }
        return PackageEdit(path: package, directory: staged.packageDirectory(package)).local(path)
    }

    /// A package checked out and not changed (its last writer closed unwritten, or an edit
    /// failed): unless something else changed it or has it open for writing, it shows the
    /// server's version again, and its staging directory goes.
    func leaveUnchanged(_ number: UInt64) {
        let path = tree.value.path(of: number)
        guard let client, let staged, !handles.value.isWriting(under: path), staged.packageRecord(path) == nil else {
            return
        }
        Task {
            guard let current = try? await client.stat(path) else { return }
            let settled = try? await exclusive([path]) {
                handles.withLock { handles -> [MountTree.Invalidation]? in
                    guard !handles.isWriting(under: path), staged.packageRecord(path) == nil,
                        tree.value.packageBase(number) != nil
                    else { return nil }
                    staged.dropPackage(path)
                    return tree.withLock { $0.settlePackage(current, current: current) }
                }
            }
            if let settled { notify(settled) }
        }
    }

    // MARK: Operations inside a package

    /// Opens (`create`: makes, with that mode) the file at `path` inside package `package` for
    /// writing.
    func openInPackage(
        _ request: FuseRequest, package: UInt64, path: String, truncate: Bool, create: UInt32?, info: fuse_file_info
    ) {
        handles.withLock { $0.writers[path, default: 0] += 1 }
        Task {
            do {
                let (fd, number) = try await editing(package) { edit in
                    let local = edit.local(path)
                    let flags =
                        O_RDWR | O_NOFOLLOW | O_CLOEXEC | (truncate ? O_TRUNC : 0) | (create != nil ? O_CREAT : 0)
                    let fd = Glibc.open(local, flags, mode_t(create ?? 0o600))
                    guard fd >= 0 else { throw SystemErrno(Glibc.errno) }
                    if let create { fchmod(fd, mode_t(create)) }
                    let number = try show(local, at: path)
                    return ((fd, number), touched: create != nil ? [local, MountTree.parentPath(local)] : [])
                }
                let handle = opening(fd, path: path, writer: true, dirty: truncate || create != nil)
                guard let node = tree.value[number] else {
                    return failIO(request, "a file in a package that does not show")
                }
                if create != nil {
                    request.created(number, attributes(number, node), timeout: Self.timeout, handle: handle, info)
                } else {
                    request.opened(handle, info, keepCache: true)
                }
            } catch {
                endWriting(path)
                leaveUnchanged(package)
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Shows what is at `local` (in a package's staging directory) at `path`.
    /// - Returns: Its inode.
    private func show(_ local: String, at path: String) throws -> UInt64 {
        var info = stat()
        guard lstat(local, &info) == 0, let kind = PackageCheckout.kind(info.st_mode) else {
            throw SystemErrno(Glibc.errno)
        }
        let (number, invalidations) = tree.withLock {
            $0.addLocal(
                path, kind: kind, mode: info.st_mode & 0o7777, size: Int64(info.st_size),
                mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
        }
        notify(invalidations)
        return number
    }

    /// Changes a file's or directory's size, mode or time inside a package.
    func setattrInPackage(_ request: FuseRequest, package: UInt64, inode: UInt64, wanted: stat, changes: Int32) {
        let path = tree.value.path(of: inode)
        Task {
            do {
                try await editing(package) { edit in
                    let local = edit.local(path)
                    let writing = changes & FUSE_SET_ATTR_SIZE != 0 ? O_RDWR : O_RDONLY
                    let fd = Glibc.open(local, writing | O_NOFOLLOW | O_CLOEXEC)
                    guard fd >= 0 else { throw SystemErrno(Glibc.errno) }
                    defer { close(fd) }
                    try apply(wanted, changes: changes, to: fd, inode: inode)
                    if inode == package, changes & FUSE_SET_ATTR_MODE != 0 {
                        tree.withLock { $0.setMode(inode, wanted.st_mode & 0o7777) }
                    }
                    return ((), touched: [local])
                }
                guard let node = tree.value[inode] else { return request.fail(ENOENT) }
                request.attributes(attributes(inode, node), timeout: Self.timeout)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Removes the file, symlink or empty directory (`directory`) at `path` inside a package.
    func removeInPackage(_ request: FuseRequest, package: UInt64, path: String, directory: Bool) {
        Task {
            do {
                try await editing(package) { edit in
                    let local = edit.local(path)
                    guard (directory ? Glibc.rmdir(local) : Glibc.unlink(local)) == 0 else {
                        throw SystemErrno(Glibc.errno)
                    }
                    notify(tree.withLock { $0.removeHere(path) })
                    return ((), touched: [MountTree.parentPath(local)])
                }
                request.fail(0)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Makes a directory (`target` `nil`) or symlink at `path` inside a package.
    func makeInPackage(_ request: FuseRequest, package: UInt64, path: String, target: String?, mode: UInt32) {
        Task {
            do {
                let number = try await editing(package) { edit in
                    let local = edit.local(path)
                    let made = target.map { Glibc.symlink($0, local) } ?? Glibc.mkdir(local, mode_t(mode))
                    guard made == 0 else { throw SystemErrno(Glibc.errno) }
                    if target == nil { chmod(local, mode_t(mode)) }
                    let number = try show(local, at: path)
                    return (number, touched: [local, MountTree.parentPath(local)])
                }
                guard let node = tree.value[number] else { return failIO(request, "a made entry that does not show") }
                request.entry(number, attributes(number, node), timeout: Self.timeout)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Renames `from` to `to`, both inside package `package`, as the file system under it does.
    func renameInPackage(_ request: FuseRequest, package: UInt64, from: String, to: String, noReplace: Bool) {
        Task {
            do {
                try await editing(package) { edit in
                    let (source, target) = (edit.local(from), edit.local(to))
                    var info = stat()
                    if noReplace, lstat(target, &info) == 0 { throw SystemErrno(EEXIST) }
                    if handles.value.isWriting(under: to) { throw SystemErrno(EBUSY) }
                    guard Glibc.rename(source, target) == 0 else { throw SystemErrno(Glibc.errno) }
                    handles.withLock { $0.follow(from, to: to) }
                    notify(tree.withLock { $0.moveLocal(from, to: to) })
                    return ((), touched: [MountTree.parentPath(source), MountTree.parentPath(target)])
                }
                request.fail(0)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }
}
