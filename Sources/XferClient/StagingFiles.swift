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
        /// The file's path, for messages.
        var path: String
    }

    /// The directory the files' paths start from.
    let root: ConfinedDirectory
    /// Every file, by index.
    let files: [File]
    /// Descriptors kept open at once (and as many directories).
    let limit: Int

    // Guarded by `lock`: open descriptors and directories, with when each was last used.
    private let lock = NSLock()
    private var descriptors: [Int: (fd: Int32, used: Int)] = [:]
    private var directories: [[String]: (directory: ConfinedDirectory, used: Int)] = [:]
    private var tick = 0

    init(root: ConfinedDirectory, files: [File], limit: Int = 128) {
        self.root = root
        self.files = files
        self.limit = max(1, limit)
    }

    deinit { closeAll() }

    /// Runs `body` with file `index` open for reading and writing. Calls are serialized: a
    /// descriptor is never closed while another thread writes through it.
    func with<T>(_ index: Int, _ body: (Int32) throws -> T) throws -> T {
        try lock.withLock { try body(try descriptor(index)) }
    }

    /// Closes file `index` if it is open.
    func close(_ index: Int) {
        lock.withLock {
            if let open = descriptors.removeValue(forKey: index) { Foundation.close(open.fd) }
        }
    }

    /// Closes every open file and directory.
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
            descriptors[index] = (open.fd, tick)
            return open.fd
        }
        if descriptors.count >= limit, let oldest = descriptors.min(by: { $0.value.used < $1.value.used }) {
            Foundation.close(oldest.value.fd)
            descriptors[oldest.key] = nil
        }
        let file = files[index]
        let fd = try directory(file.directory).openFile(file.name, flags: O_RDWR)
        descriptors[index] = (fd, tick)
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
