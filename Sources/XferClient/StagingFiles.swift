import Foundation
import XferCore

/// The files of a pull's staging copy, each opened when it is written and at most ``limit`` of
/// them open at once. A package may hold more files than a process may have open (`ulimit -n`
/// is often 1,024 or 20,000), so a pull never holds a descriptor per file for its whole length;
/// a file closed early is opened again, beneath the staging copy and never through a symlink,
/// when a later chunk or the final fsync needs it.
final class StagingFiles: @unchecked Sendable {
    /// Where one file is: its directory's path below ``root`` and its name there.
    struct File: Sendable {
        var directory: [String]
        var name: String
        /// What the file's path starts with (one string shared by every file of a pull).
        var prefix: String
        /// The rest of its path ("" when `prefix` is the whole of it).
        var relative: String

        /// The file's path, for messages (made when asked: a pull of 200,000 files would
        /// otherwise hold 200,000 absolute paths).
        var path: String { relative.isEmpty ? prefix : prefix + "/" + relative }
    }

    /// The directory the files' paths start from.
    let root: ConfinedDirectory
    /// Every file, by index.
    let files: [File]
    /// Descriptors kept open at once (and as many directories).
    let limit: Int

    // Guarded by `lock`: open descriptors (with when each was last used and how many calls are
    // using it now) and directories; how many chunk writes each file still waits for.
    private let lock = NSLock()
    private var descriptors: [Int: Descriptor] = [:]
    private var directories: [[String]: (directory: ConfinedDirectory, used: Int)] = [:]
    private var remainingWrites: [Int32]  // by file; 0 once written whole, or when not counted
    private var tick = 0

    private struct Descriptor {
        var fd: Int32
        var used: Int
        var users = 0
        /// Closed by its last user (``close(_:)`` was asked while it was in use).
        var closing = false
    }

    /// - Parameter writes: How many chunk writes each file will receive (by index), when known:
    ///   a file's writeback starts once it has had them all (``wrote(_:)``), so the final
    ///   fsync finds little left to write. A file given 0 has no writeback started early.
    init(root: ConfinedDirectory, files: [File], limit: Int = 128, writes: [Int]? = nil) {
        self.root = root
        self.files = files
        self.limit = max(1, limit)
        remainingWrites = writes.map { $0.map { Int32(clamping: $0) } } ?? Array(repeating: 0, count: files.count)
    }

    deinit { closeAll() }

    /// Runs `body` with file `index` open for reading and writing. Calls on different files,
    /// or on the same one, run at once; a descriptor in use is never closed under its user
    /// (eviction passes it over, ``close(_:)`` leaves it to its last user).
    func with<T>(_ index: Int, _ body: (Int32) throws -> T) throws -> T {
        let fd = try lock.withLock { () throws -> Int32 in
            let fd = try descriptor(index)
            descriptors[index]!.users += 1
            return fd
        }
        defer {
            lock.withLock {
                descriptors[index]!.users -= 1
                if descriptors[index]!.users == 0 && descriptors[index]!.closing {
                    Foundation.close(descriptors.removeValue(forKey: index)!.fd)
                }
            }
        }
        return try body(fd)
    }

    /// Notes one chunk write to file `index` done; after its last, asks the kernel to start
    /// writing the file out (`sync_file_range`), which the final fsync then waits on.
    func wrote(_ index: Int) {
        let last = lock.withLock { () -> Bool in
            guard remainingWrites.indices.contains(index), remainingWrites[index] > 0 else { return false }
            remainingWrites[index] -= 1
            return remainingWrites[index] == 0
        }
        if last { _ = try? with(index) { Syscall.startWriteback($0) } }
    }

    /// Closes file `index` once no call is using it.
    func close(_ index: Int) {
        lock.withLock {
            guard let open = descriptors[index] else { return }
            if open.users > 0 {
                descriptors[index]!.closing = true
            } else {
                Foundation.close(descriptors.removeValue(forKey: index)!.fd)
            }
        }
    }

    /// Closes every open file and directory (when no call is using them any more).
    func closeAll() {
        lock.withLock {
            for open in descriptors.values { Foundation.close(open.fd) }
            descriptors = [:]
            directories = [:]
        }
    }

    /// Descriptors open now (for tests).
    var openCount: Int { lock.withLock { descriptors.count } }

    private func descriptor(_ index: Int) throws -> Int32 {
        tick += 1
        if let open = descriptors[index] {
            // One asked to close while in use and wanted again is kept.
            descriptors[index]!.closing = false
            descriptors[index]!.used = tick
            return open.fd
        }
        if descriptors.count >= limit,
           let oldest = descriptors.lazy.filter({ $0.value.users == 0 }).min(by: { $0.value.used < $1.value.used }) {
            Foundation.close(oldest.value.fd)
            descriptors[oldest.key] = nil
        }
        let file = files[index]
        let fd = try directory(file.directory).openFile(file.name, flags: O_RDWR)
        descriptors[index] = Descriptor(fd: fd, used: tick)
        return fd
    }

    private func directory(_ components: [String]) throws -> ConfinedDirectory {
        if components.isEmpty { return root }
        if let open = directories[components] {
            directories[components] = (open.directory, tick)
            return open.directory
        }
        if directories.count >= limit, let oldest = directories.min(by: { $0.value.used < $1.value.used }) {
            directories[oldest.key] = nil  // its descriptor closes when the last user lets go
        }
        let directory = try root.directory(components, create: false)
        directories[components] = (directory, tick)
        return directory
    }
}
