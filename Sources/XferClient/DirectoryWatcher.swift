import Foundation
import Synchronization
import XferCore

/// Watches a directory tree with inotify and reports that something changed in it.
///
/// Every directory gets a watch (new ones as they appear). Events for paths the `ignore`
/// closure rejects (xfer's own staging files, editor swap files, what `.xferignore` files
/// exclude) are dropped, and ignored directories get no watch. A thread reads
/// the inotify descriptor, polling so that ``stop()`` ends it within 100 ms.
final class DirectoryWatcher: Sendable {
    /// One element per batch of events read.
    let events: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation
    private let fd: Int32
    private let root: String
    private let ignore: @Sendable (_ relativePath: String, _ isDirectory: Bool) -> Bool
    private let directories = Mutex<[Int32: String]>([:])
    private let stopped = Mutex(false)
    private let limit: Int?
    /// Directories that could not be watched (the per-user inotify limit, or `limit`), each
    /// with its subtree; changes there are found only by rescans.
    let unwatched = Mutex<[String: String]>([:])

    // inotify(7) masks.
    private static let mask: UInt32 = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800
    private static let isDirectory: UInt32 = 0x4000_0000
    private static let created: UInt32 = 0x100 | 0x80

    /// Starts watching `root`.
    /// - Parameters:
    ///   - root: The directory (absolute).
    ///   - ignore: Whether a path relative to `root` (and whether it is a directory) is ignored.
    /// - Throws: `io` if inotify is unavailable.
    ///   - limit: Watch at most this many directories (`nil`: as many as the kernel allows).
    init(
        root: String, limit: Int? = nil,
        ignore: @escaping @Sendable (_ relativePath: String, _ isDirectory: Bool) -> Bool
    ) throws {
        self.root = root
        self.ignore = ignore
        self.limit = limit
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        fd = inotify_init1(Int32(O_NONBLOCK | O_CLOEXEC))
        guard fd >= 0 else { throw XferError(.io, "cannot start inotify", cause: SystemErrno(errno)) }
        addTree(root)
        let thread = Thread { [self] in self.readLoop() }
        thread.name = "xfer-inotify"
        thread.start()
    }

    /// Stops watching; `events` finishes.
    func stop() {
        stopped.withLock { $0 = true }
    }

    private func addTree(_ path: String) {
        let full = limit.map { limit in directories.withLock { $0.count >= limit } } ?? false
        let wd = full ? -1 : inotify_add_watch(fd, path, Self.mask)
        guard wd >= 0 else {
            // Out of watches (ENOSPC: fs.inotify.max_user_watches): the subtree is left to rescans.
            let reason = full ? "the watch limit given (\(limit!))" : String(cString: strerror(errno))
            if full || errno == ENOSPC || errno == ENOMEM { unwatched.withLock { $0[path] = reason } }
            return
        }
        directories.withLock { $0[wd] = path }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return }
        for name in names {
            var info = stat()
            let child = path + "/" + name
            if lstat(child, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR && !ignore(relative(child), true) {
                addTree(child)
            }
        }
    }

    /// `path` (under `root`) relative to `root`.
    private func relative(_ path: String) -> String {
        path.count > root.count ? String(path.dropFirst(root.count + 1)) : ""
    }

    private func readLoop() {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while !stopped.withLock({ $0 }) {
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { continue }
            var offset = 0
            var relevant = false
            while offset + 16 <= count {
                let wd = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int32.self) }
                let mask = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self) }
                let length = Int(
                    buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self) })
                let nameBytes = buffer[(offset + 16)..<min(count, offset + 16 + length)].prefix { $0 != 0 }
                let name = String(decoding: nameBytes, as: UTF8.self)
                offset += 16 + length
                let parent = directories.withLock { $0[wd] }
                if !name.isEmpty, let parent, ignore(relative(parent + "/" + name), mask & Self.isDirectory != 0) {
                    continue
                }
                relevant = true
                if mask & Self.isDirectory != 0, mask & Self.created != 0, let parent {
                    addTree(parent + "/" + name)
                }
            }
            if relevant { continuation.yield(()) }
        }
        close(fd)
        continuation.finish()
    }
}
