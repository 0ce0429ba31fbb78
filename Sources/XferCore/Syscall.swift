import CXferShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The write-side system calls of client and server, each retried on `EINTR`, each failing with
/// a typed ``XferError`` (`storage_full` for a full disk, `io` with the ``SystemErrno`` cause
/// otherwise), and each a fault seam: a test arms ``StorageFaults`` and the call meets the fault
/// instead of the kernel's answer (as swift-nio's `_NIOFileSystem` mocks its syscalls).
///
/// `path` names what is written, for the message and for matching armed faults.
package enum Syscall {
    /// The wall clock (CLOCK_REALTIME) in nanoseconds since 1970: what records of when a
    /// thing was last used or written are ordered by.
    package static func wallClockNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Reads into all of `buffer` from `offset`, stopping early only at the end of the file.
    /// - Returns: Bytes read (less than `buffer.count` at the end of the file).
    package static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String)
        throws -> Int
    {
        var done = 0
        while done < buffer.count {
            let n = Glibc.pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw XferError(.io, "cannot read \(path)", cause: SystemErrno(errno)) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset` (fault: ``StorageFaults/Operation/write``).
    package static func pwrite(
        _ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String,
        whenFull advice: String = "free some disk space and retry"
    ) throws {
        var limit = bytes.count
        var failure: Int32? = nil
        switch StorageFaults.take(.write, path: path) {
        case .fail(let err)?: throw XferError.writing(err, "write", path, whenFull: advice)
        case .shortWrite(let count, let err)?: (limit, failure) = (min(count, bytes.count), err)
        case nil: break
        }
        var done = 0
        while done < limit {
            let n = Glibc.pwrite(fd, bytes.baseAddress! + done, limit - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw XferError.writing(errno, "write", path, whenFull: advice) }
            done += n
        }
        if let failure, limit < bytes.count { throw XferError.writing(failure, "write", path, whenFull: advice) }
    }

    /// Writes `pieces` one after another from `offset`, as one `pwritev` (repeated from where a
    /// short write stopped). With faults armed, each piece is written by ``pwrite(_:_:at:path:whenFull:)``,
    /// so a test's fault meets the same writes either way.
    package static func pwrite(
        _ fd: Int32, _ pieces: [UnsafeRawBufferPointer], at offset: Int64, path: String,
        whenFull advice: String = "free some disk space and retry"
    ) throws {
        guard pieces.count > 1, !StorageFaults.isArmed else {
            var at = offset
            for piece in pieces {
                try pwrite(fd, piece, at: at, path: path, whenFull: advice)
                at += Int64(piece.count)
            }
            return
        }
        var vectors = pieces.map {
            iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count)
        }
        var first = 0
        var done = 0
        let total = pieces.reduce(0) { $0 + $1.count }
        while done < total {
            let n = vectors[first...].withUnsafeBufferPointer {
                Glibc.pwritev(fd, $0.baseAddress, Int32($0.count), off_t(offset) + off_t(done))
            }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw XferError.writing(errno, "write", path, whenFull: advice) }
            done += n
            var left = n
            while left > 0 && left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base += left
                vectors[first].iov_len -= left
            }
        }
    }

    /// Makes a file's (or directory's) writes durable (fault: ``StorageFaults/Operation/fsync``).
    package static func fsync(_ fd: Int32, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.fsync, path: path) { throw XferError.writing(err, "fsync", path) }
        while Glibc.fsync(fd) != 0 {
            if errno == EINTR { continue }
            throw XferError.writing(errno, "fsync", path)
        }
    }

    /// Makes everything written to the file system holding `fd` durable (`syncfs`): one call
    /// instead of an fsync per file when a pull stages many files. It also flushes what other
    /// programs have dirty on that file system. Injected faults are the `fsync` ones.
    package static func syncfs(_ fd: Int32, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.fsync, path: path) {
            throw XferError.writing(err, "syncfs", path)
        }
        while cxfer_syncfs(fd) != 0 {
            if errno == EINTR { continue }
            throw XferError.writing(errno, "syncfs", path)
        }
    }

    /// Asks the kernel to start writing a file's dirty pages out now, without waiting
    /// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`): a hint that lets the disk work while the
    /// caller goes on, so a later fsync has little left. Durability still comes from that
    /// fsync alone; a failure here changes nothing and is not reported.
    package static func startWriteback(_ fd: Int32) {
        _ = cxfer_start_writeback(fd)
    }

    /// Writes out what is dirty on the file system holding `fd` (`syncfs`) ahead of a `syncfs`
    /// of the caller's that makes it durable.
    /// - Returns: 0, or the errno it failed with, for the caller to report with its own
    ///   `syncfs`: some errors (those of the file system's own metadata on its block device)
    ///   are reported to the first `syncfs` that meets them only.
    package static func startFileSystemWriteback(_ fd: Int32) -> Int32 {
        while cxfer_syncfs(fd) != 0 {
            if errno == EINTR { continue }
            return errno
        }
        return 0
    }

    /// Makes a file's data and size durable, not its other metadata (fault: ``StorageFaults/Operation/fsync``):
    /// what a newly written file needs before it is renamed into place.
    package static func fdatasync(_ fd: Int32, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.fsync, path: path) { throw XferError.writing(err, "fsync", path) }
        while Glibc.fdatasync(fd) != 0 {
            if errno == EINTR { continue }
            throw XferError.writing(errno, "fsync", path)
        }
    }

    /// `renameat` (fault: ``StorageFaults/Operation/rename``); `path` names the destination.
    package static func renameat(_ fromFD: Int32, _ from: String, _ toFD: Int32, _ to: String, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.rename, path: path) {
            throw XferError.writing(err, "rename into", path)
        }
        guard Glibc.renameat(fromFD, from, toFD, to) == 0 else { throw XferError.writing(errno, "rename into", path) }
    }

    /// `renameat2(RENAME_EXCHANGE)` (fault: ``StorageFaults/Operation/rename``).
    /// - Returns: `false` where the file system cannot exchange (the caller falls back).
    package static func exchange(_ fromFD: Int32, _ from: String, _ toFD: Int32, _ to: String, path: String) throws
        -> Bool
    {
        if case .fail(let err)? = StorageFaults.take(.rename, path: path) {
            throw XferError.writing(err, "exchange", path)
        }
        if cxfer_exchange_at(fromFD, from, toFD, to) == 0 { return true }
        let err = errno
        if err == ENOSYS || err == EINVAL || err == ENOTSUP { return false }
        throw XferError.writing(err, "exchange", path)
    }

    /// `linkat` without following a symlink (fault: ``StorageFaults/Operation/link``).
    package static func linkat(_ fromFD: Int32, _ from: String, _ toFD: Int32, _ to: String, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.link, path: path) { throw XferError.writing(err, "link", path) }
        guard Glibc.linkat(fromFD, from, toFD, to, 0) == 0 else { throw XferError.writing(errno, "link", path) }
    }

    /// `mkdirat` (fault: ``StorageFaults/Operation/mkdir``).
    /// - Returns: `false` if the name exists (the caller decides whether that is fine).
    package static func mkdirat(_ fd: Int32, _ name: String, mode: mode_t, path: String) throws -> Bool {
        if case .fail(let err)? = StorageFaults.take(.mkdir, path: path) {
            throw XferError.writing(err, "create the directory", path)
        }
        if Glibc.mkdirat(fd, name, mode) == 0 { return true }
        if errno == EEXIST { return false }
        throw XferError.writing(errno, "create the directory", path)
    }
}
