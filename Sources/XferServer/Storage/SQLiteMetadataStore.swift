import Foundation
import GRDB
import XferCore
import XferProtocol

/// The embedded metadata store: one SQLite database (WAL mode) in the server's data directory.
///
/// GRDB's `DatabasePool` serializes writers and runs readers concurrently; every method is
/// one transaction.
public final class SQLiteMetadataStore: MetadataStore {
    private let pool: DatabasePool

    /// Opens (creating and migrating as needed) the database at `path`.
    /// - Throws: `io` if it cannot be opened.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrator.migrate(pool)
        } catch {
            throw XferError(.io, "cannot open the metadata database \(path)", cause: DescribedError(error))
        }
    }

    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE accounts (
                    id INTEGER PRIMARY KEY,
                    name TEXT NOT NULL UNIQUE,
                    quota INTEGER NOT NULL,
                    used INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL);
                CREATE TABLE tokens (
                    hash BLOB PRIMARY KEY,
                    account_id INTEGER REFERENCES accounts(id),
                    admin INTEGER NOT NULL DEFAULT 0,
                    created_at INTEGER NOT NULL) WITHOUT ROWID;
                CREATE TABLE account_chunks (
                    account_id INTEGER NOT NULL,
                    id BLOB NOT NULL,
                    length INTEGER NOT NULL,
                    PRIMARY KEY (account_id, id)) WITHOUT ROWID;
                CREATE TABLE containers (
                    id INTEGER PRIMARY KEY,
                    account_id INTEGER NOT NULL REFERENCES accounts(id),
                    name TEXT NOT NULL,
                    sequence INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (account_id, name));
                CREATE TABLE documents (
                    id INTEGER PRIMARY KEY,
                    container_id INTEGER NOT NULL REFERENCES containers(id),
                    path TEXT NOT NULL,
                    current_version INTEGER,
                    latest_version INTEGER NOT NULL DEFAULT 0,
                    UNIQUE (container_id, path));
                CREATE TABLE versions (
                    document_id INTEGER NOT NULL REFERENCES documents(id),
                    version INTEGER NOT NULL,
                    container_id INTEGER NOT NULL,
                    state TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    size INTEGER NOT NULL,
                    mtime_ns INTEGER NOT NULL,
                    mode INTEGER NOT NULL,
                    base_version INTEGER,
                    device TEXT,
                    manifest_digest BLOB,
                    manifest BLOB,
                    files INTEGER,
                    chunks INTEGER,
                    sequence INTEGER NOT NULL,
                    created_at INTEGER NOT NULL,
                    PRIMARY KEY (document_id, version));
                CREATE INDEX versions_feed ON versions (container_id, sequence);
                """)
        }
        return migrator
    }

    // MARK: Accounts and tokens

    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT t.hash, t.admin, a.id, a.name FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id
                WHERE t.hash = ?
                """, arguments: [Data(tokenHash)]) else { return nil }
            // The lookup is by hash of a 256-bit secret; the comparison itself is constant-time.
            let stored: Data = row["hash"]
            guard TokenHash.equal(Array(stored), tokenHash) else { return nil }
            let admin: Bool = row["admin"]
            if admin { return Principal(accountID: 0, name: "admin", isAdmin: true) }
            guard let id: Int64 = row["id"], let name: String = row["name"] else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false)
        }
    }

    public func hasAdminToken() async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM tokens WHERE admin = 1)") ?? false }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        try await write { db in
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, NULL, 1, ?)",
                           arguments: [Data(hash), Self.now()])
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await write { db in
            if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM accounts WHERE name = ?)", arguments: [name.value]) == true {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try db.execute(sql: "INSERT INTO accounts (name, quota, created_at) VALUES (?, ?, ?)",
                           arguments: [name.value, quota, Self.now()])
            let id = db.lastInsertedRowID
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, 0, ?)",
                           arguments: [Data(tokenHash), id, Self.now()])
            return AccountInfo(name: name.value, quota: quota, used: 0)
        }
    }

    public func account(_ accountID: Int64) async throws -> AccountInfo {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT name, quota, used FROM accounts WHERE id = ?", arguments: [accountID]) else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(name: row["name"], quota: row["quota"], used: row["used"])
        }
    }

    // MARK: Chunks

    public func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID] {
        try await read { db in try Self.lacking(db, account: account, ids) }
    }

    public func addChunks(account: Int64, _ chunks: [OwnedChunk]) async throws -> (count: Int, bytes: Int64) {
        try await write { db in
            var lacking = Set(try Self.lacking(db, account: account, chunks.map(\.id)))
            let fresh = chunks.filter { lacking.remove($0.id) != nil }
            let bytes = fresh.reduce(Int64(0)) { $0 + Int64($1.length) }
            guard let row = try Row.fetchOne(db, sql: "SELECT quota, used FROM accounts WHERE id = ?", arguments: [account]) else {
                throw XferError(.notFound, "no such account")
            }
            let quota: Int64 = row["quota"]
            let used: Int64 = row["used"]
            guard used + bytes <= quota else {
                throw XferError(.quotaExceeded, "storing \(ByteCount(bytes).description) more would take the account past its quota of \(ByteCount(quota).description) (\(ByteCount(used).description) used)")
            }
            let insert = try db.cachedStatement(sql: "INSERT INTO account_chunks (account_id, id, length) VALUES (?, ?, ?)")
            for chunk in fresh { try insert.execute(arguments: [account, Data(chunk.id.bytes), chunk.length]) }
            try db.execute(sql: "UPDATE accounts SET used = used + ? WHERE id = ?", arguments: [bytes, account])
            return (fresh.count, bytes)
        }
    }

    // MARK: Documents

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true)!
            let document = try Self.documentRow(db, container: containerID, path: request.path, create: true)!
            try Self.checkBase(db, document: document, base: request.baseVersion, path: request.path)
            let version = document.latest + 1
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: "UPDATE documents SET latest_version = ? WHERE id = ?", arguments: [version, document.id])
            try db.execute(sql: """
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                      device, sequence, created_at)
                VALUES (?, ?, ?, 'uploading', ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [document.id, version, containerID, request.kind.rawValue, request.size, request.mtimeNs,
                                 request.mode, request.baseVersion, request.device, sequence, Self.now()])
            return try Self.info(db, document: document.id, path: request.path, version: version)!
        }
    }

    public func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                       manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo {
        try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let state = try String.fetchOne(db, sql: "SELECT state FROM versions WHERE document_id = ? AND version = ?",
                                                  arguments: [document.id, version]) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            guard state == VersionState.uploading.rawValue else {
                throw XferError(.conflict, "\(path) version \(version) is already \(state)")
            }
            try Self.checkBase(db, document: document, base: baseVersion, path: path)
            let missing = try Self.lacking(db, account: account, manifest.allChunks.map(\.id))
            guard missing.isEmpty else {
                throw XferError.missingChunks(missing)
            }
            let sequence = try Self.nextSequence(db, container: containerID)
            if let current = document.current {
                try db.execute(sql: "UPDATE versions SET state = 'superseded', sequence = ? WHERE document_id = ? AND version = ? AND state = 'current'",
                               arguments: [sequence, document.id, current])
            }
            let kind: DocumentKind = manifest.kind == .package ? .package : .file
            try db.execute(sql: """
                UPDATE versions SET state = 'current', kind = ?, size = ?, manifest_digest = ?, manifest = ?, files = ?,
                                    chunks = ?, base_version = ?, sequence = ?
                WHERE document_id = ? AND version = ?
                """, arguments: [kind.rawValue, manifest.totalSize, Data(ChunkID.of(encoded).bytes), Data(encoded), manifest.fileCount,
                                 manifest.allChunks.count, baseVersion, sequence, document.id, version])
            try db.execute(sql: "UPDATE documents SET current_version = ? WHERE id = ?", arguments: [version, document.id])
            return try Self.info(db, document: document.id, path: path, version: version)!
        }
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8]) {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let number = version ?? document.current,
                  let info = try Self.info(db, document: document.id, path: path, version: number),
                  info.state == .current || info.state == .superseded,
                  let blob = try Data.fetchOne(db, sql: "SELECT manifest FROM versions WHERE document_id = ? AND version = ?",
                                               arguments: [document.id, number]) else {
                throw XferError(.notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
            }
            return (info, Array(blob))
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath) async throws -> DocumentInfo {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let info = try Self.info(db, document: document.id, path: path, version: document.current ?? document.latest) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, limit: Int) async throws -> DocumentList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.path, v.* FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = ? AND substr(d.path, 1, length(?)) = ? AND v.state != 'deleted'
                ORDER BY d.path LIMIT ?
                """, arguments: [containerID, prefix, prefix, limit])
            return DocumentList(documents: try rows.map(Self.info(row:)), cursor: cursor)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo {
        try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let current = document.current,
                  let info = try Self.info(db, document: document.id, path: path, version: current),
                  info.state != .deleted else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            if let baseVersion, baseVersion != current {
                throw XferError.conflict(path: path, current: current, base: baseVersion)
            }
            let version = document.latest + 1
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: "UPDATE versions SET state = 'superseded', sequence = ? WHERE document_id = ? AND version = ?",
                           arguments: [sequence, document.id, current])
            try db.execute(sql: """
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                      sequence, created_at)
                VALUES (?, ?, ?, 'deleted', ?, 0, ?, ?, ?, ?, ?)
                """, arguments: [document.id, version, containerID, info.kind.rawValue, Self.now() * 1_000_000_000,
                                 info.mode, current, sequence, Self.now()])
            try db.execute(sql: "UPDATE documents SET current_version = ?, latest_version = ? WHERE id = ?",
                           arguments: [version, version, document.id])
            return try Self.info(db, document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false)
            }
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.path, v.* FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = ? AND v.sequence > ? ORDER BY v.sequence LIMIT ?
                """, arguments: [containerID, after, limit + 1])
            let changes = try rows.prefix(limit).map(Self.info(row:))
            let head = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            return ChangeList(changes: changes, cursor: rows.count > limit ? changes.last!.sequence : max(after, head),
                              more: rows.count > limit)
        }
    }

    // MARK: Helpers (inside a transaction)

    private struct DocumentRow {
        var id: Int64
        var current: Int64?
        var latest: Int64
    }

    /// The distinct ids of `ids` the account does not hold, in first-seen order.
    private static func lacking(_ db: Database, account: Int64, _ ids: [ChunkID]) throws -> [ChunkID] {
        let holds = try db.cachedStatement(sql: "SELECT 1 FROM account_chunks WHERE account_id = ? AND id = ?")
        var seen: Set<ChunkID> = []
        return try ids.filter { id in
            try seen.insert(id).inserted && Row.fetchOne(holds, arguments: [account, Data(id.bytes)]) == nil
        }
    }

    private static func containerID(_ db: Database, account: Int64, name: ContainerName, create: Bool) throws -> Int64? {
        if let id = try Int64.fetchOne(db, sql: "SELECT id FROM containers WHERE account_id = ? AND name = ?",
                                       arguments: [account, name.value]) {
            return id
        }
        guard create else { return nil }
        try db.execute(sql: "INSERT INTO containers (account_id, name) VALUES (?, ?)", arguments: [account, name.value])
        return db.lastInsertedRowID
    }

    private static func documentRow(_ db: Database, container: Int64, path: DocumentPath, create: Bool) throws -> DocumentRow? {
        if let row = try Row.fetchOne(db, sql: "SELECT id, current_version, latest_version FROM documents WHERE container_id = ? AND path = ?",
                                      arguments: [container, path.value]) {
            return DocumentRow(id: row["id"], current: row["current_version"], latest: row["latest_version"])
        }
        guard create else { return nil }
        try db.execute(sql: "INSERT INTO documents (container_id, path) VALUES (?, ?)", arguments: [container, path.value])
        return DocumentRow(id: db.lastInsertedRowID, current: nil, latest: 0)
    }

    /// A base is good if it names the current version, or is `nil` while there is none (or it is a deletion).
    private static func checkBase(_ db: Database, document: DocumentRow, base: Int64?, path: DocumentPath) throws {
        guard let current = document.current else {
            if let base { throw XferError.conflict(path: path, current: nil, base: base) }
            return
        }
        if base == current { return }
        let state = try String.fetchOne(db, sql: "SELECT state FROM versions WHERE document_id = ? AND version = ?",
                                        arguments: [document.id, current])
        if base == nil && state == VersionState.deleted.rawValue { return }
        throw XferError.conflict(path: path, current: current, base: base)
    }

    private static func nextSequence(_ db: Database, container: Int64) throws -> Int64 {
        try db.execute(sql: "UPDATE containers SET sequence = sequence + 1 WHERE id = ?", arguments: [container])
        return try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [container])!
    }

    private static func info(_ db: Database, document: Int64, path: DocumentPath, version: Int64) throws -> DocumentInfo? {
        guard let row = try Row.fetchOne(db, sql: "SELECT ? AS path, * FROM versions WHERE document_id = ? AND version = ?",
                                         arguments: [path.value, document, version]) else { return nil }
        return try info(row: row)
    }

    private static func info(row: Row) throws -> DocumentInfo {
        let digest: Data? = row["manifest_digest"]
        return DocumentInfo(
            path: try DocumentPath(row["path"] as String), version: row["version"],
            state: VersionState(rawValue: row["state"]) ?? .uploading, kind: DocumentKind(rawValue: row["kind"]) ?? .file,
            size: row["size"], mtimeNs: row["mtime_ns"], mode: row["mode"], baseVersion: row["base_version"],
            manifestDigest: digest.flatMap { ChunkID(bytes: $0)?.hex }, files: row["files"], chunks: row["chunks"],
            device: row["device"], sequence: row["sequence"])
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await pool.read(body) }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await pool.write(body) }
    }

    /// Passes ``XferError``s through and wraps database errors as `io`.
    private static func mappingErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(.io, "the metadata database failed", cause: DescribedError(error))
        }
    }
}

