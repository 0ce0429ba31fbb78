import Foundation
import Glibc
import XferCore

/// A package's content on disk: written from its manifest (each file's bytes from verified
/// chunks), and read back as the mount shows it.
enum PackageCheckout {
    /// Writes the entries of `manifest` under `root`: directories, symlinks, and files whose
    /// bytes `fill` writes; modes and times as the manifest says (directories' last, as
    /// writing into them changes their times). A manifest is checked when it is read (each
    /// entry's parent a directory entry before it, no `..`), so nothing lands outside `root`.
    static func write(
        _ manifest: Manifest, into root: String,
        fill: (Int32, [Manifest.ChunkReference]) async throws -> Void
    ) async throws {
        var directories: [(path: String, mode: UInt32, mtime: Int64)] = []
        for index in manifest.entries.indices {
            let inside = manifest.entries.path(at: index)
            let path = root + "/" + inside
            let (mode, mtime) = (
                manifest.entries.mode(at: index) & 0o7777, manifest.entries.mtimeNanoseconds(at: index)
            )
            let made: Bool
            switch manifest.entries.kind(at: index) {
            case .directory:
                made = Glibc.mkdir(path, 0o700) == 0
                directories.append((path, mode, mtime))
            case .symlink:
                made = Glibc.symlink(manifest.entries.symlinkTarget(at: index) ?? "", path) == 0
            case .file:
                let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
                made = fd >= 0
                if made {
                    defer { close(fd) }
                    try await fill(fd, Array(manifest.entries.chunks(at: index)))
                    fchmod(fd, mode_t(mode))
                }
            }
            guard made else { throw XferError(.io, "cannot make \(inside) in \(root)", cause: SystemErrno(errno)) }
            setTime(path, mtime)
        }
        for directory in directories.reversed() {
            chmod(directory.path, mode_t(directory.mode))
            setTime(directory.path, directory.mtime)
        }
    }

    /// What is under `root`, by path inside it (symlinks not followed; other kinds of file left out).
    static func scan(_ root: String) throws -> [MountTree.LocalEntry] {
        var found: [MountTree.LocalEntry] = []
        var pending = [""]
        while let inside = pending.popLast() {
            for name in try FileManager.default.contentsOfDirectory(atPath: inside.isEmpty ? root : root + "/" + inside)
            {
                let path = inside.isEmpty ? name : inside + "/" + name
                var info = stat()
                guard lstat(root + "/" + path, &info) == 0, let kind = kind(info.st_mode) else { continue }
                if kind == .directory { pending.append(path) }
                found.append(
                    MountTree.LocalEntry(
                        path: path, kind: kind, mode: info.st_mode & 0o7777, size: Int64(info.st_size),
                        mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)))
            }
        }
        return found
    }

    static func kind(_ mode: mode_t) -> MountTree.Kind? {
        switch mode & S_IFMT {
        case S_IFDIR: return .directory
        case S_IFREG: return .file
        case S_IFLNK: return .symlink
        default: return nil
        }
    }

    /// Sets the modification time of `path` (a symlink's own).
    static func setTime(_ path: String, _ nanoseconds: Int64) {
        var times = [Glibc.timespec(tv_sec: 0, tv_nsec: MountFileSystem.utimeOmit), MountFileSystem.time(nanoseconds)]
        utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }
}
