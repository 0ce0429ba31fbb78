import Foundation
import XferCore

/// Files written through a mount, kept on disk until their versions are on the server: one
/// staging file per document path (every handle open on it writes the same file, as on a local
/// file system), and, once the last writer closes it, a record saying it is due to be uploaded.
/// The data is fsynced before the record is written, and the record is renamed into place, so
/// after a crash every record found names a whole file: the next mount of the same state
/// directory uploads it.
final class StagedFiles: Sendable {
    /// What is due: the document, and the version it was edited from (`nil`: a new document).
    struct Record: Codable, Sendable, Hashable {
        var path: String
        var base: Int64?
        /// When it was closed (nanoseconds since 1970): uploads go oldest first.
        var closedNs: Int64
    }

    /// A deletion made while the server could not be reached: the document, and the version
    /// the mount showed (the server deletes that version only).
    struct Removal: Codable, Sendable, Hashable {
        var path: String
        var base: Int64
        var queuedNs: Int64
    }

    /// A directory or symlink made, or a directory's mode changed, while the server could not
    /// be reached.
    struct Made: Codable, Sendable, Hashable {
        var path: String
        /// A symlink's target; `nil`: a directory.
        var target: String?
        var mode: UInt32
        var queuedNs: Int64
        /// The version a directory's new mode is based on (`nil`: a new document).
        var base: Int64? = nil
    }

    /// The directory: `<key>.data` and `<key>.json` per document, `<key>.removal` per queued
    /// deletion, `<key>.made` per directory or symlink made offline, `<key>.pkg` and
    /// `<key>.package` per package changed here (StagedFiles+Packages).
    let directory: String

    /// The staging area for one server's container, under `stateDirectory`.
    init(stateDirectory: String, server: String, container: String) throws {
        let key = ChunkID.of(Array("\(server) \(container)".utf8)).hex.prefix(16)
        directory = stateDirectory + "/mount-writes/" + key
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    func key(_ path: String) -> String { String(ChunkID.of(Array(path.utf8)).hex.prefix(32)) }

    /// The staging file of document `path`.
    func dataPath(_ path: String) -> String { directory + "/" + key(path) + ".data" }
    private func recordPath(_ path: String) -> String { directory + "/" + key(path) + ".json" }
    private func removalPath(_ path: String) -> String { directory + "/" + key(path) + ".removal" }
    private func madePath(_ path: String) -> String { directory + "/" + key(path) + ".made" }

    /// Whether `path` has a staging file.
    func exists(_ path: String) -> Bool { access(dataPath(path), F_OK) == 0 }

    /// Opens `path`'s staging file for reading and writing, making it (mode 0600) if missing.
    /// - Returns: The descriptor, and whether the file was made now (to be filled).
    func open(_ path: String) throws -> (fd: Int32, made: Bool) {
        let data = dataPath(path)
        let made = access(data, F_OK) != 0
        let fd = Glibc.open(data, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw XferError(.io, "cannot open the staging file \(data)", cause: SystemErrno(errno)) }
        return (fd, made)
    }

    /// Marks `path` due for upload: its data made durable, then its record.
    func due(_ path: String, base: Int64?) throws {
        let fd = Glibc.open(dataPath(path), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw XferError(.io, "the staging file of \(path) is gone", cause: SystemErrno(errno)) }
        defer { close(fd) }
        guard fsync(fd) == 0 else {
            throw XferError(.io, "cannot make \(path)'s staging file durable", cause: SystemErrno(errno))
        }
        let record = Record(path: path, base: base, closedNs: Syscall.wallClockNanoseconds())
        try durably(try JSONEncoder().encode(record), at: recordPath(path), what: "record \(path) as due")
    }

    /// Queues the deletion of `path` at version `base`, durably.
    func queueRemoval(_ path: String, base: Int64) throws {
        let removal = Removal(path: path, base: base, queuedNs: Syscall.wallClockNanoseconds())
        try durably(try JSONEncoder().encode(removal), at: removalPath(path), what: "queue the deletion of \(path)")
    }

    /// Every deletion queued, oldest first.
    func removals() -> [Removal] {
        records(".removal", Removal.self).sorted { $0.queuedNs < $1.queuedNs }
    }

    /// Queues `made` (a directory or symlink made here), durably.
    func queueMade(_ made: Made) throws {
        try durably(try JSONEncoder().encode(made), at: madePath(made.path), what: "queue \(made.path)")
    }

    /// The directory or symlink made at `path` and queued, if any.
    func made(_ path: String) -> Made? {
        FileManager.default.contents(atPath: madePath(path)).flatMap { try? JSONDecoder().decode(Made.self, from: $0) }
    }

    /// Every directory and symlink made offline and queued, oldest first.
    func made() -> [Made] {
        records(".made", Made.self).sorted { $0.queuedNs < $1.queuedNs }
    }

    /// Forgets the queued directory or symlink at `path` (sent, or removed here).
    func dropMade(_ path: String) {
        unlink(madePath(path))
    }

    /// The records of one kind (by their files' `suffix`) that decode.
    func records<Record: Decodable>(_ suffix: String, _ type: Record.Type) -> [Record] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasSuffix(suffix) }.compactMap { name in
            FileManager.default.contents(atPath: directory + "/" + name).flatMap {
                try? JSONDecoder().decode(Record.self, from: $0)
            }
        }
    }

    /// Forgets the queued deletion of `path` (done, or refused by the server).
    func dropRemoval(_ path: String) {
        unlink(removalPath(path))
    }

    /// Writes `bytes` at `target` so that after a crash it is there whole or not at all: a
    /// temporary file of its own (two writers at once each have theirs), fsynced, renamed into
    /// place, and the directory fsynced.
    func durably(_ bytes: Data, at target: String, what: String) throws {
        let temporary = target + "." + UUID().uuidString + ".tmp"
        try bytes.write(to: URL(fileURLWithPath: temporary))
        let fd = Glibc.open(temporary, O_RDONLY | O_CLOEXEC)
        if fd >= 0 {
            fsync(fd)
            close(fd)
        }
        guard rename(temporary, target) == 0 else {
            throw XferError(.io, "cannot \(what)", cause: SystemErrno(errno))
        }
        let directoryFD = Glibc.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    /// The record of `path`, if it is due.
    func record(_ path: String) -> Record? {
        guard let data = FileManager.default.contents(atPath: recordPath(path)) else { return nil }
        return try? JSONDecoder().decode(Record.self, from: data)
    }

    /// Every record due, oldest first.
    func due() -> [Record] {
        records(".json", Record.self).sorted { $0.closedNs < $1.closedNs }
    }

    /// Forgets `path`'s staging file and record, or the directory or symlink queued there
    /// (uploaded, or removed here).
    func drop(_ path: String) {
        unlink(recordPath(path))
        unlink(dataPath(path))
        unlink(madePath(path))
    }

    /// Forgets only `path`'s staging file (one made and not filled).
    func discard(_ path: String) {
        unlink(dataPath(path))
    }

    /// Replaces `path`'s staging file, whole or not at all: `fill` writes a new one beside it,
    /// which then takes its place; if `fill` throws, the old one (if any) is left as it was.
    func replace(_ path: String, _ fill: (Int32) async throws -> Void) async throws {
        let scratch = dataPath(path) + "." + UUID().uuidString + ".tmp"
        let fd = Glibc.open(scratch, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw XferError(.io, "cannot make \(scratch)", cause: SystemErrno(errno)) }
        defer { close(fd) }
        do {
            try await fill(fd)
            guard rename(scratch, dataPath(path)) == 0 else {
                throw XferError(.io, "cannot move \(scratch) into place", cause: SystemErrno(errno))
            }
        } catch {
            unlink(scratch)
            throw error
        }
    }

    /// Forgets only `path`'s record (uploaded while a writer had it open again).
    func dropRecord(_ path: String) {
        unlink(recordPath(path))
    }
}
