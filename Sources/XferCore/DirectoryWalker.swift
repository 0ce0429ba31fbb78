#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What kind of thing a tree entry is.
public enum EntryKind: UInt8, Sendable, Hashable, CustomStringConvertible, BitwiseCopyable {
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
    /// Inode number, as the walk saw it (0 where it was not looked at).
    public var inode: UInt64
    /// Status change time in nanoseconds, as the walk saw it.
    public var ctimeNanoseconds: Int64

    /// Creates an entry.
    public init(
        relativePath: String, kind: EntryKind, mode: UInt32, size: Int64, mtimeNanoseconds: Int64,
        symlinkTarget: String? = nil, inode: UInt64 = 0, ctimeNanoseconds: Int64 = 0
    ) {
        self.relativePath = relativePath
        self.kind = kind
        self.mode = mode
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
        self.symlinkTarget = symlinkTarget
        self.inode = inode
        self.ctimeNanoseconds = ctimeNanoseconds
    }

    /// The stamp the walk saw (for a file: what its chunks are remembered under, and what it
    /// must still be once it has been read). From the same `lstat` as the rest of the entry.
    public var stamp: FileStamp {
        FileStamp(size: size, mtimeNanoseconds: mtimeNanoseconds, inode: inode, ctimeNanoseconds: ctimeNanoseconds)
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
    public static func walk(_ root: String) throws -> TreeEntries {
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
    public static func walk(_ root: String, include: (TreeEntry) throws -> Bool) throws -> TreeEntries {
        var result = TreeEntries()
        try walk(root, relative: "", include: include, into: &result)
        return result
    }

    private static func walk(
        _ directory: String, relative: String, include: (TreeEntry) throws -> Bool,
        into result: inout TreeEntries
    ) throws {
        // Each name is looked at relative to its open directory: the kernel walks one component
        // per file, not the whole path. A directory below the root that became a symlink since
        // its parent was listed is not opened through (O_NOFOLLOW); the root is as named.
        let descriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (relative.isEmpty ? 0 : O_NOFOLLOW))
        guard descriptor >= 0, let handle = fdopendir(descriptor) else {
            let err = errno
            if descriptor >= 0 { close(descriptor) }
            if err == ELOOP && !relative.isEmpty {
                // A directory when its parent was listed, a symlink now: the tree moved under the walk.
                throw XferError(.io, "\(directory) became a symlink as the tree was walked", cause: ChangedWhileRead())
            }
            throw XferError(err == ENOENT ? .notFound : .io, "cannot list \(directory)", cause: SystemErrno(err))
        }
        var children: [TreeEntry] = []
        do {
            defer { closedir(handle) }
            let names = FileSystem.names(in: handle).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for name in names {
                let childRelative = relative.isEmpty ? name : relative + "/" + name
                if let child = try entry(
                    in: dirfd(handle), name: name, directory: directory, relativePath: childRelative)
                {
                    children.append(child)
                }
            }
        }
        // The directory is closed before its subdirectories are walked: a deep tree holds one
        // descriptor at a time.
        for child in children {
            guard try include(child) else { continue }
            result.append(child)
            if child.kind == .directory {
                let path = directory.hasSuffix("/") ? directory + child.name : directory + "/" + child.name
                try walk(path, relative: child.relativePath, include: include, into: &result)
            }
        }
    }

    /// - Returns: The entry, or `nil` for a socket, device or fifo.
    static func entry(path: String, relativePath: String) throws -> TreeEntry? {
        try entry(in: AT_FDCWD, name: path, directory: nil, relativePath: relativePath)
    }

    /// The entry `name` of the open directory `descriptor` (`AT_FDCWD`: `name` is a path).
    /// - Parameter directory: The directory's path, for errors (`nil`: `name` is the whole path).
    /// - Returns: The entry, or `nil` for a socket, device or fifo.
    static func entry(in descriptor: Int32, name: String, directory: String?, relativePath: String) throws -> TreeEntry?
    {
        func path() -> String { directory.map { $0.hasSuffix("/") ? $0 + name : $0 + "/" + name } ?? name }
        var info = stat()
        guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
            let err = errno
            throw XferError(err == ENOENT ? .notFound : .io, "cannot stat \(path())", cause: SystemErrno(err))
        }
        let kind: EntryKind
        var target: String? = nil
        switch info.st_mode & S_IFMT {
        case S_IFREG: kind = .file
        case S_IFDIR: kind = .directory
        case S_IFLNK:
            kind = .symlink
            var buffer = [UInt8](repeating: 0, count: Int(PATH_MAX) + 1)
            let n = readlinkat(descriptor, name, &buffer, buffer.count)
            guard n >= 0 else {
                throw XferError(.io, "cannot read link \(path())", cause: SystemErrno(errno))
            }
            target = String(decoding: buffer[..<n], as: UTF8.self)
        default:
            return nil
        }
        let stamp = FileStamp(info)
        return TreeEntry(
            relativePath: relativePath, kind: kind, mode: UInt32(info.st_mode) & 0o7777,
            size: kind == .directory ? 0 : stamp.size, mtimeNanoseconds: stamp.mtimeNanoseconds, symlinkTarget: target,
            inode: stamp.inode, ctimeNanoseconds: stamp.ctimeNanoseconds)
    }
}

extension TreeEntry {
    /// The last component of the path.
    var name: String {
        guard let slash = relativePath.utf8.lastIndex(of: UInt8(ascii: "/")) else { return relativePath }
        return String(relativePath[relativePath.utf8.index(after: slash)...])
    }
}
