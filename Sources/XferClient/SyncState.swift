import Foundation
import GRDB
import XferCore
import XferProtocol

/// What the sync engine remembers about one document of a synced directory.
public struct SyncRecord: Sendable, Hashable {
    /// The document's path (relative to the directory).
    public var path: String
    /// File or package.
    public var kind: DocumentKind
    /// Its local data was evicted (metadata kept; `fetch` brings it back).
    public var evicted: Bool
    /// Content bytes at the last sync.
    public var size: Int64
    /// Modification time at the last sync, nanoseconds.
    public var mtimeNs: Int64
    /// Last sync or fetch, nanoseconds since 1970 (least recently used is evicted first).
    public var lastUsedNs: Int64
}

/// A synced directory's state: one ``StateDatabase`` under `STATE/sync/`, named by a hash of the
/// directory's absolute path, holding every document's ``ClientState``, the directory's
/// binding (server and container), the change-feed cursor and a ``SyncRecord`` per document.
public final class SyncState: Sendable {
    /// The synced directory (absolute).
    public let directory: String
    /// The database.
    public let database: StateDatabase

    /// Opens (creating) the state of a synced directory.
    public init(directory: String, stateDirectory: String) throws {
        self.directory = ClientState.absolute(directory)
        database = try StateDatabase(path: Self.databasePath(directory: self.directory, stateDirectory: stateDirectory))
    }

    /// Where the state of `directory` lives.
    public static func databasePath(directory: String, stateDirectory: String) -> String {
        let name = String(ChunkID.of(Array(ClientState.absolute(directory).utf8)).hex.prefix(24))
        return "\(stateDirectory)/sync/\(name).sqlite"
    }

    /// The synced directory that holds `path` (it or its nearest ancestor that has sync state).
    public static func directory(containing path: String, stateDirectory: String) -> String? {
        var candidate = ClientState.absolute(path)
        while true {
            if FileManager.default.fileExists(
                atPath: databasePath(directory: candidate, stateDirectory: stateDirectory))
            {
                return candidate
            }
            guard candidate != "/" else { return nil }
            candidate = (candidate as NSString).deletingLastPathComponent
        }
    }

    /// The state of one document's root.
    public func clientState(for path: DocumentPath) -> ClientState {
        ClientState(root: directory + "/" + path.value, database: database)
    }

    /// A value of the binding (`server`, `container`, `cursor`).
    public func meta(_ key: String) throws -> String? {
        try database.run { db in
            try String.fetchOne(db, sql: "SELECT value FROM sync_meta WHERE key = ?", arguments: [key])
        }
    }

    /// Sets a value of the binding.
    public func setMeta(_ key: String, _ value: String) throws {
        try database.run { db in
            try db.execute(sql: "INSERT OR REPLACE INTO sync_meta VALUES (?, ?)", arguments: [key, value])
        }
    }

    /// The package extensions remembered for this directory (lowercase, without the dot), if any.
    public func packageExtensions() throws -> Set<String>? {
        try meta("package_extensions").map { Set($0.split(separator: ",").map { $0.lowercased() }) }
    }

    /// Remembers the package extensions for this directory (`.pkg` and `pkg` alike).
    public func setPackageExtensions(_ extensions: [String]) throws {
        try setMeta(
            "package_extensions",
            extensions.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ".")) }.joined(separator: ","))
    }

    /// Binds the directory to a server and container, or checks that it already is bound to them.
    /// - Throws: `conflict` if it is bound elsewhere.
    public func bind(server: String, container: ContainerName) throws {
        guard try !isBound(server: server, container: container) else { return }
        try setMeta("server", server)
        try setMeta("container", container.value)
    }

    /// Whether the directory is bound to this server and container (`false`: to none yet).
    /// - Throws: `conflict` if it is bound elsewhere.
    public func isBound(server: String, container: ContainerName) throws -> Bool {
        guard let bound = try meta("server"), let boundContainer = try meta("container") else { return false }
        guard bound == server, boundContainer == container.value else {
            throw XferError(
                .conflict,
                "\(directory) is synced with container \(boundContainer) on \(bound); sync another directory with \(container) on \(server)"
            )
        }
        return true
    }

    /// Every document record, by path.
    public func records() throws -> [String: SyncRecord] {
        try database.run { db in
            var result: [String: SyncRecord] = [:]
            let rows = try Row.fetchCursor(
                db, sql: "SELECT path, kind, evicted, size, mtime_ns, last_used_ns FROM sync_documents")
            while let row = try rows.next() {
                let record = SyncRecord(
                    path: row[0], kind: DocumentKind(rawValue: row[1]) ?? .file, evicted: row[2],
                    size: row[3], mtimeNs: row[4], lastUsedNs: row[5])
                result[record.path] = record
            }
            return result
        }
    }

    /// Adds or replaces a record.
    public func put(_ record: SyncRecord) throws {
        try database.run { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO sync_documents VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    record.path, record.kind.rawValue, record.evicted, record.size, record.mtimeNs, record.lastUsedNs
                ])
        }
    }

    /// Marks `paths` as used now, in their order (each a nanosecond after the one before): what
    /// the local limit's least-recently-used order sees of documents that arrived together.
    public func markUsed(_ paths: [DocumentPath]) throws {
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        try database.run { db in
            let update = try db.cachedStatement(sql: "UPDATE sync_documents SET last_used_ns = ? WHERE path = ?")
            for (offset, path) in paths.enumerated() {
                try update.execute(arguments: [now + Int64(offset), path.value])
            }
        }
    }

    /// Forgets which version of every document this directory holds, keeping the files' stamps
    /// and chunk lists (still good for finding unchanged files and reusing chunks): after it,
    /// every local document is new to the server and nothing local can be decided deleted.
    public func forgetVersions() throws {
        let prefix = directory + "/"
        try database.run { db in
            try db.execute(
                sql: "DELETE FROM root_documents WHERE substr(root, 1, length(?)) = ?", arguments: [prefix, prefix])
        }
        try forgetRemoteView()
    }

    /// Every document this directory holds a version of from `server`'s `container`, by path:
    /// the version, and for a single file the stamp it had when that version was recorded.
    /// One query, no manifest read: what lets a pass over many unchanged files stay cheap.
    public func syncedVersions(server: String, container: ContainerName) throws -> [String: (
        version: Int64, stamp: String?
    )] {
        let prefix = directory + "/"
        return try database.run { db in
            var result: [String: (version: Int64, stamp: String?)] = [:]
            result.reserveCapacity(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM root_documents") ?? 0)
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT path, version, file_stamp FROM root_documents
                    WHERE substr(root, 1, length(?)) = ? AND server = ? AND container = ?
                    """, arguments: [prefix, prefix, server, container.value])
            while let row = try rows.next() {
                result[row[0]] = (row[1], row[2])
            }
            return result
        }
    }

    /// The server's documents as this directory last saw them, by path, and the feed cursor
    /// they are current at; `nil` if none was kept.
    public func remoteView() throws -> (documents: [String: DocumentInfo], cursor: Int64, listedAt: Double)? {
        try database.run { db in
            guard
                let cursor = try String.fetchOne(db, sql: "SELECT value FROM sync_meta WHERE key = 'view_cursor'")
                    .flatMap({ Int64($0) }),
                let listedAt = try String.fetchOne(db, sql: "SELECT value FROM sync_meta WHERE key = 'view_listed_at'")
                    .flatMap({ Double($0) })
            else { return nil }
            var documents: [String: DocumentInfo] = [:]
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT path, version, state, kind, size, mtime_ns, mode, manifest_digest, sequence, conflicts FROM sync_remote
                    """)
            while let row = try rows.next() {
                guard let info = Self.info(row) else { return nil }  // unreadable: list again
                documents[info.path.value] = info
            }
            return (documents, cursor, listedAt)
        }
    }

    /// Keeps the server's view at `cursor`: all of it after a full listing (`listedAt` set), or
    /// only the `changed` paths (absent from `documents`: gone) after one brought up to date.
    public func storeRemoteView(
        _ documents: [String: DocumentInfo], cursor: Int64, changed: Set<String>?, listedAt: Double?
    ) throws {
        try database.run { db in
            let paths: any Sequence<String>
            if let changed {
                paths = changed
            } else {
                try db.execute(sql: "DELETE FROM sync_remote")
                paths = documents.keys
            }
            let insert = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO sync_remote VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
            let remove = try db.cachedStatement(sql: "DELETE FROM sync_remote WHERE path = ?")
            for path in paths {
                guard let info = documents[path] else {
                    try remove.execute(arguments: [path])
                    continue
                }
                try insert.execute(arguments: [
                    path, info.version, info.state.rawValue, info.kind.rawValue, info.size, info.mtimeNs,
                    Int64(info.mode), info.manifestDigest, info.sequence,
                    info.conflicts.map { $0.map(String.init).joined(separator: ",") }
                ])
            }
            try db.execute(
                sql: "INSERT OR REPLACE INTO sync_meta VALUES ('view_cursor', ?)", arguments: [String(cursor)])
            if let listedAt {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO sync_meta VALUES ('view_listed_at', ?)", arguments: [String(listedAt)])
            }
        }
    }

    /// Drops the kept view of the server (the next pass lists everything).
    public func forgetRemoteView() throws {
        try database.run { db in
            try db.execute(sql: "DELETE FROM sync_remote")
            try db.execute(sql: "DELETE FROM sync_meta WHERE key IN ('view_cursor', 'view_listed_at')")
        }
    }

    /// A ``DocumentInfo`` from a `sync_remote` row (columns in table order, read by index:
    /// this runs once per document per pass).
    private static func info(_ row: Row) -> DocumentInfo? {
        guard let path = try? DocumentPath(row[0] as String), let state = VersionState(rawValue: row[2]),
            let kind = DocumentKind(rawValue: row[3])
        else { return nil }
        let conflicts = (row[9] as String?).map { $0.split(separator: ",").compactMap { Int64($0) } }
        return DocumentInfo(
            path: path, version: row[1], state: state, kind: kind, size: row[4], mtimeNs: row[5],
            mode: UInt32(truncatingIfNeeded: row[6] as Int64), baseVersion: nil, manifestDigest: row[7],
            files: nil, chunks: nil, device: nil, sequence: row[8], conflicts: conflicts)
    }

    /// Forgets a document entirely: its record and its root's files and synced version.
    public func forget(_ path: DocumentPath) throws {
        try clientState(for: path).forget()
        try database.run { db in
            try db.execute(sql: "DELETE FROM sync_documents WHERE path = ?", arguments: [path.value])
        }
    }
}

/// An exclusive lock on a synced directory, so one daemon at a time works on it: `flock` on a
/// file beside its state, holding the owner's pid. The kernel drops it if the process dies.
final class DirectoryLock: Sendable {
    private let fd: Int32

    init(path: String, directory: String) throws {
        let fd = Syscall.openat(AT_FDCWD, path, O_RDWR | O_CREAT | O_CLOEXEC, mode: 0o600, path: path)
        guard fd >= 0 else { throw XferError(.io, "cannot open the lock file \(path)", cause: SystemErrno(errno)) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let pid = Self.owner(fd)
            close(fd)
            throw XferError(
                .conflict,
                "another `xfer sync` is already running on \(directory) (pid \(pid.isEmpty ? "?" : pid)); stop it first"
            )
        }
        let text = Array("\(getpid())\n".utf8)
        // The pid is for the message another daemon gives; the lock holds without it.
        try? Syscall.ftruncate(fd, to: 0, path: path)
        try? text.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: 0, path: path) }
        self.fd = fd
    }

    deinit { close(fd) }

    /// The pid the holder wrote into the lock file (empty if none).
    private static func owner(_ fd: Int32) -> String {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(fd, &buffer, buffer.count, 0)
        return String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).trimmingCharacters(
            in: .whitespacesAndNewlines)
    }

    /// The pid of the process holding the lock at `path` (-1 if it wrote none), or `nil` when none does.
    static func holder(path: String) -> Int32? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return Int32(owner(fd)) ?? -1
    }
}
