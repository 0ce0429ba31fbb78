import CFuse3
import Glibc

/// One request from the kernel, answered exactly once, now or later, from any thread
/// (libfuse's low-level API allows both). Each reply below ends the request.
public struct FuseRequest: @unchecked Sendable {
    let raw: fuse_req_t

    /// Fails the request with `errno`.
    public func fail(_ errno: Int32) {
        fuse_reply_err(raw, errno)
    }

    /// Answers a lookup: `inode` with its attributes, cached by the kernel for `timeout` seconds.
    public func entry(_ inode: UInt64, _ attributes: stat, timeout: Double) {
        var parameters = Self.entry(inode, attributes, timeout: timeout)
        fuse_reply_entry(raw, &parameters)
    }

    /// An entry's parameters: its inode and attributes, cached for `timeout` seconds.
    private static func entry(_ inode: UInt64, _ attributes: stat, timeout: Double) -> fuse_entry_param {
        var parameters = fuse_entry_param()
        parameters.ino = fuse_ino_t(inode)
        parameters.generation = 1
        parameters.attr = attributes
        parameters.attr_timeout = timeout
        parameters.entry_timeout = timeout
        return parameters
    }

    /// Answers a getattr.
    public func attributes(_ attributes: stat, timeout: Double) {
        var attributes = attributes
        fuse_reply_attr(raw, &attributes, timeout)
    }

    /// Answers a create: the new file's entry and its open handle.
    public func created(
        _ inode: UInt64, _ attributes: stat, timeout: Double, handle: UInt64, _ info: fuse_file_info
    ) {
        var parameters = Self.entry(inode, attributes, timeout: timeout)
        var info = info
        cxfer_fuse_set_fh(&info, handle)
        fuse_reply_create(raw, &parameters, &info)
    }

    /// Answers a write: `count` bytes were written.
    public func written(_ count: Int) {
        fuse_reply_write(raw, count)
    }

    /// Answers a readlink.
    public func link(_ target: String) {
        fuse_reply_readlink(raw, target)
    }

    /// Answers an open or opendir: `handle` is what later calls on it carry; `keepCache` lets
    /// the kernel keep the file's pages from an earlier open (it is told when they go stale).
    public func opened(_ handle: UInt64, _ info: fuse_file_info, keepCache: Bool) {
        var info = info
        cxfer_fuse_set_fh(&info, handle)
        cxfer_fuse_set_keep_cache(&info, keepCache ? 1 : 0)
        fuse_reply_open(raw, &info)
    }

    /// Answers a read with `pieces`, one after another (handed to the kernel as they lie).
    public func data(_ pieces: [ArraySlice<UInt8>]) {
        Self.pinned(
            pieces[...], [],
            { vectors in
                _ = vectors.withUnsafeBufferPointer { fuse_reply_iov(raw, $0.baseAddress, Int32($0.count)) }
            })
    }

    /// Runs `body` with an iovec for each of `pieces`, each pinned while it runs.
    private static func pinned(
        _ pieces: ArraySlice<ArraySlice<UInt8>>, _ vectors: [iovec], _ body: ([iovec]) -> Void
    ) {
        guard let first = pieces.first else { return body(vectors) }
        first.withUnsafeBytes { buffer in
            let vector = iovec(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: buffer.count)
            pinned(pieces.dropFirst(), vectors + [vector], body)
        }
    }

    /// Answers a readdir with the entries from `offset` on that fit in `size` bytes; entry `i`
    /// of `entries` has offset `i + 1`.
    public func directory(
        _ entries: [(name: String, inode: UInt64, mode: UInt32)], offset: Int, size: Int
    ) {
        var buffer = [CChar](repeating: 0, count: size)
        var used = 0
        var index = max(0, offset)
        buffer.withUnsafeMutableBufferPointer { buffer in
            while index < entries.count {
                var attributes = stat()
                attributes.st_ino = UInt(entries[index].inode)
                attributes.st_mode = entries[index].mode
                let needed = fuse_add_direntry(
                    raw, buffer.baseAddress! + used, size - used, entries[index].name, &attributes, off_t(index + 1))
                guard used + needed <= size else { break }
                used += needed
                index += 1
            }
        }
        fuse_reply_buf(raw, buffer, used)
    }

    /// Answers a statfs.
    public func fileSystem(_ statistics: statvfs) {
        var statistics = statistics
        fuse_reply_statfs(raw, &statistics)
    }

    /// Answers a request that takes no reply (forget).
    public func none() {
        fuse_reply_none(raw)
    }
}
