import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The few file system operations xfer's stores need, with errors that name the path and errno.
package enum FileSystem {
    /// `mkdir -p`.
    static func makeDirectories(_ path: String) throws {
        if mkdir(path, 0o755) == 0 || errno == EEXIST { return }
        let err = errno
        if err == ENOENT, let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
            if mkdir(path, 0o755) == 0 || errno == EEXIST { return }
        }
        throw XferError.writing(errno, "create the directory", path)
    }

    /// Writes `bytes` to `path` so that `path` is either unchanged or the new content, even
    /// across a crash: temporary file in the same directory, write all, fdatasync, rename, fsync
    /// the directory. On failure the temporary file is removed.
    ///
    /// With `durable: false` both syncs are skipped, for files whose loss in a crash costs
    /// nothing (a cursor that is only an optimization).
    /// `mode` is the new file's (0600 for a secret: it never exists readable by others).
    package static func writeAtomically(_ bytes: [UInt8], to path: String, durable: Bool = true, mode: mode_t = 0o644)
        throws
    {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        var random = SystemRandomNumberGenerator()
        let temporary =
            "\(directory)/\(LocalChunkStore.temporaryPrefix)\(name.prefix(16)).\(String(random.next(), radix: 36))"
        let fd = Syscall.openat(AT_FDCWD, temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode: mode, path: path)
        guard fd >= 0 else { throw XferError.writing(errno, "create", temporary) }
        do {
            // Every write, fsync and rename goes through the fault seam, keyed by the final path.
            try bytes.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: 0, path: path) }
            if durable { try Syscall.fdatasync(fd, path: path) }
        } catch {
            close(fd)
            _ = Syscall.unlink(temporary)
            throw error
        }
        guard close(fd) == 0 else {
            let err = errno
            _ = Syscall.unlink(temporary)
            throw XferError.writing(err, "write", temporary)
        }
        do {
            try Syscall.renameat(AT_FDCWD, temporary, AT_FDCWD, path, path: path)
        } catch {
            _ = Syscall.unlink(temporary)
            throw error
        }
        if durable { try syncDirectory(directory) }
    }

    /// A secret file's bytes (a key), refused if other users may read it; `nil` if there is no
    /// such file or it cannot be read.
    /// - Parameter what: What the file is, for the error ("the encryption key file").
    /// - Throws: `invalid_configuration` naming its mode.
    package static func readSecret(_ path: String, what: String) throws -> Data? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        guard status.st_mode & 0o077 == 0 else {
            throw XferError(
                .invalidConfiguration,
                "\(what) \(path) may be read by other users (mode \(String(status.st_mode & 0o777, radix: 8))); chmod 600 it"
            )
        }
        return FileManager.default.contents(atPath: path)
    }

    /// Writes a secret (a key, pinned keys, queued saves) atomically with mode 0600 that
    /// ``readSecret(_:what:)`` reads back. `makingDirectory`: its directory, one of the state
    /// directory's, is made (or kept) with mode 0700; otherwise it must exist, and is left as it is.
    package static func writeSecret(_ bytes: [UInt8], to path: String, makingDirectory: Bool = true) throws {
        if makingDirectory, let slash = path.lastIndex(of: "/") {
            let directory = String(path[..<slash])
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            _ = chmod(directory, 0o700)
        }
        try writeAtomically(bytes, to: path, mode: 0o600)
    }

    /// fsyncs a directory so that a rename in it is durable.
    package static func syncDirectory(_ directory: String) throws {
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw XferError.writing(errno, "open", directory) }
        defer { close(fd) }
        try Syscall.fsync(fd, path: directory)
    }

    /// Reads a whole file of at most `limit` bytes.
    static func readWhole(_ path: String, limit: Int) throws -> [UInt8] {
        var source = try FileByteSource(path: path)
        guard let size = source.expectedSize, size <= Int64(limit) else {
            throw XferError(.tooLarge, "\(path) is larger than \(limit) bytes")
        }
        var bytes = [UInt8](repeating: 0, count: Int(size) + 1)
        var filled = 0
        while true {
            let n = try bytes.withUnsafeMutableBytes { raw in
                try source.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[filled...]))
            }
            if n == 0 { break }
            filled += n
            if filled == bytes.count {
                throw XferError(.corruptChunk, "\(path) grew while it was read", cause: ChangedWhileRead())
            }
        }
        bytes.removeLast(bytes.count - filled)
        return bytes
    }

    /// The names in a directory ("." and ".." excluded).
    package static func list(_ directory: String) throws -> [String] {
        guard let handle = opendir(directory) else {
            let err = errno
            throw XferError(err == ENOENT ? .notFound : .io, "cannot list \(directory)", cause: SystemErrno(err))
        }
        defer { closedir(handle) }
        return names(in: handle)
    }

    /// The names an open directory stream holds ("." and ".." excluded).
    package static func names(in handle: OpaquePointer) -> [String] {
        var names: [String] = []
        // A record is only as long as its name: `item.pointee` would copy a whole `dirent` and
        // read past the last record of readdir's buffer. The name is read in place instead.
        let nameOffset = MemoryLayout<dirent>.offset(of: \dirent.d_name)!
        while let item = readdir(handle) {
            let name = String(cString: (UnsafeRawPointer(item) + nameOffset).assumingMemoryBound(to: CChar.self))
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
