import Foundation
import XferCore

/// Packages changed through a mount: each is checked out whole into a staging directory of its
/// own (`<key>.pkg`), changed there, and recorded as changed (`<key>.package`) once what a
/// change touched is durable; its upload pushes the directory. A directory is in place only
/// once all of it is on disk, and one found without a record (a crash before any change
/// completed) is no one's: ``sweepPackages()`` removes it.
extension StagedFiles {
    /// A package changed here: the version it was checked out from (or last uploaded as), and
    /// when it last changed (nanoseconds since 1970; its upload waits for a quiet period).
    struct PackageRecord: Codable, Sendable, Hashable {
        var path: String
        var base: Int64
        var changedNs: Int64
    }

    /// The staging directory of package `path`.
    func packageDirectory(_ path: String) -> String { directory + "/" + key(path) + ".pkg" }
    private func packageRecordPath(_ path: String) -> String { directory + "/" + key(path) + ".package" }

    /// Whether package `path` has a staging directory.
    func hasPackage(_ path: String) -> Bool { access(packageDirectory(path), F_OK) == 0 }

    /// Fills package `path`'s staging directory with `fill` (given a scratch directory), made
    /// durable and moved into place whole; if `fill` throws, nothing is left.
    func checkOut(_ path: String, _ fill: (String) async throws -> Void) async throws {
        let scratch = packageDirectory(path) + "." + UUID().uuidString + ".tmp"
        do {
            try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: false)
            try await fill(scratch)
            let fd = Glibc.open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard fd >= 0 else { throw XferError(.io, "cannot open \(scratch)", cause: SystemErrno(errno)) }
            defer { close(fd) }
            try Syscall.syncfs(fd, path: scratch)
            guard rename(scratch, packageDirectory(path)) == 0 else {
                throw XferError(.io, "cannot move \(scratch) into place", cause: SystemErrno(errno))
            }
        } catch {
            try? FileManager.default.removeItem(atPath: scratch)
            throw error
        }
    }

    /// Records package `path` as changed, based on `base`, once the files and directories in
    /// `touched` are durable.
    func packageChanged(_ path: String, base: Int64, touched: [String]) throws {
        for item in touched {
            let fd = Glibc.open(item, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { continue }  // gone meanwhile (its parent is in `touched` too)
            defer { close(fd) }
            try Syscall.fsync(fd, path: item)
        }
        let record = PackageRecord(path: path, base: base, changedNs: Syscall.wallClockNanoseconds())
        try durably(try JSONEncoder().encode(record), at: packageRecordPath(path), what: "record \(path) as changed")
    }

    /// The record of package `path`, if it changed here and is not uploaded yet.
    func packageRecord(_ path: String) -> PackageRecord? {
        FileManager.default.contents(atPath: packageRecordPath(path)).flatMap {
            try? JSONDecoder().decode(PackageRecord.self, from: $0)
        }
    }

    /// Every package changed here and not uploaded yet, oldest change first.
    func packageRecords() -> [PackageRecord] {
        records(".package", PackageRecord.self).sorted { $0.changedNs < $1.changedNs }
    }

    /// Forgets package `path`'s record, then its staging directory (uploaded, or checked out
    /// and not changed).
    func dropPackage(_ path: String) {
        unlink(packageRecordPath(path))
        try? FileManager.default.removeItem(atPath: packageDirectory(path))
    }

    /// Removes staging directories no record names, and scratch directories: left by a crash
    /// before they held a change.
    func sweepPackages() {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        let recorded = Set(packageRecords().map { key($0.path) + ".pkg" })
        for name in names
        where (name.contains(".pkg.") && name.hasSuffix(".tmp")) || (name.hasSuffix(".pkg") && !recorded.contains(name))
        {
            try? FileManager.default.removeItem(atPath: directory + "/" + name)
        }
    }
}
