import Foundation
import XferCore

/// The files of a pull's staging copy, each opened when it is written and at most ``limit`` of
/// them open at once. A package may hold more files than a process may have open (`ulimit -n`
/// is often 1,024 or 20,000), so a pull never holds a descriptor per file for its whole length;
/// a file closed early is opened again, beneath the staging copy and never through a symlink,
/// when a later chunk or the final fsync needs it.
///
/// A file of a new staging copy can be created by its first write (``init(root:prefix:count:path:limit:writes:creating:whenWritten:)``'s
/// `creating`: exclusively, so a name that appeared meanwhile is an error, never overwritten), and
/// finished by its last (`whenWritten`): a file of a small-file package then costs one open
/// and one close instead of three of each.
final class StagingFiles: @unchecked Sendable {
    /// The directory the files' paths start from.
    let root: ConfinedDirectory
    /// `root`'s own path, for messages.
    let prefix: String
    /// File `index`'s path below `root` ("dir/sub/name"), made when it is opened: read from
    /// the manifest's packed names (a pull of 200,000 files holds no string a file).
    let relativePath: @Sendable (Int) -> String
    /// How many files.
    let count: Int
    /// Descriptors kept open at once (and as many directories).
    let limit: Int

    // Guarded by `lock`: open descriptors (with when each was last used and how many calls are
    // using it now) and directories (by path below `root`); how many chunk writes each file still waits for.
    private let lock = NSCondition()
    private var descriptors: [Int: Descriptor] = [:]
    /// Files being opened now, outside the lock (a caller that wants one of them waits for it).
    private var opening: Set<Int> = []
    private var directories: [Substring: (directory: ConfinedDirectory, used: Int)] = [:]
    private var remainingWrites: [Int32]  // by file; 0 once written whole, or when not counted
    private var toCreate: [Bool]  // by file: not created yet (its first open creates it)
    private var finished: [Bool]  // by file: finished by `whenWritten`, closed for good
    private let whenWritten: (Int, Int32) throws -> Bool
    /// Bytes written to each file since its writeback last started (files being written only).
    private var unflushed: [Int: Int] = [:]
    private var tick = 0

    /// Every this many bytes written to a file, the kernel is asked to start writing it out
    /// (`sync_file_range`) while the pull goes on: a large file's final fsync then waits for
    /// what the disk could not keep up with, not for the whole file, and its dirty pages stay
    /// few. (The kernel's own writeback starts only past a tenth of memory.)
    static let writebackEvery = 16 << 20

    private struct Descriptor {
        var fd: Int32
        var used: Int
        var users = 0
        /// Closed by its last user (``close(_:)`` was asked while it was in use).
        var closing = false
    }

    /// - Parameters:
    ///   - writes: How many chunk writes each file will receive (by index), when known: once a
    ///     file has had them all (``wrote(_:)``), `whenWritten` runs. A file given 0 is not counted.
    ///   - creating: Which files do not exist yet: each is created (`O_EXCL`, mode 0600) by its first open.
    ///   - whenWritten: Runs with a file open after its last counted write. Returns whether the
    ///     file is finished: it is closed then and never opened again (``isFinished(_:)``).
    ///     By default the kernel is asked to start writing the file out (`sync_file_range`),
    ///     which the final fsync then waits on, and the file is not finished.
    init(
        root: ConfinedDirectory, prefix: String, count: Int, path: @escaping @Sendable (Int) -> String,
        limit: Int = 128,
        writes: [Int]? = nil, creating: [Bool]? = nil,
        whenWritten: @escaping (Int, Int32) throws -> Bool = { _, fd in
            Syscall.startWriteback(fd)
            return false
        }
    ) {
        self.root = root
        self.prefix = prefix
        self.relativePath = path
        self.count = count
        self.limit = max(1, limit)
        self.whenWritten = whenWritten
        remainingWrites = writes.map { $0.map { Int32(clamping: $0) } } ?? Array(repeating: 0, count: count)
        toCreate = creating ?? Array(repeating: false, count: count)
        finished = Array(repeating: false, count: count)
    }

    /// Files at these paths below `root`.
    convenience init(
        root: ConfinedDirectory, prefix: String, paths: [String], limit: Int = 128, writes: [Int]? = nil,
        creating: [Bool]? = nil,
        whenWritten: @escaping (Int, Int32) throws -> Bool = { _, fd in
            Syscall.startWriteback(fd)
            return false
        }
    ) {
        self.init(
            root: root, prefix: prefix, count: paths.count, path: { paths[$0] }, limit: limit, writes: writes,
            creating: creating,
            whenWritten: whenWritten)
    }

    /// File `index`'s full path, for messages.
    func path(_ index: Int) -> String { (prefix == "/" ? "" : prefix) + "/" + relativePath(index) }

    deinit { closeAll() }

    /// Runs `body` with file `index` open for reading and writing. Calls on different files,
    /// or on the same one, run at once; a descriptor in use is never closed under its user
    /// (eviction passes it over, ``close(_:)`` leaves it to its last user).
    func with<T>(_ index: Int, _ body: (Int32) throws -> T) throws -> T {
        let fd = try take(index)
        defer { release(index) }
        return try body(fd)
    }

    /// Gives back one use of file `index`'s descriptor, closing it if it was asked to close.
    private func release(_ index: Int) {
        let unused: Int32? = lock.withLock {
            descriptors[index]!.users -= 1
            guard descriptors[index]!.users == 0 && descriptors[index]!.closing else { return nil }
            unflushed[index] = nil
            return descriptors.removeValue(forKey: index)!.fd
        }
        if let unused { Foundation.close(unused) }
    }

    /// Starts file `index`'s writeback if it is open now: a hint, so it opens nothing, never
    /// touches a finished file, and cannot fail the pull.
    private func startWritebackIfOpen(_ index: Int) {
        let fd: Int32? = lock.withLock {
            guard !finished[index], descriptors[index] != nil else { return nil }
            descriptors[index]!.users += 1
            return descriptors[index]!.fd
        }
        guard let fd else { return }
        Syscall.startWriteback(fd)
        release(index)
    }

    /// Notes one chunk write of `bytes` to file `index` done: starts the file's writeback every
    /// ``writebackEvery`` bytes, and after its last write runs `whenWritten` on it (and closes
    /// it if that finished it).
    func wrote(_ index: Int, bytes: Int) throws {
        let (last, flush) = lock.withLock { () -> (Bool, Bool) in
            // Counted while the file stays open (a closed one has no entry: the table is as
            // small as the open files).
            let written = descriptors[index] == nil ? 0 : unflushed[index, default: 0] + bytes
            let flush = written >= Self.writebackEvery
            unflushed[index] = flush || written == 0 ? nil : written
            guard remainingWrites.indices.contains(index), remainingWrites[index] > 0 else { return (false, flush) }
            remainingWrites[index] -= 1
            if remainingWrites[index] == 0 { unflushed[index] = nil }
            return (remainingWrites[index] == 0, flush)
        }
        if flush && !last { startWritebackIfOpen(index) }
        guard last else { return }
        if try with(index, { try whenWritten(index, $0) }) {
            lock.withLock { finished[index] = true }
            close(index)
        }
    }

    /// Whether file `index` was finished by its last write (and is closed for good).
    func isFinished(_ index: Int) -> Bool { lock.withLock { finished[index] } }

    /// Whether every counted write came (none is still awaited).
    var allWritten: Bool { lock.withLock { remainingWrites.allSatisfy { $0 == 0 } } }

    /// Closes file `index` once no call is using it.
    func close(_ index: Int) {
        let unused: Int32? = lock.withLock {
            guard let open = descriptors[index] else { return nil }
            if open.users > 0 {
                descriptors[index]!.closing = true
                return nil
            }
            unflushed[index] = nil
            return descriptors.removeValue(forKey: index)!.fd
        }
        // Outside the lock, as opens are: a close can cost a small file's writeback bookkeeping.
        if let unused { Foundation.close(unused) }
    }

    /// Closes every open file and directory (when no call is using them any more).
    func closeAll() {
        lock.withLock {
            for open in descriptors.values { Foundation.close(open.fd) }
            descriptors = [:]
            unflushed = [:]
            directories = [:]
        }
    }

    /// Descriptors open now (for tests).
    var openCount: Int { lock.withLock { descriptors.count } }

    /// File `index`'s descriptor, taken for one more user; opened (or created, the first time)
    /// if it is not open. The open itself runs outside the lock: creating a file is most of
    /// what a small file costs, and the downloads in flight create theirs at once. One file is
    /// opened by one caller at a time; another that wants it meanwhile waits for that open.
    private func take(_ index: Int) throws -> Int32 {
        lock.lock()
        while opening.contains(index) { lock.wait() }
        if finished[index] {
            lock.unlock()
            throw XferError(.io, "\(path(index)) was opened after it was finished; nothing was published")
        }
        tick += 1
        if descriptors[index] != nil {
            // One asked to close while in use and wanted again is kept.
            descriptors[index]!.closing = false
            descriptors[index]!.used = tick
            descriptors[index]!.users += 1
            let fd = descriptors[index]!.fd
            lock.unlock()
            return fd
        }
        var evicted: Int32? = nil
        if descriptors.count + opening.count >= limit,
            let oldest = descriptors.lazy.filter({ $0.value.users == 0 }).min(by: { $0.value.used < $1.value.used })
        {
            evicted = oldest.value.fd
            descriptors[oldest.key] = nil
            unflushed[oldest.key] = nil
        }
        let relative = relativePath(index)
        let slash = relative.lastIndex(of: "/")
        let directory: ConfinedDirectory
        do {
            directory = try self.directory(slash.map { relative[..<$0] } ?? "")
        } catch {
            lock.unlock()
            if let evicted { Foundation.close(evicted) }
            throw error
        }
        let create = toCreate[index]
        opening.insert(index)
        lock.unlock()

        if let evicted { Foundation.close(evicted) }
        let name = String(slash.map { relative[relative.index(after: $0)...] } ?? relative[...])
        let opened = Result { try directory.openFile(name, flags: O_RDWR | (create ? O_CREAT | O_EXCL : 0)) }

        lock.lock()
        defer {
            opening.remove(index)
            lock.broadcast()
            lock.unlock()
        }
        let fd = try opened.get()
        if create { toCreate[index] = false }
        descriptors[index] = Descriptor(fd: fd, used: tick, users: 1)
        return fd
    }

    /// The directory at `relative` below `root` ("" for `root` itself), opened beneath it.
    private func directory(_ relative: Substring) throws -> ConfinedDirectory {
        if relative.isEmpty { return root }
        if let open = directories[relative] {
            directories[relative] = (open.directory, tick)
            return open.directory
        }
        if directories.count >= limit, let oldest = directories.min(by: { $0.value.used < $1.value.used }) {
            directories[oldest.key] = nil  // its descriptor closes when the last user lets go
        }
        let directory = try root.directory(relative.split(separator: "/"), create: false)
        directories[relative] = (directory, tick)
        return directory
    }
}
