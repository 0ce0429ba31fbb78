#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One input of a ``ChunkPipeline``: a file by path, or bytes in memory.
public enum ChunkInput: Sendable, Hashable {
    /// A regular file, opened and read when the pipeline reaches it.
    case file(String)
    /// Bytes in memory, under a name used in events.
    case bytes(name: String, [UInt8])

    /// The path or name shown in events.
    public var name: String {
        switch self {
        case .file(let path): return path
        case .bytes(let name, _): return name
        }
    }
}

/// Something the pipeline reads from, front to back.
protocol ByteSource: ~Copyable {
    /// The size known before reading (for progress), or `nil`.
    var expectedSize: Int64? { get }
    /// Reads up to `buffer.count` bytes.
    /// - Returns: The number of bytes read; 0 at the end.
    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int
    /// What the file is now (its end having been read), or `nil` for bytes in memory.
    func stampNow() -> FileStamp?
}

/// A file opened read-only; closed when it goes out of scope.
struct FileByteSource: ByteSource, ~Copyable {
    private let descriptor: Int32
    let path: String
    let expectedSize: Int64?

    /// Opens a regular file.
    /// - Throws: `XferError` `io` or `not_found` naming the path and the errno.
    init(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            throw XferError(err == ENOENT ? .notFound : .io, "cannot open \(path)", cause: SystemErrno(err))
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let err = errno
            close(fd)
            throw XferError(.io, "cannot stat \(path)", cause: SystemErrno(err))
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw XferError(.io, "\(path) is not a regular file")
        }
        #if canImport(Glibc)
            _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        #endif
        descriptor = fd
        self.path = path
        expectedSize = Int64(info.st_size)
    }

    deinit { close(descriptor) }

    func stampNow() -> FileStamp? { FileStamp.of(descriptor: descriptor) }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        while true {
            let n = Glibc.read(descriptor, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            let err = errno
            if err == EINTR { continue }
            throw XferError(.io, "cannot read \(path)", cause: SystemErrno(err))
        }
    }
}

/// Bytes in memory, read in pieces like a file.
struct MemoryByteSource: ByteSource {
    let bytes: [UInt8]
    var position = 0
    var expectedSize: Int64? { Int64(bytes.count) }

    func stampNow() -> FileStamp? { nil }

    mutating func read(into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        let n = min(buffer.count, bytes.count - position)
        bytes.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + position, byteCount: n)
        }
        position += n
        return n
    }
}
