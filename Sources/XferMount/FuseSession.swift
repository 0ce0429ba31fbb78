import CFuse3
import Foundation
import Glibc
import XferCore

/// What a FUSE file system answers. Every call ends with exactly one reply on its request
/// (``FuseRequest``), now or later from any thread: a call that waits for the network starts a
/// task and returns, so no libfuse thread waits on one.
public protocol FuseOperations: AnyObject, Sendable {
    func lookup(_ request: FuseRequest, parent: UInt64, name: String)
    /// The kernel dropped every reference to `inode` (no reply).
    func forget(inode: UInt64)
    func getattr(_ request: FuseRequest, inode: UInt64)
    func readlink(_ request: FuseRequest, inode: UInt64)
    func open(_ request: FuseRequest, inode: UInt64, info: fuse_file_info)
    func read(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, size: Int)
    func release(_ request: FuseRequest, inode: UInt64, handle: UInt64)
    func opendir(_ request: FuseRequest, inode: UInt64, info: fuse_file_info)
    func readdir(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, size: Int)
    func releasedir(_ request: FuseRequest, inode: UInt64, handle: UInt64)
    func statfs(_ request: FuseRequest)
    func create(_ request: FuseRequest, parent: UInt64, name: String, mode: UInt32, info: fuse_file_info)
    func write(_ request: FuseRequest, inode: UInt64, handle: UInt64, offset: Int64, bytes: UnsafeRawBufferPointer)
    /// `changes`: FUSE_SET_ATTR_* bits; `handle` when the file is open (ftruncate, futimens).
    func setattr(_ request: FuseRequest, inode: UInt64, attributes: stat, changes: Int32, handle: UInt64?)
    func flush(_ request: FuseRequest, inode: UInt64, handle: UInt64)
    func fsync(_ request: FuseRequest, inode: UInt64, handle: UInt64)
    func unlink(_ request: FuseRequest, parent: UInt64, name: String)
    func mkdir(_ request: FuseRequest, parent: UInt64, name: String, mode: UInt32)
    func rmdir(_ request: FuseRequest, parent: UInt64, name: String)
    func rename(_ request: FuseRequest, parent: UInt64, name: String, newParent: UInt64, newName: String, flags: UInt32)
    func symlink(_ request: FuseRequest, target: String, parent: UInt64, name: String)
}

/// A mounted libfuse session: mounts on creation, serves requests on libfuse's threads while
/// ``run()`` runs, and is unmounted by ``stop()`` (or `fusermount3 -u`).
public final class FuseSession: @unchecked Sendable {
    private let session: OpaquePointer
    private let operations: Unmanaged<AnyObject>
    /// The mount point.
    public let mountpoint: String
    private let stopped = Locked(false)

    /// Mounts `operations` at `mountpoint` with mount `options` (`ro`, `fsname=…`).
    /// - Throws: `io` if libfuse refuses the options or the mount fails (no `/dev/fuse`, not
    ///   a directory, already mounted).
    public init(mountpoint: String, options: [String], operations: any FuseOperations) throws {
        self.mountpoint = mountpoint
        self.operations = Unmanaged.passRetained(operations as AnyObject)
        var ops = Self.table()
        let arguments = ["xfer"] + (options.isEmpty ? [] : ["-o", options.joined(separator: ",")])
        var argv = arguments.map { strdup($0) }
        defer { argv.forEach { free($0) } }
        guard
            let session = cxfer_fuse_session_new(
                Int32(argv.count), &argv, &ops, self.operations.toOpaque())
        else {
            self.operations.release()
            throw XferError(.io, "libfuse refused the mount options \(options.joined(separator: ","))")
        }
        guard fuse_session_mount(session, mountpoint) == 0 else {
            fuse_session_destroy(session)
            self.operations.release()
            throw XferError(
                .io,
                "could not mount at \(mountpoint): is it an empty directory, not mounted already, and is /dev/fuse there (Debian: apt install fuse3)?"
            )
        }
        self.session = session
    }

    deinit {
        fuse_session_destroy(session)
        operations.release()
    }

    /// Serves requests until the file system is unmounted (``stop()``, `fusermount3 -u`).
    /// Blocks: run it on a thread of its own.
    /// - Returns: libfuse's result (0, or a negative errno).
    public func run() -> Int32 {
        let result = cxfer_fuse_loop(session, 8)
        unmount()
        return result
    }

    /// Ends ``run()`` and unmounts.
    public func stop() {
        fuse_session_exit(session)
        unmount()
    }

    /// Unmounts, the first time only (``stop()`` and the end of ``run()`` may race).
    private func unmount() {
        stopped.withLock { stopped in
            guard !stopped else { return }
            stopped = true
            fuse_session_unmount(session)
        }
    }

    /// Tells the kernel to forget what it cached of `invalidation`; a kernel that had nothing
    /// cached answers ENOENT, which is fine.
    public func invalidate(_ invalidation: MountTree.Invalidation) {
        switch invalidation {
        case .entry(let parent, let name):
            _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), name, name.utf8.count)
        case .inode(let inode):
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), 0, 0)
        }
    }

    // MARK: The operations table

    /// libfuse's table of operations, each handing its request to the session's ``FuseOperations``.
    private static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.lookup = { request, parent, name in
            let (request, operations) = of(request)
            operations.lookup(request, parent: UInt64(parent), name: String(cString: name!))
        }
        ops.forget = { request, inode, _ in
            let (request, operations) = of(request)
            operations.forget(inode: UInt64(inode))
            request.none()
        }
        ops.getattr = { request, inode, _ in
            let (request, operations) = of(request)
            operations.getattr(request, inode: UInt64(inode))
        }
        ops.readlink = { request, inode in
            let (request, operations) = of(request)
            operations.readlink(request, inode: UInt64(inode))
        }
        ops.open = { request, inode, info in
            let (request, operations) = of(request)
            operations.open(request, inode: UInt64(inode), info: info!.pointee)
        }
        ops.read = { request, inode, size, offset, info in
            let (request, operations) = of(request)
            operations.read(
                request, inode: UInt64(inode), handle: cxfer_fuse_fh(info), offset: Int64(offset), size: size)
        }
        ops.release = { request, inode, info in
            let (request, operations) = of(request)
            operations.release(request, inode: UInt64(inode), handle: cxfer_fuse_fh(info))
        }
        ops.opendir = { request, inode, info in
            let (request, operations) = of(request)
            operations.opendir(request, inode: UInt64(inode), info: info!.pointee)
        }
        ops.readdir = { request, inode, size, offset, info in
            let (request, operations) = of(request)
            operations.readdir(
                request, inode: UInt64(inode), handle: cxfer_fuse_fh(info), offset: Int64(offset), size: size)
        }
        ops.releasedir = { request, inode, info in
            let (request, operations) = of(request)
            operations.releasedir(request, inode: UInt64(inode), handle: cxfer_fuse_fh(info))
        }
        ops.statfs = { request, _ in
            let (request, operations) = of(request)
            operations.statfs(request)
        }
        ops.create = { request, parent, name, mode, info in
            let (request, operations) = of(request)
            operations.create(
                request, parent: UInt64(parent), name: String(cString: name!), mode: mode, info: info!.pointee)
        }
        ops.write = { request, inode, bytes, size, offset, info in
            let (request, operations) = of(request)
            operations.write(
                request, inode: UInt64(inode), handle: cxfer_fuse_fh(info), offset: Int64(offset),
                bytes: UnsafeRawBufferPointer(start: bytes, count: size))
        }
        ops.setattr = { request, inode, attributes, changes, info in
            let (request, operations) = of(request)
            operations.setattr(
                request, inode: UInt64(inode), attributes: attributes!.pointee, changes: changes,
                handle: info.map { cxfer_fuse_fh($0) })
        }
        ops.flush = { request, inode, info in
            let (request, operations) = of(request)
            operations.flush(request, inode: UInt64(inode), handle: cxfer_fuse_fh(info))
        }
        ops.fsync = { request, inode, _, info in
            let (request, operations) = of(request)
            operations.fsync(request, inode: UInt64(inode), handle: cxfer_fuse_fh(info))
        }
        ops.unlink = { request, parent, name in
            let (request, operations) = of(request)
            operations.unlink(request, parent: UInt64(parent), name: String(cString: name!))
        }
        ops.mkdir = { request, parent, name, mode in
            let (request, operations) = of(request)
            operations.mkdir(request, parent: UInt64(parent), name: String(cString: name!), mode: mode)
        }
        ops.rmdir = { request, parent, name in
            let (request, operations) = of(request)
            operations.rmdir(request, parent: UInt64(parent), name: String(cString: name!))
        }
        ops.rename = { request, parent, name, newParent, newName, flags in
            let (request, operations) = of(request)
            operations.rename(
                request, parent: UInt64(parent), name: String(cString: name!), newParent: UInt64(newParent),
                newName: String(cString: newName!), flags: UInt32(flags))
        }
        ops.symlink = { request, target, parent, name in
            let (request, operations) = of(request)
            operations.symlink(
                request, target: String(cString: target!), parent: UInt64(parent), name: String(cString: name!))
        }
        ops.`init` = { _, connection in cxfer_fuse_configure(connection, 1 << 20, UInt32(kernelReadAhead)) }
        return ops
    }
}

/// A request and the operations of the session it came to (its user data).
private func of(_ request: fuse_req_t?) -> (FuseRequest, any FuseOperations) {
    let operations = Unmanaged<AnyObject>.fromOpaque(fuse_req_userdata(request)!).takeUnretainedValue()
    return (FuseRequest(raw: request!), operations as! any FuseOperations)
}

/// The kernel's read-ahead for a mount's files, at most (`XFER_MOUNT_READAHEAD`, for measuring).
private let kernelReadAhead = ProcessInfo.processInfo.environment["XFER_MOUNT_READAHEAD"].flatMap { Int($0) } ?? 1 << 20
