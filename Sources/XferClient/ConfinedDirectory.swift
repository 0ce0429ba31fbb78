import Foundation
import XferCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A directory opened once, beneath which every change a pull, sync, evict or trash makes goes
/// through its descriptor: the one confined writer of the client (docs/SECURITY.md).
///
/// Every name below it is resolved from the descriptor without following any symlink
/// (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it, otherwise
/// one `openat(O_NOFOLLOW | O_DIRECTORY)` per component), and every operation on a final name
/// (`mkdirat`, `symlinkat`, `unlinkat`, `renameat`, `utimensat`) takes a single component
/// relative to an opened directory. So whatever a server sends and whatever sits on disk, no
/// write lands outside the directory, and a directory swapped for a symlink while a pull runs
/// is never traversed: the writes already under way keep going to the directory that was opened.
///
/// Only the directory's own path is resolved the ordinary way: it is the user's choice.
public final class ConfinedDirectory: Sendable {
    /// The directory's path, for messages only; it is never resolved again.
    public let path: String
    /// The open descriptor (`O_RDONLY | O_DIRECTORY`), closed with the object.
    let fd: Int32

    /// Opens a directory the user named (symlinks in `path` itself are followed: the user chose it).
    /// - Parameters:
    ///   - path: The directory.
    ///   - create: Create it and its missing parents first (mode 0755).
    /// - Throws: `not_found` if it does not exist (and `create` is false), `io` otherwise.
    public init(opening path: String, create: Bool = false) throws {
        if create {
            do {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            } catch {
                throw XferError(.io, "cannot create the directory \(path)", cause: DescribedError(error))
            }
        }
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let err = errno
            throw XferError(
                err == ENOENT ? .notFound : .io, "cannot open the directory \(path)", cause: SystemErrno(err))
        }
        self.fd = fd
        self.path = path
    }

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// The path of `name` below this directory, for messages.
    public func describe(_ name: String) -> String { Self.path(of: name, in: path) }

    /// The path of `name` in the directory at `directory`.
    static func path(of name: String, in directory: String) -> String {
        directory == "/" ? "/" + name : directory + "/" + name
    }

    // MARK: Resolving

    /// Opens the directory at `components` below this one, never following a symlink.
    /// - Parameters:
    ///   - components: Names, each one component (no `/`, not empty, `.` or `..`); empty: this directory again.
    ///   - create: Create missing directories (mode 0755).
    /// - Returns: The opened directory.
    /// - Throws: `conflict` if a component is a symlink or not a directory (xfer never writes
    ///   through one), `not_found` if one is missing and `create` is false, `io` otherwise.
    public func directory(_ components: some Collection<some StringProtocol>, create: Bool) throws -> ConfinedDirectory
    {
        let names = try components.map { try Self.checkedName(String($0)) }
        var described = path
        for name in names { described += (described == "/" ? "" : "/") + name }
        if names.isEmpty {
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            try Self.check(copy, "open", path)
            return ConfinedDirectory(fd: copy, path: path)
        }
        // One system call for the whole walk where the kernel has openat2.
        let joined = names.joined(separator: "/")
        let fast = Syscall.openBeneath(fd, joined, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
        if fast >= 0 { return ConfinedDirectory(fd: fast, path: described) }
        let err = errno
        if err != ENOSYS && err != EPERM && err != E2BIG && !(err == ENOENT && create) {
            if err == ENOENT { throw XferError(.notFound, "\(described) does not exist", cause: SystemErrno(err)) }
            if err != ELOOP && err != ENOTDIR && err != EXDEV {
                throw XferError(.io, "cannot open the directory \(described)", cause: SystemErrno(err))
            }
        }
        // Component by component: the fallback, and the way missing directories are made.
        var current = try directory([String](), create: false)
        for name in names {
            current = try current.child(name, create: create)
        }
        return current
    }

    /// Opens one subdirectory, creating it if asked.
    private func child(_ name: String, create: Bool) throws -> ConfinedDirectory {
        for _ in 0..<2 {
            let opened = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW)
            if opened >= 0 { return ConfinedDirectory(fd: opened, path: describe(name)) }
            let err = errno
            switch err {
            case ENOENT where create:
                _ = try Syscall.mkdirat(fd, name, mode: 0o755, path: describe(name))
            case ENOENT:
                throw XferError(.notFound, "\(describe(name)) does not exist", cause: SystemErrno(err))
            case ELOOP, ENOTDIR:
                throw Self.notADirectory(describe(name), kind: kind(name))
            default:
                throw XferError(.io, "cannot open the directory \(describe(name))", cause: SystemErrno(err))
            }
        }
        throw XferError(.io, "cannot open the directory \(describe(name)): it keeps changing")
    }

    static func notADirectory(_ path: String, kind: mode_t?) -> XferError {
        let what = kind == S_IFLNK ? "a symlink" : "not a directory"
        return XferError(.conflict, "\(path) is \(what); xfer never writes through it, so nothing was written below it")
    }

    /// The file type (`S_IFDIR`, `S_IFREG`, `S_IFLNK`, …) of `name`, not following a symlink; `nil` if absent.
    public func kind(_ name: String) -> mode_t? {
        status(name).map { $0.st_mode & S_IFMT }
    }

    /// `fstatat` of `name` without following a symlink; `nil` if absent or unreadable.
    func status(_ name: String) -> stat? {
        var info = stat()
        return fstatat(fd, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    /// The names in this directory ("." and ".." excluded).
    public func names() throws -> [String] {
        let copy = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try Self.check(copy, "list", path)
        guard let handle = fdopendir(copy) else {
            let err = errno
            close(copy)
            throw XferError(.io, "cannot list \(path)", cause: SystemErrno(err))
        }
        defer { closedir(handle) }
        return FileSystem.names(in: handle)
    }

    // MARK: Changing

    /// Opens (or creates) a regular file, never through a symlink.
    /// - Returns: The descriptor; the caller closes it.
    public func openFile(_ name: String, flags: Int32, mode: mode_t = 0o600) throws -> Int32 {
        let fd = Syscall.openat(
            self.fd, try Self.checkedName(name), flags | O_CLOEXEC | O_NOFOLLOW, mode: mode, path: describe(name))
        try Self.check(fd, "open", describe(name))
        return fd
    }

    /// Creates a subdirectory; an existing directory of that name is kept.
    public func makeDirectory(_ name: String, mode: mode_t = 0o755) throws {
        if try Syscall.mkdirat(fd, try Self.checkedName(name), mode: mode, path: describe(name))
            || kind(name) == S_IFDIR
        {
            return
        }
        throw XferError(
            .io, "cannot create the directory \(describe(name)): something else has that name",
            cause: SystemErrno(EEXIST))
    }

    /// Creates a symlink named `name` holding `target` (never followed here).
    public func makeSymlink(_ name: String, target: String) throws {
        try Syscall.symlinkat(target, fd, try Self.checkedName(name), path: describe(name))
    }

    /// Removes `name` whatever it is; a directory with everything in it, every level opened
    /// without following a symlink. Absent is fine.
    public func remove(_ name: String) throws {
        let name = try Self.checkedName(name)
        guard let type = kind(name) else { return }
        if type == S_IFDIR {
            let child = try directory([name], create: false)
            for inner in try child.names() { try child.remove(inner) }
            try removed(Syscall.unlinkat(fd, name, directory: true, path: describe(name)), name)
        } else {
            try removed(Syscall.unlinkat(fd, name, path: describe(name)), name)
        }
    }

    /// Throws for an `unlinkat` that failed (absent is fine).
    private func removed(_ err: Int32, _ name: String) throws {
        guard err == 0 || err == ENOENT else {
            throw XferError.writing(err, "remove", describe(name))
        }
    }

    /// Removes `name` unless it is of type `kind` (`S_IFDIR`, `S_IFREG`).
    public func remove(_ name: String, unless kind: mode_t) throws {
        if let found = self.kind(name), found != kind { try remove(name) }
    }

    /// Renames `name` here to `newName` in `destination` (a symlink is moved as itself, never followed).
    public func rename(_ name: String, to destination: ConfinedDirectory, as newName: String) throws {
        try Syscall.renameat(
            fd, try Self.checkedName(name), destination.fd, try Self.checkedName(newName),
            path: destination.describe(newName))
    }

    /// Makes `newName` in `destination` a hard link to the file `name` here (never to a symlink's target).
    public func link(_ name: String, to destination: ConfinedDirectory, as newName: String) throws {
        try Syscall.linkat(
            fd, try Self.checkedName(name), destination.fd, try Self.checkedName(newName),
            path: destination.describe(newName))
    }

    /// Exchanges `name` here with `other` in `destination` atomically (`renameat2(RENAME_EXCHANGE)`).
    /// - Returns: `false` where the file system cannot (the caller falls back to two renames).
    public func exchange(_ name: String, with destination: ConfinedDirectory, _ other: String) throws -> Bool {
        try Syscall.exchange(
            fd, try Self.checkedName(name), destination.fd, try Self.checkedName(other),
            path: destination.describe(other))
    }

    /// Whether this directory is on the same file system as `other` (a rename between them works).
    public func isOnFileSystem(of other: ConfinedDirectory) -> Bool {
        var mine = stat()
        var theirs = stat()
        return fstat(fd, &mine) == 0 && fstat(other.fd, &theirs) == 0 && mine.st_dev == theirs.st_dev
    }

    /// This directory's permission bits (`st_mode & 0o7777`).
    public func mode() throws -> UInt32 {
        var info = stat()
        try Self.check(fstat(fd, &info), "stat", path)
        return UInt32(info.st_mode) & 0o7777
    }

    /// Removes the directory `name` if it is empty, and only then.
    /// - Returns: `false` if it holds anything (it is left as it is); `true` if it was removed
    ///   or is not there.
    /// - Throws: `io` if `name` is not a directory or cannot be removed for another reason.
    public func removeEmptyDirectory(_ name: String) throws -> Bool {
        let err = Syscall.unlinkat(fd, try Self.checkedName(name), directory: true, path: describe(name))
        if err == 0 || err == ENOENT { return true }
        if err == ENOTEMPTY || err == EEXIST { return false }
        throw XferError(.io, "cannot remove the directory \(describe(name))", cause: SystemErrno(err))
    }

    /// Sets this directory's permission bits.
    public func setMode(_ mode: mode_t) throws {
        try Syscall.fchmod(fd, mode, path: path)
    }

    /// Sets the modification (and access) time of `name` (a symlink itself), or of this directory when `nil`.
    public func setModificationTime(_ nanoseconds: Int64, of name: String? = nil) throws {
        try Syscall.setTimes(
            fd, try name.map(Self.checkedName), to: Self.timeSpec(nanoseconds), path: name.map(describe) ?? path)
    }

    /// fsyncs this directory, so renames and creations in it are durable.
    public func synchronize() throws {
        try Syscall.fsync(fd, path: path)
    }

    /// Makes everything written on this directory's file system durable (`syncfs`), this
    /// directory's entries and every file below it included.
    public func synchronizeFileSystem() throws {
        try Syscall.syncfs(fd, path: path)
    }

    // MARK: Helpers

    /// A `timespec` for nanoseconds since 1970, any `Int64` included (floor division, no overflow).
    static func timeSpec(_ nanoseconds: Int64) -> timespec {
        var (seconds, rest) = nanoseconds.quotientAndRemainder(dividingBy: 1_000_000_000)
        if rest < 0 {
            seconds -= 1
            rest += 1_000_000_000
        }
        return timespec(tv_sec: Int(seconds), tv_nsec: Int(rest))
    }

    /// One path component: not empty, `.` or `..`, no `/` or NUL.
    static func checkedName(_ name: String) throws -> String {
        guard !name.isEmpty, name != ".", name != "..", !name.utf8.contains(UInt8(ascii: "/")), !name.utf8.contains(0)
        else {
            throw XferError(.invalidPath, "\"\(name)\" is not a single path component")
        }
        return name
    }

    static func check(_ result: Int32, _ action: String, _ path: String) throws {
        guard result >= 0 else {
            let err = errno
            throw XferError.writing(err, action, path)
        }
    }
}
