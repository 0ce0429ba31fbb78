import NIOPosix
import XferCore

#if canImport(Glibc)
    import Glibc
#endif

/// A pack as its storage lists it.
public struct PackObject: Sendable, Hashable {
    /// The pack's name (32 hex digits).
    public var name: String
    /// Its size in bytes.
    public var size: Int64
    /// When it was written, in Unix seconds.
    public var modified: Int64

    /// Creates a listing entry.
    public init(name: String, size: Int64, modified: Int64) {
        self.name = name
        self.size = size
        self.modified = modified
    }
}

/// Where a ``PackedChunkStore`` keeps its packs: named, immutable blobs. A pack is written once
/// under a name never used before, read by ranges, and deleted whole; nothing is ever changed
/// in place, so the storage needs no locking and a crash leaves a pack either absent or whole.
public protocol PackStorage: Sendable {
    /// Writes a pack and returns once it is durable.
    /// - Throws: `io` or `storage_full`; nothing named `name` is then visible.
    func put(_ name: String, _ bytes: [UInt8]) async throws
    /// Bytes `range` of a pack, or `nil` if there is no such pack.
    func get(_ name: String, range: Range<Int64>) async throws -> [UInt8]?
    /// A whole pack of at most `limit` bytes, or `nil` if there is no such pack.
    func get(_ name: String, limit: Int) async throws -> [UInt8]?
    /// Deletes a pack (a missing one is not an error).
    func delete(_ name: String) async throws
    /// Every pack.
    func list() async throws -> [PackObject]
    /// Requests worth keeping in flight at once.
    var concurrency: Int { get }
}

/// Packs as files in the server's data directory, `ROOT/ab/abcd…` (the first two hex digits of
/// the name fan out). A pack is written to a temporary file beside its place, made durable with
/// its own `fdatasync`, renamed into place and the directory fsync'd: an upload waits for its
/// own bytes only, never for whatever else the machine is writing (as a `syncfs` would), and a
/// terabyte is about 250,000 files rather than 14 million.
public struct FilePackStorage: PackStorage {
    /// The directory.
    public let root: String
    private let threadPool: NIOThreadPool

    /// Packs written or fsync'd at once: enough to overlap one pack's fsync with the next
    /// one's writes.
    public var concurrency: Int { 4 }

    /// Opens (and if needed creates, mode 0700) the directory and its 256 fan-out directories,
    /// and removes the temporary files of writes a crash interrupted.
    /// - Throws: `io` if the directories cannot be created.
    public init(root: String, threadPool: NIOThreadPool = .singleton) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.threadPool = threadPool
        try Self.prepare(self.root)
    }

    private static func prepare(_ root: String) throws {
        var created = false
        if mkdir(root, 0o700) == 0 {
            created = true
        } else if errno != EEXIST {
            throw XferError.writing(errno, "create the directory", root)
        }
        for fan in 0...255 {
            let directory = "\(root)/\(ChunkID.hexDigits(UInt8(fan)))"
            if mkdir(directory, 0o700) == 0 {
                created = true
            } else if errno != EEXIST {
                throw XferError.writing(errno, "create the directory", directory)
            } else {
                for name in try FileSystem.list(directory) where name.hasPrefix(".") {
                    unlink("\(directory)/\(name)")
                }
            }
        }
        // New directories are durable before any pack is renamed into one.
        if created { try FileSystem.syncDirectory(root) }
    }

    /// A pack's path.
    public func path(_ name: String) -> String { "\(root)/\(name.prefix(2))/\(name)" }

    public func put(_ name: String, _ bytes: [UInt8]) async throws {
        try Self.check(name)
        let path = path(name)
        try await threadPool.runIfActive { try FileSystem.writeAtomically(bytes, to: path, durable: true) }
    }

    public func get(_ name: String, range: Range<Int64>) async throws -> [UInt8]? {
        try Self.check(name)
        let path = path(name)
        return try await threadPool.runIfActive { try Self.read(path, range: range) }
    }

    public func get(_ name: String, limit: Int) async throws -> [UInt8]? {
        try Self.check(name)
        let path = path(name)
        return try await threadPool.runIfActive {
            var info = stat()
            guard stat(path, &info) == 0 else {
                if errno == ENOENT { return nil }
                throw XferError(.io, "cannot read \(path)", cause: SystemErrno(errno))
            }
            guard Int64(info.st_size) <= Int64(limit) else {
                throw XferError(.corruptChunk, "\(path) is \(info.st_size) bytes, over the \(limit) a pack may be")
            }
            return try Self.read(path, range: 0..<Int64(info.st_size))
        }
    }

    public func delete(_ name: String) async throws {
        try Self.check(name)
        let path = path(name)
        try await threadPool.runIfActive {
            // A removal lost to a crash leaves a pack no location names: a later compaction
            // deletes it again, so the directory needs no fsync.
            guard unlink(path) == 0 || errno == ENOENT else { throw XferError.writing(errno, "remove", path) }
        }
    }

    public func list() async throws -> [PackObject] {
        let root = root
        return try await threadPool.runIfActive {
            var objects: [PackObject] = []
            for fan in 0...255 {
                let directory = "\(root)/\(ChunkID.hexDigits(UInt8(fan)))"
                for name in try FileSystem.list(directory) where !name.hasPrefix(".") {
                    var info = stat()
                    guard lstat("\(directory)/\(name)", &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                        continue
                    }
                    objects.append(
                        PackObject(name: name, size: Int64(info.st_size), modified: Int64(info.st_mtim.tv_sec)))
                }
            }
            return objects
        }
    }

    /// Pack names are the store's own (hex digits): anything else is refused before it becomes a path.
    private static func check(_ name: String) throws {
        guard name.utf8.count >= 2, name.utf8.count <= 64,
            name.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else {
            throw XferError(.internal, "\"\(name)\" is not a pack name")
        }
    }

    private static func read(_ path: String, range: Range<Int64>) throws -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return nil }
            throw XferError(.io, "cannot open \(path)", cause: SystemErrno(errno))
        }
        defer { close(fd) }
        // Read into memory not zeroed first (a restore reads hundreds of megabytes this way). A
        // short read means the range runs past the end: the caller checks entries' lengths.
        return try [UInt8](unsafeUninitializedCapacity: Int(range.count)) { buffer, initialized in
            initialized = 0
            initialized = try Syscall.pread(
                fd, into: UnsafeMutableRawBufferPointer(buffer), at: range.lowerBound, path: path)
        }
    }
}
