import GRDB
import XferCore
import XferProtocol

/// The highest version of each document this device has seen current on a server, kept so a
/// server that makes an older version current again (an operator's rollback of an end-to-end
/// encrypted container) is refused rather than followed (docs/SECURITY.md, "Rollback").
///
/// Versions only grow by the protocol. The mark is raised by what a listing, a pull or a
/// commit shows current, and never lowered: not when a document is forgotten, nor when the
/// server's identity changes (a new identity would otherwise wipe the record it is checked
/// against).
public struct SeenVersions: Sendable {
    let database: StateDatabase
    let server: String
    let container: ContainerName

    /// The marks of `server`'s `container` in `database`.
    public init(_ database: StateDatabase, server: String, container: ContainerName) {
        self.database = database
        self.server = server
        self.container = container
    }

    /// Every document's mark, by path.
    public func all() throws -> [String: Int64] {
        try database.run { db in
            var marks: [String: Int64] = [:]
            let rows = try Row.fetchCursor(
                db, sql: "SELECT path, version FROM seen_versions WHERE server = ? AND container = ?",
                arguments: [server, container.value])
            while let row = try rows.next() { marks[row[0]] = row[1] }
            return marks
        }
    }

    /// One document's mark, if it has one.
    public func mark(_ path: DocumentPath) throws -> Int64? {
        try database.run { db in
            try Int64.fetchOne(
                db, sql: "SELECT version FROM seen_versions WHERE server = ? AND container = ? AND path = ?",
                arguments: [server, container.value, path.value])
        }
    }

    /// Raises the marks of `versions` (path, version seen current) where they are higher.
    public func raise(_ versions: some Sequence<(DocumentPath, Int64)>) throws {
        try database.run { db in
            for (path, version) in versions {
                try db.execute(
                    sql: """
                        INSERT INTO seen_versions (server, container, path, version) VALUES (?, ?, ?, ?)
                        ON CONFLICT (server, container, path) DO UPDATE SET version = max(version, excluded.version)
                        """, arguments: [server, container.value, path.value, version])
            }
        }
    }

    /// Throws `rolled_back` when `info` is current at a version lower than the mark of `path`.
    public func check(_ info: DocumentInfo, at path: DocumentPath) throws {
        guard info.state == .current, let seen = try mark(path), info.version < seen else { return }
        throw Self.rolledBack(path, server: info.version, seen: seen)
    }

    /// The error of a document the server shows older than this device saw it.
    public static func rolledBack(_ path: DocumentPath, server: Int64, seen: Int64) -> XferError {
        XferError(
            .rolledBack,
            "the server shows \(path) at version \(server), older than version \(seen) it showed this device: "
                + "it was rolled back; this device's copy was kept (see docs/SECURITY.md, \"Rollback\")")
    }
}

/// The latest write of each key-value key this device has seen in an end-to-end encrypted
/// container, by the store's own order (writer's time, then device): a server that answers
/// with an older entry (a replayed value) is refused rather than believed.
public struct SeenValues: Sendable {
    let database: StateDatabase
    let server: String
    let container: ContainerName

    /// The marks of `server`'s `container` in `database`.
    public init(_ database: StateDatabase, server: String, container: ContainerName) {
        self.database = database
        self.server = server
        self.container = container
    }

    /// Whether `entry` is older than the latest write of its key seen here.
    public func isOlder(_ entry: KeyValueEntry) throws -> Bool {
        try database.run { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: "SELECT timestamp_ns, device FROM seen_values WHERE server = ? AND container = ? AND key = ?",
                    arguments: [server, container.value, entry.key])
            else { return false }
            let seen: (Int64, String) = (row[0], row[1])
            return (entry.timestampNs, entry.device) < seen
        }
    }

    /// Records `entry` as seen, if it is later than what was.
    public func raise(_ entry: KeyValueEntry) throws {
        try database.run { db in
            try db.execute(
                sql: """
                    INSERT INTO seen_values (server, container, key, timestamp_ns, device) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (server, container, key) DO UPDATE SET timestamp_ns = excluded.timestamp_ns, device = excluded.device
                    WHERE (excluded.timestamp_ns, excluded.device) > (seen_values.timestamp_ns, seen_values.device)
                    """, arguments: [server, container.value, entry.key, entry.timestampNs, entry.device])
        }
    }

    /// Refuses an entry older than the one seen (`rolled_back`), else records it.
    public func check(_ entry: KeyValueEntry) throws {
        if try isOlder(entry) {
            throw XferError(
                .rolledBack,
                "the server answered an older value of \(entry.key) than it showed this device (written \(entry.timestampNs) by \(entry.device)): it was rolled back; nothing was taken"
            )
        }
        try raise(entry)
    }
}

extension Remote {
    /// The database of this device's marks of the container (``SeenVersions``, ``SeenValues``):
    /// one per server, container and key under the state directory, shared by every sync
    /// folder, pull and push of this device. `nil` in a plain container, whose server is
    /// trusted with versions as with bytes.
    func seenMarks() throws -> StateDatabase? {
        guard let keys = endToEnd else { return nil }
        let name = String(
            ChunkID.of(Array("seen\u{0}\(connection.server)\u{0}\(container.value)\u{0}\(keys.keyID)".utf8)).hex.prefix(
                24))
        return try StateDatabase(path: "\(stateDirectory)/seen/\(name).sqlite")
    }

    /// This device's marks of the container's versions, end to end.
    func seenVersions() throws -> SeenVersions? {
        try seenMarks().map { SeenVersions($0, server: connection.server, container: container) }
    }

    /// This device's marks of the container's key-value entries, end to end.
    func seenValues() throws -> SeenValues? {
        try seenMarks().map { SeenValues($0, server: connection.server, container: container) }
    }
}
