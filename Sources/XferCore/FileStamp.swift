#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a file looked like when its chunks were last computed: if all four still match,
/// the file is unchanged and is not read again.
public struct FileStamp: Sendable, Hashable {
    /// Size in bytes.
    public var size: Int64
    /// Modification time, nanoseconds.
    public var mtimeNanoseconds: Int64
    /// Inode number.
    public var inode: UInt64
    /// Status change time, nanoseconds (catches edits that restore the mtime).
    public var ctimeNanoseconds: Int64

    /// Creates a stamp.
    public init(size: Int64, mtimeNanoseconds: Int64, inode: UInt64, ctimeNanoseconds: Int64) {
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.inode = inode
        self.ctimeNanoseconds = ctimeNanoseconds
    }

    /// The stamp of a path (lstat), or `nil` if it does not exist.
    public static func of(_ path: String) -> FileStamp? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return FileStamp(info)
    }

    /// The stamp of an open file (fstat), or `nil` if it cannot be read.
    public static func of(descriptor: Int32) -> FileStamp? {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return FileStamp(info)
    }

    /// The stamp of what `lstat` or `fstat` returned.
    public init(_ info: stat) {
        #if canImport(Glibc)
            self.init(
                size: Int64(info.st_size),
                mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                inode: UInt64(info.st_ino),
                ctimeNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
        #else
            self.init(
                size: Int64(info.st_size),
                mtimeNanoseconds: Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec),
                inode: UInt64(info.st_ino),
                ctimeNanoseconds: Int64(info.st_ctimespec.tv_sec) * 1_000_000_000 + Int64(info.st_ctimespec.tv_nsec))
        #endif
    }

    /// A compact text form (how the sync state compares a synced file's stamp in bulk).
    public var text: String { "\(size):\(mtimeNanoseconds):\(inode):\(ctimeNanoseconds)" }
}
