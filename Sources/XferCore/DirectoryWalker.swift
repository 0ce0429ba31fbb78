#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What kind of thing a tree entry is.
public enum EntryKind: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// A regular file.
    case file = 1
    /// A directory.
    case directory = 2
    /// A symbolic link (stored, never followed).
    case symlink = 3

    public var description: String {
        switch self {
        case .file: return "file"
        case .directory: return "directory"
        case .symlink: return "symlink"
        }
    }
}

/// One entry of a directory tree, as `lstat` saw it.
public struct TreeEntry: Sendable, Hashable {
    /// Path relative to the root, components joined by "/"; "" for the root itself.
    public var relativePath: String
    /// File, directory or symlink.
    public var kind: EntryKind
    /// Permission bits (`st_mode & 0o7777`).
    public var mode: UInt32
    /// Size in bytes (files) or of the target text (symlinks); 0 for directories.
    public var size: Int64
    /// Modification time in nanoseconds since 1970.
    public var mtimeNanoseconds: Int64
    /// The link's target text, for symlinks.
    public var symlinkTarget: String?

    /// Creates an entry.
    public init(relativePath: String, kind: EntryKind, mode: UInt32, size: Int64, mtimeNanoseconds: Int64,
                symlinkTarget: String? = nil) {
        self.relativePath = relativePath
        self.kind = kind
        self.mode = mode
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.symlinkTarget = symlinkTarget
    }
}

/// Lists a tree without following symlinks, in bytewise path order, so that the same tree
/// always gives the same list (and the same manifest).
public enum DirectoryWalker {
    /// Stats one path.
    /// - Parameter path: An absolute or relative path.
    /// - Returns: The entry, with `relativePath` "".
    /// - Throws: `XferError` `not_found` or `io`.
    public static func entry(at path: String) throws -> TreeEntry {
        guard let entry = try entry(path: path, relativePath: "") else {
            throw XferError(.io, "\(path) is not a file, directory or symlink")
        }
        return entry
    }

    /// Lists every entry under `root` (the root excluded), parents before children.
    /// Entries that are neither files, directories nor symlinks (sockets, devices) are skipped.
    /// - Parameter root: A directory.
    /// - Returns: The entries in bytewise order of their relative paths.
    /// - Throws: `XferError` `not_found` or `io`, naming the path that failed.
    public static func walk(_ root: String) throws -> [TreeEntry] {
        try walk(root, include: { _ in true })
    }

    /// Lists the entries under `root` that `include` accepts; a directory it rejects is not
    /// entered (ignore rules: nothing below an excluded directory can be re-included).
    /// - Parameters:
    ///   - root: A directory.
    ///   - include: Asked about each entry, parents before children; for a directory, just
    ///     before its children are listed (so it may read a rules file inside it).
    /// - Returns: The accepted entries in bytewise order of their relative paths.
    /// - Throws: `XferError` `not_found` or `io`, naming the path that failed, or what `include` throws.
    public static func walk(_ root: String, include: (TreeEntry) throws -> Bool) throws -> [TreeEntry] {
        var result: [TreeEntry] = []
        try walk(root, relative: "", include: include, into: &result)
        return result
    }

    private static func walk(_ directory: String, relative: String, include: (TreeEntry) throws -> Bool,
                             into result: inout [TreeEntry]) throws {
        let names = try FileSystem.list(directory).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        for name in names {
            let path = directory.hasSuffix("/") ? directory + name : directory + "/" + name
            let childRelative = relative.isEmpty ? name : relative + "/" + name
            guard let child = try entry(path: path, relativePath: childRelative), try include(child) else { continue }
            result.append(child)
            if child.kind == .directory {
                try walk(path, relative: childRelative, include: include, into: &result)
            }
        }
    }

    /// - Returns: The entry, or `nil` for a socket, device or fifo.
    static func entry(path: String, relativePath: String) throws -> TreeEntry? {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            let err = errno
            throw XferError(err == ENOENT ? .notFound : .io, "cannot stat \(path)", cause: SystemErrno(err))
        }
        let kind: EntryKind
        var target: String? = nil
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK:
            kind = .symlink
            var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlink(path, &buffer, buffer.count)
            guard n >= 0 else {
                throw XferError(.io, "cannot read link \(path)", cause: SystemErrno(errno))
            }
            target = String(decoding: buffer[..<n], as: UTF8.self)
        default:
            return nil
        }
        #if canImport(Glibc)
        let mtime = Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
        #else
        let mtime = Int64(info.st_mtimespec.tv_sec) * 1_000_000_000 + Int64(info.st_mtimespec.tv_nsec)
        #endif
        return TreeEntry(
            relativePath: relativePath, kind: kind, mode: UInt32(info.st_mode) & 0o7777,
            size: kind == .directory ? 0 : Int64(info.st_size), mtimeNanoseconds: mtime, symlinkTarget: target)
    }
}
