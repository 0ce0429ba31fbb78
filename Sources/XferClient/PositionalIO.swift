#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import XferCore

/// `pread`/`pwrite` until done, retrying on EINTR: the one place push and pull touch file bytes.
enum PositionalIO {
    /// Reads into all of `buffer` from `offset`, stopping early only at the end of the file.
    /// - Returns: Bytes read (less than `buffer.count` at the end of the file).
    /// - Throws: `io` naming `path` if the read fails.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, path: String) throws -> Int {
        var done = 0
        while done < buffer.count {
            let n = pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw XferError(.io, "cannot read \(path)", cause: SystemErrno(errno)) }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset`.
    /// - Throws: `io` naming `path`; a full disk says so.
    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int64, path: String) throws {
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let err = errno
                throw XferError.writing(err, "write", path, whenFull: "free some disk space and retry (what arrived is kept)")
            }
            done += n
        }
    }
}
