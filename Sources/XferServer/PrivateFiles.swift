import XferCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The data directory's permissions: it and its secrets are the server user's alone.
enum PrivateFiles {
    /// Refuses a directory other users may write to or that another user owns: anyone who can
    /// write there can replace the metadata, the chunks or the admin token.
    /// - Throws: `invalid_configuration` saying what is wrong and the `chmod 700` that fixes it.
    static func checkDirectory(_ directory: String) throws {
        var info = stat()
        guard stat(directory, &info) == 0 else {
            throw XferError(.io, "cannot inspect the data directory \(directory)", cause: SystemErrno(errno))
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw XferError(.invalidConfiguration, "the data directory \(directory) is not a directory")
        }
        let user = geteuid()
        guard info.st_uid == user else {
            throw XferError(
                .invalidConfiguration,
                "the data directory \(directory) belongs to uid \(info.st_uid), not to this user (uid \(user)); run the server as its owner, then chmod 700 \(directory)"
            )
        }
        let mode = info.st_mode & 0o7777
        guard mode & 0o022 == 0 else {
            throw XferError(
                .invalidConfiguration,
                "the data directory \(directory) may be written by other users (mode \(String(mode, radix: 8))); run chmod 700 \(directory)"
            )
        }
    }

    /// Creates `path` empty with mode 0600 if it does not exist, and takes group and other
    /// permissions off it (and off any of `companions`) if it does.
    static func makePrivate(_ path: String, companions: [String] = []) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
        } else if errno != EEXIST {
            throw XferError(.io, "cannot create \(path)", cause: SystemErrno(errno))
        }
        for file in [path] + companions {
            var info = stat()
            if lstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_mode & 0o077 != 0 {
                _ = chmod(file, 0o600)
            }
        }
    }

    /// Writes a secret atomically with mode 0600: a new temporary file (never through a
    /// symlink), written whole, fsynced, renamed over `path`; then the directory is fsynced.
    /// Without `replacing`, `path` itself is created (failing with `EEXIST` if anything is
    /// there, touching nothing else), written and fsynced, and removed again if that fails.
    /// - Throws: `io` naming the file.
    static func writeSecret(_ text: String, to path: String, replacing: Bool = true) throws {
        let target = replacing ? path + ".tmp" : path
        if replacing { unlink(target) }
        let fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw XferError(.io, "cannot write \(target)", cause: SystemErrno(errno)) }
        let bytes = Array(text.utf8)
        var offset = 0
        var failure: Int32 = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                failure = errno
                break
            }
            offset += n
        }
        if failure == 0, fsync(fd) != 0 { failure = errno }
        if close(fd) != 0, failure == 0 { failure = errno }
        if failure == 0, replacing, rename(target, path) != 0 { failure = errno }
        guard failure == 0 else {
            unlink(target)
            throw XferError.writing(failure, "write", path)
        }
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let dfd = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dfd >= 0 {
            _ = fsync(dfd)
            close(dfd)
        }
    }
}
