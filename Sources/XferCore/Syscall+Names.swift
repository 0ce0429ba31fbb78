import CXferShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The calls that create, remove or change a name or its attributes, through the same fault
/// seam as ``Syscall``'s writes. `path` names what is changed, for messages and armed faults.
extension Syscall {
    /// `openat` retried on `EINTR`. An open that may create or write (`O_CREAT`, `O_WRONLY`,
    /// `O_RDWR`) meets ``StorageFaults/Operation/open`` faults; a read-only one never does.
    /// - Returns: The descriptor, or `-1` with `errno` set (the caller says what it was doing).
    package static func openat(_ fd: Int32, _ name: String, _ flags: Int32, mode: mode_t = 0, path: String) -> Int32 {
        if flags & (O_CREAT | O_WRONLY | O_RDWR) != 0, case .fail(let err)? = StorageFaults.take(.open, path: path) {
            errno = err
            return -1
        }
        while true {
            let opened = Glibc.openat(fd, name, flags, mode)
            if opened < 0 && errno == EINTR { continue }
            return opened
        }
    }

    /// Opens the directory `relative` below `fd` in one call, never leaving it or following a
    /// symlink (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`).
    /// - Returns: The descriptor, or `-1` with `errno` set (`ENOSYS` where the kernel lacks it).
    package static func openBeneath(_ fd: Int32, _ relative: String, _ flags: Int32) -> Int32 {
        cxfer_open_beneath(fd, relative, flags, 0)
    }

    /// `unlinkat` (fault: ``StorageFaults/Operation/remove``); `directory` removes an empty directory.
    /// - Returns: 0, or the errno it failed with (`ENOENT`, `ENOTEMPTY`: the caller decides).
    package static func unlinkat(_ fd: Int32, _ name: String, directory: Bool = false, path: String) -> Int32 {
        if case .fail(let err)? = StorageFaults.take(.remove, path: path) { return err }
        return Glibc.unlinkat(fd, name, directory ? AT_REMOVEDIR : 0) == 0 ? 0 : errno
    }

    /// `unlink` of a path (fault: ``StorageFaults/Operation/remove``).
    /// - Returns: 0, or the errno it failed with.
    package static func unlink(_ path: String) -> Int32 {
        unlinkat(AT_FDCWD, path, path: path)
    }

    /// `symlinkat` (fault: ``StorageFaults/Operation/link``).
    package static func symlinkat(_ target: String, _ fd: Int32, _ name: String, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.link, path: path) {
            throw XferError.writing(err, "create the symlink", path)
        }
        guard Glibc.symlinkat(target, fd, name) == 0 else { throw XferError.writing(errno, "create the symlink", path) }
    }

    /// `fchmod` (fault: ``StorageFaults/Operation/attributes``).
    package static func fchmod(_ fd: Int32, _ mode: mode_t, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.attributes, path: path) {
            throw XferError.writing(err, "set the mode of", path)
        }
        guard Glibc.fchmod(fd, mode) == 0 else { throw XferError.writing(errno, "set the mode of", path) }
    }

    /// Sets the access and modification times of `name` under `fd` (a symlink itself), or of
    /// `fd` when `name` is `nil` (fault: ``StorageFaults/Operation/attributes``).
    package static func setTimes(_ fd: Int32, _ name: String?, to time: timespec, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.attributes, path: path) {
            throw XferError.writing(err, "set the modification time of", path)
        }
        var times = [time, time]
        let result = times.withUnsafeMutableBufferPointer { pointer in
            if let name { return utimensat(fd, name, pointer.baseAddress, AT_SYMLINK_NOFOLLOW) }
            return futimens(fd, pointer.baseAddress)
        }
        guard result == 0 else { throw XferError.writing(errno, "set the modification time of", path) }
    }

    /// `ftruncate`: sets a file's size, writing no data (fault: ``StorageFaults/Operation/attributes``).
    package static func ftruncate(_ fd: Int32, to length: Int64, path: String) throws {
        if case .fail(let err)? = StorageFaults.take(.attributes, path: path) {
            throw XferError.writing(err, "set the size of", path)
        }
        while Glibc.ftruncate(fd, off_t(length)) != 0 {
            if errno == EINTR { continue }
            throw XferError.writing(errno, "set the size of", path)
        }
    }
}
