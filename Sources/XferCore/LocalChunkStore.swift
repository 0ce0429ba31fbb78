#if canImport(Glibc)
    import Glibc
    import CXferShims
#elseif canImport(Darwin)
    import Darwin
#endif

/// A directory of one file per chunk: the layout of a server's data directory before packs
/// (`DIR/chunks/`, read once by the server's migration into packs), and the home of the stored
/// chunk format every pack entry uses (``fileBytes(_:)``, ``parse(_:id:name:)``).
///
/// One file per chunk at `ROOT/ab/abcd…` (the first two hex digits fan out): a 9-byte header
/// (`XFC1`, encoding, plain length) then the payload (docs/FORMAT.md). Writes are atomic: a
/// temporary file in the same directory, written whole, fdatasync'd, renamed into place, and the
/// directory fsync'd, so a chunk is either absent or complete. Every chunk is verified
/// against its id before it is stored and again whenever it is read.
public final class LocalChunkStore: Sendable {
    /// The store's directory.
    public let root: String
    /// The largest plain chunk accepted.
    public let maximumChunkSize: Int

    static let magic: [UInt8] = Array("XFC1".utf8)
    /// The bytes before a stored chunk's payload: magic, encoding, plain length.
    public static let headerSize = 9
    static let temporaryPrefix = ".tmp-"

    /// Opens (and if needed creates) a store.
    /// - Parameters:
    ///   - root: The directory; created with its parents if missing.
    ///   - maximumChunkSize: Largest plain chunk accepted.
    /// - Throws: `XferError` `io` if the directory cannot be created.
    public init(root: String, maximumChunkSize: Int = ChunkerConfiguration.maximumAllowedSize) throws {
        self.root = root.count > 1 && root.hasSuffix("/") ? String(root.dropLast()) : root
        self.maximumChunkSize = maximumChunkSize
        try FileSystem.makeDirectories(self.root)
    }

    /// The path a chunk is stored at.
    /// - Parameter id: The chunk id.
    /// - Returns: `ROOT/ab/abcd…`.
    public func path(for id: ChunkID) -> String {
        let hex = id.hex
        return "\(root)/\(hex.prefix(2))/\(hex)"
    }

    /// Whether the store has a chunk (without reading or verifying it).
    /// - Parameter id: The chunk id.
    /// - Returns: `true` if a complete chunk file exists.
    public func contains(_ id: ChunkID) -> Bool {
        access(path(for: id), F_OK) == 0
    }

    /// Stores a chunk durably after checking it decodes to bytes that hash to its id.
    /// - Parameter chunk: The encoded chunk.
    /// - Returns: `true` if it was stored, `false` if the store already had it.
    /// - Throws: `corrupt_chunk` or `too_large` for a chunk that fails verification (nothing
    ///   is written); `io` if writing fails (nothing is left behind).
    @discardableResult
    public func put(_ chunk: EncodedChunk) throws -> Bool {
        _ = try chunk.decoded(maximumLength: maximumChunkSize)
        if contains(chunk.id) { return false }
        let destination = path(for: chunk.id)
        try FileSystem.makeDirectories(String(destination[..<destination.lastIndex(of: "/")!]))
        try FileSystem.writeAtomically(Self.fileBytes(chunk), to: destination, durable: true)
        return true
    }

    /// Stores plain bytes, compressed under `policy`.
    /// - Parameters:
    ///   - plain: The chunk's plain bytes.
    ///   - policy: zstd settings.
    /// - Returns: The chunk's id.
    /// - Throws: As ``put(_:)``.
    @discardableResult
    public func put(plain: [UInt8], policy: CompressionPolicy = .default) throws -> ChunkID {
        let id = ChunkID.of(plain)
        try put(try plain.withUnsafeBytes { try Zstd.encode($0, id: id, policy: policy) })
        return id
    }

    /// Reads a chunk as stored, verified.
    /// - Parameter id: The chunk id.
    /// - Returns: The encoded chunk.
    /// - Throws: `not_found`; `corrupt_chunk` if the file is damaged (it is left in place for
    ///   inspection; ``remove(_:)`` deletes it); `io`.
    public func get(_ id: ChunkID) throws -> EncodedChunk {
        try load(id, verify: true).chunk
    }

    /// Reads a chunk as stored, checking only its header: for serving chunks to a receiver
    /// that verifies them itself, without paying for decompression here.
    /// - Parameter id: The chunk id.
    /// - Returns: The encoded chunk.
    /// - Throws: `not_found`; `corrupt_chunk` for a damaged header; `io`.
    public func getUnverified(_ id: ChunkID) throws -> EncodedChunk {
        try load(id, verify: false).chunk
    }

    /// Reads a chunk's plain bytes, verified.
    /// - Parameter id: The chunk id.
    /// - Returns: The plain bytes.
    /// - Throws: As ``get(_:)``.
    public func read(_ id: ChunkID) throws -> [UInt8] {
        try load(id, verify: true).plain
    }

    private func load(_ id: ChunkID, verify: Bool) throws -> (chunk: EncodedChunk, plain: [UInt8]) {
        let file = path(for: id)
        let bytes = try FileSystem.readWhole(file, limit: Self.maximumFileSize(maximumChunkSize))
        let chunk = try Self.parse(bytes[...], id: id, name: "chunk file \(file)")
        guard verify else { return (chunk, []) }
        do {
            return (chunk, try chunk.decoded(maximumLength: maximumChunkSize))
        } catch var error as XferError {
            error.message = "chunk file \(file): \(error.message)"
            throw error
        }
    }

    /// A chunk in the stored format (docs/FORMAT.md): `XFC1`, encoding, plain length, payload.
    /// The same bytes serve as a chunk file here and as an object in S3.
    public static func fileBytes(_ chunk: EncodedChunk) -> [UInt8] {
        var file = magic
        file.reserveCapacity(headerSize + chunk.payload.count)
        file.append(chunk.encoding.rawValue)
        withUnsafeBytes(of: UInt32(chunk.length).littleEndian) { file.append(contentsOf: $0) }
        file.append(contentsOf: chunk.payload)
        return file
    }

    /// Reads the stored format back (header checked, payload not yet verified).
    /// - Throws: `corrupt_chunk` naming `name` if the header is not valid.
    public static func parse(_ bytes: ArraySlice<UInt8>, id: ChunkID, name: String) throws -> EncodedChunk {
        let at = bytes.startIndex
        guard bytes.count >= headerSize, bytes.prefix(4).elementsEqual(magic),
            let encoding = ChunkEncoding(rawValue: bytes[at + 4])
        else {
            throw XferError(.corruptChunk, "\(name) has no valid header")
        }
        let length = Int(bytes[at + 5]) | Int(bytes[at + 6]) << 8 | Int(bytes[at + 7]) << 16 | Int(bytes[at + 8]) << 24
        return EncodedChunk(id: id, length: length, encoding: encoding, payload: Array(bytes[(at + headerSize)...]))
    }

    /// The largest stored form of a chunk of at most `maximumChunkSize` plain bytes.
    public static func maximumFileSize(_ maximumChunkSize: Int) -> Int {
        headerSize + maximumChunkSize + maximumChunkSize / 64 + 1024
    }

    /// Deletes a chunk if present.
    /// - Parameter id: The chunk id.
    /// - Throws: `io` if it exists and cannot be removed.
    public func remove(_ id: ChunkID) throws {
        let file = path(for: id)
        let err = Syscall.unlink(file)
        if err != 0 && err != ENOENT { throw XferError(.io, "cannot remove \(file)", cause: SystemErrno(err)) }
    }

    /// Every chunk id in the store (temporary files excluded), in no particular order.
    /// - Returns: The ids.
    /// - Throws: `io` if a directory cannot be listed.
    public func allIDs() throws -> [ChunkID] {
        var ids: [ChunkID] = []
        for fan in try FileSystem.list(root) where fan.utf8.count == 2 {
            for name in try FileSystem.list("\(root)/\(fan)") {
                if let id = ChunkID(hex: name), name.hasPrefix(fan) { ids.append(id) }
            }
        }
        return ids
    }

    /// A stored chunk, as a listing shows it.
    public struct StoredFile: Sendable, Hashable {
        /// The chunk.
        public var id: ChunkID
        /// The file's size.
        public var bytes: Int64
        /// When it was written (Unix seconds).
        public var modified: Int64

        /// Describes a stored chunk.
        public init(id: ChunkID, bytes: Int64, modified: Int64) {
            self.id = id
            self.bytes = bytes
            self.modified = modified
        }
    }

    /// The chunk files under one fan-out directory (`00` to `ff`), temporary files excluded.
    /// - Parameter fan: The first byte of the ids.
    /// - Returns: The files, in no particular order.
    /// - Throws: `io` if the directory cannot be listed.
    public func files(fan: UInt8) throws -> [StoredFile] {
        let prefix = ChunkID.hexDigits(fan)
        let directory = "\(root)/\(prefix)"
        let names: [String]
        do {
            names = try FileSystem.list(directory)
        } catch let error as XferError where error.code == .notFound {
            return []
        }
        return names.compactMap { name in
            guard name.hasPrefix(prefix), let id = ChunkID(hex: name) else { return nil }
            var info = stat()
            guard lstat("\(directory)/\(name)", &info) == 0 else { return nil }
            return StoredFile(id: id, bytes: Int64(info.st_size), modified: Int64(info.st_mtim.tv_sec))
        }
    }

    /// Puts back chunk files a sweep of an earlier version had set aside (`.gc-ID`) when it
    /// was interrupted (a crash).
    /// - Returns: How many were put back.
    @discardableResult
    public func restoreSweptFiles() throws -> Int {
        var restored = 0
        for fan in try FileSystem.list(root) where fan.utf8.count == 2 {
            for name in try FileSystem.list("\(root)/\(fan)") where name.hasPrefix(Self.trashPrefix) {
                if let id = ChunkID(hex: String(name.dropFirst(Self.trashPrefix.count))) {
                    restore("\(root)/\(fan)/\(name)", to: id)
                    restored += 1
                }
            }
        }
        return restored
    }

    static let trashPrefix = ".gc-"

    /// Renames a file a sweep set aside back, unless the chunk was written anew meanwhile.
    private func restore(_ trash: String, to id: ChunkID) {
        if contains(id) {
            _ = Syscall.unlink(trash)
        } else {
            try? Syscall.renameat(AT_FDCWD, trash, AT_FDCWD, path(for: id), path: path(for: id))
        }
    }

    /// Deletes temporary files a crash left behind (never visible as chunks).
    /// - Returns: How many were removed.
    /// - Throws: `io` if a directory cannot be listed.
    @discardableResult
    public func removeTemporaryFiles() throws -> Int {
        var removed = 0
        for fan in try FileSystem.list(root) where fan.utf8.count == 2 {
            for name in try FileSystem.list("\(root)/\(fan)") where name.hasPrefix(Self.temporaryPrefix) {
                if Syscall.unlink("\(root)/\(fan)/\(name)") == 0 { removed += 1 }
            }
        }
        return removed
    }
}
