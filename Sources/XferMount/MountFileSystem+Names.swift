import CFuse3
import Foundation
import Glibc
import XferClient
import XferCore
import XferProtocol

/// Removing, renaming, and making directories and symlinks: each asks the server at once,
/// with the version the mount showed (a deletion from a stale view is refused by the server,
/// and the file shows as the server has it). While the server cannot be reached, each is
/// queued durably (``Uploads`` sends it later, with the same check). A directory rename answers
/// EXDEV, so `mv` copies and removes, one document at a time.
extension MountFileSystem {
    func unlink(_ request: FuseRequest, parent: UInt64, name: String) {
        guard let client else { return request.fail(EROFS) }
        guard let path = documentPath(parent, name, or: request) else { return }
        guard let (_, node) = tree.withLock({ $0.lookup(parent, name) }) else { return request.fail(ENOENT) }
        guard node.kind != .directory else { return request.fail(EISDIR) }
        if let package = tree.withLock({ $0.package(containing: parent) }) {
            return removeInPackage(request, package: package, path: path, directory: false)
        }
        Task {
            do {
                try await exclusive([path]) { try await self.remove(path, client: client) }
                request.fail(0)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Runs `body` while no upload of `paths` runs (``Uploads/locks``): what it finds in the
    /// tree then stays as it is, an upload settled or not begun.
    func exclusive<T>(_ paths: [String], _ body: () async throws -> T) async throws -> T {
        guard let uploads else { return try await body() }
        return try await uploads.locks.exclusive(paths, body)
    }

    /// Deletes document `path` as the mount shows it, and its staging file.
    private func remove(_ path: String, client: DocumentClient) async throws {
        guard let number = tree.withLock({ $0.number(of: path) }), let node = tree.value[number] else {
            throw XferError(.notFound, "\(path) is gone")
        }
        let base: Int64?
        switch node.origin {
        case .staged(let staged): base = staged
        case .document(let info): base = info.version
        default: throw XferError(.forbidden, "\(path) is not a document of its own")
        }
        if let base {
            do {
                try await delete(path, base: base, client: client)
            } catch let error as XferError where error.code == .conflict {
                if let current = try? await client.stat(path) { notify(tree.withLock { $0.apply(current) }) }
                throw XferError(.conflict, "\(path) changed on the server; it was not deleted")
            }
        }
        staged?.drop(path)
        notify(tree.withLock { $0.removeHere(path) })
    }

    /// Deletes version `base` of `path` on the server (gone already: done); while the server
    /// cannot be reached, queues the deletion durably instead. Throws `conflict` if the server
    /// has another version.
    private func delete(_ path: String, base: Int64, client: DocumentClient) async throws {
        do {
            _ = try await client.delete(path, baseVersion: base)
        } catch let error as XferError where error.code == .notFound {
            // Deleted already: what the user asked for.
        } catch let error as XferError where error.code == .unavailable {
            guard let staged else { throw error }
            try staged.queueRemoval(path, base: base)
            uploads?.kick()
        }
    }

    func mkdir(_ request: FuseRequest, parent: UInt64, name: String, mode: UInt32) {
        make(request, parent: parent, name: name, target: nil, mode: mode & 0o7777)
    }

    func symlink(_ request: FuseRequest, target: String, parent: UInt64, name: String) {
        make(request, parent: parent, name: name, target: target, mode: 0o777)
    }

    /// Makes a directory (`target` `nil`) or symlink document at `name`: shown at once, pushed,
    /// and settled as the version it made; while the server cannot be reached, queued durably
    /// instead (``Uploads`` sends it).
    private func make(_ request: FuseRequest, parent: UInt64, name: String, target: String?, mode: UInt32) {
        guard let uploads else { return request.fail(EROFS) }
        guard let path = documentPath(parent, name, or: request) else { return }
        guard tree.withLock({ $0.lookup(parent, name) }) == nil else { return request.fail(EEXIST) }
        if let package = tree.withLock({ $0.package(containing: parent) }) {
            return makeInPackage(request, package: package, path: path, target: target, mode: mode)
        }
        let made = StagedFiles.Made(path: path, target: target, mode: mode, queuedNs: Syscall.wallClockNanoseconds())
        let number = tree.withLock { tree in
            tree.made(
                path, kind: target == nil ? .directory : .symlink, mode: mode, size: Int64(target?.utf8.count ?? 0),
                mtimeNanoseconds: made.queuedNs)
            return tree.number(of: path)
        }
        Task {
            do {
                try await uploads.sendOrQueue(made)
                guard let number, let node = tree.value[number] else {
                    return failIO(request, "a made document that does not show")
                }
                request.entry(number, attributes(number, node), timeout: Self.timeout)
            } catch {
                notify(tree.withLock { $0.removeHere(path) })
                request.fail(Self.errno(for: error))
            }
        }
    }

    func rmdir(_ request: FuseRequest, parent: UInt64, name: String) {
        guard let client else { return request.fail(EROFS) }
        guard let path = documentPath(parent, name, or: request) else { return }
        guard let (_, node) = tree.withLock({ $0.lookup(parent, name) }) else { return request.fail(ENOENT) }
        guard node.kind == .directory else { return request.fail(ENOTDIR) }
        guard node.children.isEmpty else { return request.fail(ENOTEMPTY) }
        if let package = tree.withLock({ $0.package(containing: parent) }) {
            return removeInPackage(request, package: package, path: path, directory: true)
        }
        Task {
            do {
                try await exclusive([path]) { try await self.removeDirectory(path, client: client) }
                request.fail(0)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Deletes the empty directory, directory document or package at `path`, as the mount shows
    /// it (a package's entries read first: one not looked into yet may hold some).
    private func removeDirectory(_ path: String, client: DocumentClient) async throws {
        guard let number = tree.withLock({ $0.number(of: path) }) else { throw XferError(.notFound, "\(path) is gone") }
        if let package = tree.value.needsManifest(number) {
            let manifest = try await manifests.manifest(of: package)
            tree.withLock { _ = $0.fill(number, with: manifest, version: package.version) }
        }
        guard let node = tree.value[number], node.children.isEmpty else { throw SystemErrno(ENOTEMPTY) }
        switch node.origin {
        case .document(let info): try await delete(path, base: info.version, client: client)
        case .stagedPackage(let base): try await delete(path, base: base, client: client)
        default: break
        }
        staged?.drop(path)  // one made here and not sent yet goes from the queue
        staged?.dropPackage(path)
        notify(tree.withLock { $0.removeHere(path) })
    }

    func rename(_ request: FuseRequest, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32)
    {
        guard let client, let staged else { return request.fail(EROFS) }
        guard flags & ~Self.renameNoReplace == 0 else { return request.fail(EINVAL) }
        guard let from = documentPath(parent, name, or: request),
            let to = documentPath(newParent, newName, or: request)
        else { return }
        let (source, target) = tree.withLock { ($0.lookup(parent, name), $0.lookup(newParent, newName)) }
        guard let source else { return request.fail(ENOENT) }
        let packages = tree.withLock { ($0.package(containing: parent), $0.package(containing: newParent)) }
        if packages.0 != nil || packages.1 != nil {
            // Inside one package, a rename of its own; into or out of one, a copy (as across file systems).
            guard let package = packages.0, packages.0 == packages.1 else { return request.fail(EXDEV) }
            let noReplace = flags & Self.renameNoReplace != 0
            return renameInPackage(request, package: package, from: from, to: to, noReplace: noReplace)
        }
        guard source.node.kind == .file else { return request.fail(EXDEV) }  // mv copies and removes
        if let target, target.node.kind == .directory { return request.fail(EISDIR) }
        // A file open for writing keeps its bytes: it is not replaced under its writers.
        if handles.value.writers[to] != nil { return request.fail(EBUSY) }
        if target != nil, flags & Self.renameNoReplace != 0 { return request.fail(EEXIST) }
        Task {
            do {
                try await exclusive([from, to]) {
                    // As the tree is now: an upload of `from` that was in flight has settled.
                    guard let number = self.tree.withLock({ $0.number(of: from) }), let node = self.tree.value[number]
                    else { throw XferError(.notFound, "\(from) is gone") }
                    try await self.move(from, node, to: to, staged: staged, client: client)
                }
                request.fail(0)
            } catch {
                request.fail(Self.errno(for: error))
            }
        }
    }

    /// Moves file `from` to `to`: its bytes staged at `to` (based on what `to` was, if
    /// anything) and due, the node moved under its own inode, and only then `from` deleted on
    /// the server.
    private func move(
        _ from: String, _ node: MountTree.Node, to: String, staged: StagedFiles, client: DocumentClient
    ) async throws {
        handles.withLock { $0.writers[to, default: 0] += 1 }
        defer { endWriting(to) }
        if case .staged = node.origin, staged.exists(from) {
            guard Glibc.rename(staged.dataPath(from), staged.dataPath(to)) == 0 else {
                throw XferError(.io, "cannot move the staging file of \(from)", cause: SystemErrno(Glibc.errno))
            }
            staged.dropRecord(from)
            handles.withLock { $0.follow(from, to: to) }  // handles open on it write at its new name
        }
        if case .document(let info) = node.origin {
            // The server's bytes, in place of whatever was staged at `to` (once they are all here).
            try await staged.replace(to) { fd in try await fill(fd, from: info) }
        }
        let (fd, _) = try staged.open(to)
        defer { close(fd) }
        fchmod(fd, mode_t(node.mode & 0o7777))
        var times = [Glibc.timespec(tv_sec: 0, tv_nsec: Self.utimeOmit), Self.time(node.mtimeNanoseconds)]
        futimens(fd, &times)
        let base = tree.value.base(of: to)
        notify(tree.withLock { $0.move(from, to: to, base: base) })
        try due(to)
        let sourceBase: Int64?
        switch node.origin {
        case .document(let info): sourceBase = info.version
        case .staged(let staged): sourceBase = staged
        default: sourceBase = nil
        }
        guard let sourceBase else { return }
        do {
            try await delete(from, base: sourceBase, client: client)
        } catch let error as XferError where error.code == .conflict {
            // Changed on the server meanwhile: it stays there (and shows again), beside the copy.
            if let current = try? await client.stat(from) { notify(tree.withLock { $0.apply(current) }) }
        }
    }

    /// renameat2's RENAME_NOREPLACE, and utimensat's UTIME_OMIT and UTIME_NOW (macros Swift
    /// does not import).
    static let renameNoReplace: UInt32 = 1
    static let utimeOmit = (1 << 30) - 2
    static let utimeNow = (1 << 30) - 1

    static func time(_ nanoseconds: Int64) -> Glibc.timespec {
        let (seconds, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        return rest < 0
            ? Glibc.timespec(tv_sec: Int(seconds) - 1, tv_nsec: Int(rest) + 1_000_000_000)
            : Glibc.timespec(tv_sec: Int(seconds), tv_nsec: Int(rest))
    }
}
