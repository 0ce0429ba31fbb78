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
    private let policy: StorePolicy

    /// Opens (creating and migrating as needed) the database at `path`.
    /// - Throws: `io` if it cannot be opened.
    public init(path: String, policy: StorePolicy = StorePolicy()) throws {
        self.policy = policy
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
        migrator.registerMigration("v2: conflicts, chunk references, key-value store") { db in
            // refs: how many committed versions (current, superseded, conflict) reference the
            // chunk, so removing a version can give its chunks' bytes back to the quota.
            try db.execute(sql: """
                ALTER TABLE account_chunks ADD COLUMN refs INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE kv (
                    container_id INTEGER NOT NULL,
                    key TEXT NOT NULL,
                    value TEXT,
                    timestamp_ns INTEGER NOT NULL,
                    device TEXT NOT NULL,
                    sequence INTEGER NOT NULL,
                    PRIMARY KEY (container_id, key)) WITHOUT ROWID;
                CREATE INDEX kv_feed ON kv (container_id, sequence);
                """)
            let rows = try Row.fetchAll(db, sql: """
                SELECT c.account_id, v.manifest FROM versions v JOIN containers c ON c.id = v.container_id
                WHERE v.manifest IS NOT NULL AND v.state IN ('current', 'superseded')
                """)
            for row in rows {
                let blob: Data = row["manifest"]
                try adjustReferences(db, account: row["account_id"], manifest: try Manifest(decoding: Array(blob)), by: 1)
            }
        }
        migrator.registerMigration("v3: chunk leases for garbage collection") { db in
            // added_at: when an upload recorded the chunk for the account. A chunk no committed
            // version references (refs = 0) is held as a lease for a commit still to come, until
            // garbage collection's grace period has passed since then.
            try db.execute(sql: """
                ALTER TABLE account_chunks ADD COLUMN added_at INTEGER NOT NULL DEFAULT 0;
                CREATE INDEX account_chunks_by_id ON account_chunks (id);
                """)
        }
        migrator.registerMigration("v4: chunk deletions") { db in
            // A chunk garbage collection is deleting (finished_at NULL) or deleted at finished_at:
            // an upload that started before then cannot be sure its stored copy survived.
            try db.execute(sql: """
                CREATE TABLE chunk_deletions (id BLOB PRIMARY KEY, started_at INTEGER NOT NULL, finished_at INTEGER) WITHOUT ROWID;
                """)
        }
        migrator.registerMigration("v5: chunk locations in packs") { db in
            try db.execute(sql: """
                CREATE TABLE chunk_locations (id BLOB PRIMARY KEY, pack TEXT NOT NULL, "offset" INTEGER NOT NULL,
                                              length INTEGER NOT NULL, recorded_at INTEGER NOT NULL) WITHOUT ROWID;
                CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack);
                """)
        }
        migrator.registerMigration("v6: pending versions by container") { db in
            try db.execute(sql: "CREATE INDEX versions_uploading ON versions (container_id) WHERE state = 'uploading'")
        }
        migrator.registerMigration("v7: deployment identity") { db in
            try db.execute(sql: """
                CREATE TABLE deployment (id TEXT NOT NULL);
                INSERT INTO deployment VALUES (lower(hex(randomblob(16))));
                """)
        }
        return migrator
    }

    // MARK: Accounts and tokens

    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        let now = try await clock()
        return try await read { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT t.hash, t.admin, a.id, a.name FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id
                WHERE t.hash = ?
                """, arguments: [Data(tokenHash)]) else { return nil }
            // The lookup is by hash of a 256-bit secret; the comparison itself is constant-time.
            let stored: Data = row["hash"]
            guard TokenHash.equal(Array(stored), tokenHash) else { return nil }
            let admin: Bool = row["admin"]
            if admin { return Principal(accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now) }
            guard let id: Int64 = row["id"], let name: String = row["name"] else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false, authenticatedAt: now)
        }
    }

    public func deploymentID() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "SELECT id FROM deployment LIMIT 1") ?? "" }
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

    public func addToken(account: AccountName, tokenHash: [UInt8]) async throws {
        try await write { db in
            let id = try Self.accountID(db, account)
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, 0, ?)",
                           arguments: [Data(tokenHash), id, Self.now()])
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await write { db in
            guard let admin = try Bool.fetchOne(db, sql: "SELECT admin FROM tokens WHERE hash = ?", arguments: [Data(hash)]) else { return false }
            if admin, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tokens WHERE admin = 1") ?? 0 <= 1 {
                throw XferError(.badRequest, "that is the only admin token; the server would have none left")
            }
            try db.execute(sql: "DELETE FROM tokens WHERE hash = ?", arguments: [Data(hash)])
            return true
        }
    }

    public func revokeTokens(account: AccountName) async throws -> Int {
        try await write { db in
            let id = try Self.accountID(db, account)
            try db.execute(sql: "DELETE FROM tokens WHERE account_id = ?", arguments: [id])
            return db.changesCount
        }
    }

    private static func accountID(_ db: Database, _ name: AccountName) throws -> Int64 {
        guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM accounts WHERE name = ?", arguments: [name.value]) else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
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

    public func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (count: Int, bytes: Int64) {
        try await write { db in
            var lacking = Set(try Self.lacking(db, account: account, chunks.map(\.id)))
            if let uploadStartedAt {
                let deleted = try db.cachedStatement(sql: """
                    SELECT 1 FROM chunk_deletions WHERE id = ? AND (finished_at IS NULL OR finished_at >= ?)
                    """)
                for id in lacking where try Row.fetchOne(deleted, arguments: [Data(id.bytes), uploadStartedAt]) != nil { lacking.remove(id) }
            }
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
            let insert = try db.cachedStatement(sql: "INSERT INTO account_chunks (account_id, id, length, added_at) VALUES (?, ?, ?, ?)")
            let now = Self.now()
            for chunk in fresh { try insert.execute(arguments: [account, Data(chunk.id.bytes), chunk.length, now]) }
            try db.execute(sql: "UPDATE accounts SET used = used + ? WHERE id = ?", arguments: [bytes, account])
            return (fresh.count, bytes)
        }
    }

    // MARK: Documents

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            let (document, version) = try Self.announce(db, account: account, container: containerID, request, policy: policy, direct: false)
            return try Self.info(db, document: document, path: request.path, version: version)!
        }
    }

    /// Records a pending version. A direct one (committed in the same transaction) is not
    /// counted against the account's pending versions.
    private static func announce(_ db: Database, account: Int64, container containerID: Int64, _ request: AnnounceRequest,
                                 policy: StorePolicy, direct: Bool) throws -> (document: Int64, version: Int64) {
        try checkNamespace(db, container: containerID, path: request.path, kind: request.kind)
        if !direct {
            try AccountLimits.checkNewPending(existing: try Int64.fetchOne(db, sql: """
                SELECT COUNT(*) FROM versions WHERE state = 'uploading' AND container_id IN (SELECT id FROM containers WHERE account_id = ?)
                """, arguments: [account]) ?? 0, policy: policy)
        }
        let document = try documentRow(db, container: containerID, path: request.path, create: true)!
        let version = document.latest + 1
        let sequence = try nextSequence(db, container: containerID)
        try db.execute(sql: "UPDATE documents SET latest_version = ? WHERE id = ?", arguments: [version, document.id])
        try db.execute(sql: """
            INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                  device, sequence, created_at)
            VALUES (?, ?, ?, 'uploading', ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [document.id, version, containerID, request.kind.rawValue, request.size, request.mtimeNs,
                             request.mode, request.baseVersion, request.device, sequence, now()])
        return (document.id, version)
    }

    public func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                       manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            return try Self.commit(db, account: account, container: containerID, path: path, version: version, baseVersion: baseVersion,
                                   manifest: manifest, encoded: encoded, policy: policy)
        }
    }

    public func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>] {
        let policy = policy
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            return try items.map { item in
                do {
                    var info: DocumentInfo? = nil
                    try db.inSavepoint {
                        let (_, version) = try Self.announce(db, account: account, container: containerID, item.announce, policy: policy, direct: true)
                        info = try Self.commit(db, account: account, container: containerID, path: item.announce.path, version: version,
                                               baseVersion: item.announce.baseVersion, manifest: item.manifest, encoded: item.encoded, policy: policy)
                        return .commit
                    }
                    return .success(info!)
                } catch let error as XferError {
                    return .failure(error)
                }
            }
        }
    }

    /// Commits an announced version (see ``MetadataStore/commit(account:container:path:version:baseVersion:manifest:encoded:)``).
    private static func commit(_ db: Database, account: Int64, container containerID: Int64, path: DocumentPath, version: Int64,
                               baseVersion: Int64?, manifest: Manifest, encoded: [UInt8], policy: StorePolicy) throws -> DocumentInfo {
        guard let document = try documentRow(db, container: containerID, path: path, create: false),
              let row = try Row.fetchOne(db, sql: "SELECT state, mtime_ns FROM versions WHERE document_id = ? AND version = ?",
                                         arguments: [document.id, version]) else {
            throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
        }
        let state: String = row["state"]
        guard state == VersionState.uploading.rawValue else {
            throw XferError(.conflict, "\(path) version \(version) is already \(state)")
        }
        let kind = DocumentKind(manifest.kind)
        try checkNamespace(db, container: containerID, path: path, kind: kind)
        let declared = try CommitRules.distinctChunks(manifest)
        let missing = try CommitRules.missing(declared, held: try heldLengths(db, account: account, Array(declared.keys)))
        guard missing.isEmpty else {
            throw XferError.missingChunks(missing)
        }
        let digest = Data(ChunkID.of(encoded).bytes)
        var outcome = VersionState.current
        if let current = document.current,
           let currentRow = try Row.fetchOne(db, sql: "SELECT state, mtime_ns, manifest_digest FROM versions WHERE document_id = ? AND version = ?",
                                             arguments: [document.id, current]),
           currentRow["state"] == VersionState.current.rawValue {
            let currentDigest: Data? = currentRow["manifest_digest"]
            if current == baseVersion || currentDigest == digest {
                // Edited from the current version (or the same content): it is replaced.
                try setState(db, .superseded, document: document.id, version: current, container: containerID)
            } else if (row["mtime_ns"] as Int64) >= (currentRow["mtime_ns"] as Int64) {
                // A stale base and the later edit: this becomes current, the other a conflict version.
                try setState(db, .conflict, document: document.id, version: current, container: containerID)
            } else {
                // A stale base and the earlier edit: kept as a conflict version.
                outcome = .conflict
            }
        }
        let sequence = try nextSequence(db, container: containerID)
        try db.execute(sql: """
            UPDATE versions SET state = ?, kind = ?, size = ?, manifest_digest = ?, manifest = ?, files = ?,
                                chunks = ?, base_version = ?, sequence = ?
            WHERE document_id = ? AND version = ?
            """, arguments: [outcome.rawValue, kind.rawValue, manifest.totalSize, digest, Data(encoded), manifest.fileCount,
                             manifest.allChunks.count, baseVersion, sequence, document.id, version])
        if outcome == .current {
            try db.execute(sql: "UPDATE documents SET current_version = ? WHERE id = ?", arguments: [version, document.id])
        }
        try adjustReferences(db, account: account, manifest: manifest, by: 1)
        try prune(db, account: account, document: document.id, policy: policy)
        return try info(db, document: document.id, path: path, version: version)!
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8]) {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let number = version ?? document.current,
                  let info = try Self.info(db, document: document.id, path: path, version: number),
                  [.current, .superseded, .conflict].contains(info.state),
                  let blob = try Data.fetchOne(db, sql: "SELECT manifest FROM versions WHERE document_id = ? AND version = ?",
                                               arguments: [document.id, number]) else {
                throw XferError(.notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
            }
            return (info, Array(blob))
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws -> DocumentInfo {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let info = try Self.info(db, document: document.id, path: path, version: version ?? document.current ?? document.latest) else {
                throw XferError(.notFound, version.map { "\(path) has no version \($0)" } ?? "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let rows = try Row.fetchAll(db, sql: "SELECT ? AS path, v.*, \(Self.conflictsColumn) FROM versions v WHERE v.document_id = ? ORDER BY v.version DESC",
                                        arguments: [path.value, document.id])
            return VersionList(versions: try rows.map(Self.info(row:)))
        }
    }

    public func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: request.path, create: false),
                  let keep = try Self.info(db, document: document.id, path: request.path, version: request.keep) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            guard keep.state == .current || keep.state == .conflict else {
                throw XferError(.badRequest, "\(request.path) version \(request.keep) is \(keep.state.rawValue); keep the current version or a conflict version (see `xfer versions`)")
            }
            var others = keep.conflicts ?? []
            if let current = document.current, current != request.keep { others.append(current) }
            for other in others where other != request.keep {
                if request.keepAll {
                    try Self.setState(db, .superseded, document: document.id, version: other, container: containerID)
                } else {
                    try Self.removeVersion(db, account: account, document: document.id, version: other)
                }
            }
            try Self.setState(db, .current, document: document.id, version: request.keep, container: containerID)
            try db.execute(sql: "UPDATE documents SET current_version = ? WHERE id = ?", arguments: [request.keep, document.id])
            try Self.prune(db, account: account, document: document.id, policy: policy)
            return try Self.info(db, document: document.id, path: request.path, version: request.keep)!
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws -> DocumentList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.path, v.*, \(Self.conflictsColumn) FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = ? AND substr(d.path, 1, length(?)) = ? AND d.path > ? AND v.state != 'deleted'
                ORDER BY d.path LIMIT ?
                """, arguments: [containerID, prefix, prefix, after ?? "", limit + 1])
            return DocumentList.page(try rows.map(Self.info(row:)), cursor: cursor, limit: limit)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
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
            try Self.setState(db, .superseded, document: document.id, version: current, container: containerID)
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: """
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                      sequence, created_at)
                VALUES (?, ?, ?, 'deleted', ?, 0, ?, ?, ?, ?, ?)
                """, arguments: [document.id, version, containerID, info.kind.rawValue, Self.now() * 1_000_000_000,
                                 info.mode, current, sequence, Self.now()])
            try db.execute(sql: "UPDATE documents SET current_version = ?, latest_version = ? WHERE id = ?",
                           arguments: [version, version, document.id])
            try Self.prune(db, account: account, document: document.id, policy: policy)
            return try Self.info(db, document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false, head: 0)
            }
            // The head first and no row past it, as on PostgreSQL (one read snapshot here).
            let head = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            let documents = try Row.fetchAll(db, sql: """
                SELECT d.path, v.*, \(Self.conflictsColumn) FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = ? AND v.sequence > ? AND v.sequence <= ? ORDER BY v.sequence LIMIT ?
                """, arguments: [containerID, after, head, limit + 1]).map(Self.info(row:))
            let keys = try Row.fetchAll(db, sql: "SELECT * FROM kv WHERE container_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence LIMIT ?",
                                        arguments: [containerID, after, head, limit + 1]).map(Self.entry(row:))
            return ChangeList.page(documents: documents, keys: keys, after: after, head: head, limit: limit)
        }
    }

    // MARK: Key-value store

    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws -> KeyValueWriteResult {
        let policy = policy
        let (key, text) = try KeyValueRules.check(request)
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            let existing = try Row.fetchOne(db, sql: "SELECT * FROM kv WHERE container_id = ? AND key = ?", arguments: [containerID, key])
                .map(Self.entry(row:))
            if let existing, !existing.isOlder(thanTimestamp: request.timestampNs, device: request.device) {
                return KeyValueWriteResult(applied: false, entry: existing)
            }
            if let text {
                let (keys, bytes) = try Self.keyValueUsage(db, container: containerID, excluding: key)
                try KeyValueRules.checkLimits(keys: keys, bytes: bytes, key: key, text: text, policy: policy)
            } else if existing == nil || existing?.value == nil {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: "INSERT OR REPLACE INTO kv (container_id, key, value, timestamp_ns, device, sequence) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [containerID, key, text, request.timestampNs, request.device, sequence])
            return KeyValueWriteResult(applied: true, entry: KeyValueEntry(key: key, value: request.value, timestampNs: request.timestampNs,
                                                                           device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let row = try Row.fetchOne(db, sql: "SELECT * FROM kv WHERE container_id = ? AND key = ? AND value IS NOT NULL",
                                             arguments: [containerID, key]) else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try Self.entry(row: row)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        let policy = policy
        return try await read { db in
            guard let id = try Self.containerID(db, account: account, name: container, create: false) else {
                return KeyValueList(entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try Row.fetchAll(db, sql: "SELECT * FROM kv WHERE container_id = ? AND value IS NOT NULL ORDER BY key", arguments: [id])
                .map(Self.entry(row:))
            return KeyValueList(entries: entries, bytes: try Self.keyValueUsage(db, container: id, excluding: nil).bytes,
                                maximumBytes: policy.keyValueMaximumBytes,
                                maximumKeys: policy.keyValueMaximumKeys)
        }
    }

    // MARK: Helpers (inside a transaction)

    /// Live keys of a container's key-value store and their bytes (key plus JSON text), what
    /// the limits count; `excluding` leaves one key out (the one being written).
    // MARK: Maintenance

    public func heldChunks(_ ids: [ChunkID]) async throws -> Set<ChunkID> {
        try await read { db in
            var held: Set<ChunkID> = []
            let statement = try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM account_chunks WHERE id = ?)")
            for id in ids where try Bool.fetchOne(statement, arguments: [Data(id.bytes)]) == true { held.insert(id) }
            return held
        }
    }

    public func clock() async throws -> Int64 { Int64(Date().timeIntervalSince1970 * 1e9) }

    public func beginDeletion(_ ids: [ChunkID]) async throws -> [ChunkID] {
        let now = try await clock()
        return try await write { db in
            let held = try db.cachedStatement(sql: "SELECT 1 FROM account_chunks WHERE id = ? LIMIT 1")
            let mark = try db.cachedStatement(sql: "INSERT OR REPLACE INTO chunk_deletions (id, started_at, finished_at) VALUES (?, ?, NULL)")
            var marked: [ChunkID] = []
            for id in ids where try Row.fetchOne(held, arguments: [Data(id.bytes)]) == nil {
                try mark.execute(arguments: [Data(id.bytes), now])
                marked.append(id)
            }
            return marked
        }
    }

    public func endDeletion(_ ids: [ChunkID]) async throws {
        let now = try await clock()
        try await write { db in
            let finish = try db.cachedStatement(sql: "UPDATE chunk_deletions SET finished_at = ? WHERE id = ?")
            for id in ids { try finish.execute(arguments: [now, Data(id.bytes)]) }
        }
    }

    public func forgetDeletions(before cutoff: Int64) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM chunk_deletions WHERE finished_at < ?", arguments: [cutoff]) }
    }

    public func recordLocations(_ locations: [ChunkLocation]) async throws {
        guard !locations.isEmpty else { return }
        let now = try await clock()
        try await write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO chunk_locations (id, pack, "offset", length, recorded_at) VALUES (?, ?, ?, ?, ?)
                """)
            for location in locations {
                try insert.execute(arguments: [Data(location.id.bytes), location.pack, location.offset, location.length, now])
            }
        }
    }

    public func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation] {
        try await read { db in
            let select = try db.cachedStatement(sql: #"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id = ?"#)
            return try ids.compactMap { id in try Row.fetchOne(select, arguments: [Data(id.bytes)]).flatMap(Self.location) }
        }
    }

    public func locations(shard: UInt8) async throws -> [ChunkLocation] {
        try await read { db in
            let (low, high) = ChunkLocation.shardBounds(shard)
            return try Row.fetchAll(db, sql: """
                SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id >= ? AND id < ? ORDER BY id
                """, arguments: [Data(low), Data(high)]).compactMap(Self.location)
        }
    }

    public func locations(pack: String) async throws -> [ChunkLocation] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE pack = ? ORDER BY "offset"
                """, arguments: [pack]).compactMap(Self.location)
        }
    }

    public func removeLocations(_ ids: [ChunkID]) async throws -> Set<String> {
        try await write { db in
            let pack = try db.cachedStatement(sql: "SELECT pack FROM chunk_locations WHERE id = ?")
            let remove = try db.cachedStatement(sql: "DELETE FROM chunk_locations WHERE id = ?")
            var packs: Set<String> = []
            for id in ids {
                if let name = try String.fetchOne(pack, arguments: [Data(id.bytes)]) { packs.insert(name) }
                try remove.execute(arguments: [Data(id.bytes)])
            }
            let live = try db.cachedStatement(sql: "SELECT 1 FROM chunk_locations WHERE pack = ? LIMIT 1")
            return try packs.filter { try Row.fetchOne(live, arguments: [$0]) == nil }
        }
    }

    public func packUsage() async throws -> [String: Int64] {
        try await read { db in
            var usage: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT pack, SUM(length) AS bytes FROM chunk_locations GROUP BY pack") {
                usage[row["pack"]] = row["bytes"]
            }
            return usage
        }
    }

    public func moveLocations(_ moved: [ChunkLocation], from pack: String) async throws -> Int {
        try await write { db in
            let move = try db.cachedStatement(sql: #"UPDATE chunk_locations SET pack = ?, "offset" = ?, length = ? WHERE id = ? AND pack = ?"#)
            var count = 0
            for location in moved {
                try move.execute(arguments: [location.pack, location.offset, location.length, Data(location.id.bytes), pack])
                count += db.changesCount
            }
            return count
        }
    }

    private static func location(_ row: Row) -> ChunkLocation? {
        guard let id = ChunkID(bytes: row["id"] as Data) else { return nil }
        return ChunkLocation(id: id, pack: row["pack"], offset: row["offset"], length: row["length"], recordedAt: row["recorded_at"])
    }

    public func expireLeases(olderThan cutoff: Int64) async throws -> (chunks: Int, bytes: Int64) {
        try await write { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT account_id, SUM(length) AS bytes, COUNT(*) AS count FROM account_chunks
                WHERE refs <= 0 AND added_at <= ? GROUP BY account_id
                """, arguments: [cutoff])
            try db.execute(sql: "DELETE FROM account_chunks WHERE refs <= 0 AND added_at <= ?", arguments: [cutoff])
            var total = (chunks: 0, bytes: Int64(0))
            for row in rows {
                let bytes: Int64 = row["bytes"]
                try db.execute(sql: "UPDATE accounts SET used = MAX(0, used - ?) WHERE id = ?", arguments: [bytes, row["account_id"]])
                total.chunks += row["count"] as Int
                total.bytes += bytes
            }
            return total
        }
    }

    public func expireUploads(olderThan cutoff: Int64) async throws -> Int {
        try await write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT document_id, version, container_id FROM versions WHERE state = 'uploading' AND created_at <= ?",
                                        arguments: [cutoff])
            for row in rows {
                // The removal is a change on the feed, like any other (a waiting client re-reads the document).
                _ = try Self.nextSequence(db, container: row["container_id"])
                try db.execute(sql: "DELETE FROM versions WHERE document_id = ? AND version = ?", arguments: [row["document_id"], row["version"]])
            }
            return rows.count
        }
    }

    public func storedManifests(after: StoredVersionKey?, limit: Int) async throws -> [StoredManifest] {
        try await read { db in
            let after = after ?? StoredVersionKey(document: 0, version: 0)
            let rows = try Row.fetchAll(db, sql: """
                SELECT c.account_id, c.name AS container, d.path, v.document_id, v.version, v.state, v.manifest, v.manifest_digest
                FROM versions v JOIN documents d ON d.id = v.document_id JOIN containers c ON c.id = v.container_id
                WHERE v.manifest IS NOT NULL AND (v.document_id, v.version) > (?, ?)
                ORDER BY v.document_id, v.version LIMIT ?
                """, arguments: [after.document, after.version, limit])
            return rows.map { row in
                let manifest: Data = row["manifest"]
                let digest: Data? = row["manifest_digest"]
                return StoredManifest(key: StoredVersionKey(document: row["document_id"], version: row["version"]),
                                      account: row["account_id"], container: row["container"], path: row["path"],
                                      state: row["state"], encoded: Array(manifest), digest: digest.map(Array.init))
            }
        }
    }

    public func chunkRecords(after: ChunkRecordKey?, limit: Int) async throws -> [ChunkRecordRow] {
        try await read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT account_id, id, length, refs FROM account_chunks WHERE (account_id, id) > (?, ?)
                ORDER BY account_id, id LIMIT ?
                """, arguments: [after?.account ?? -1, Data(after?.id.bytes ?? []), limit])
            return rows.compactMap { row in
                guard let id = ChunkID(bytes: row["id"] as Data) else { return nil }
                return ChunkRecordRow(account: row["account_id"], id: id, length: row["length"], refs: row["refs"])
            }
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT a.id, a.name, a.used, (SELECT COALESCE(SUM(length), 0) FROM account_chunks WHERE account_id = a.id) AS held
                FROM accounts a ORDER BY a.id
                """).map { AccountUsage(id: $0["id"], name: $0["name"], used: $0["used"], held: $0["held"]) }
        }
    }

    private static func keyValueUsage(_ db: Database, container: Int64, excluding key: String?) throws -> (keys: Int, bytes: Int) {
        let row = try Row.fetchOne(db, sql: """
            SELECT COUNT(*) AS keys, COALESCE(SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))), 0) AS bytes
            FROM kv WHERE container_id = ? AND value IS NOT NULL AND key IS NOT ?
            """, arguments: [container, key])!
        return (row["keys"], row["bytes"])
    }

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

    /// The stored length of each of `ids` the account holds.
    private static func heldLengths(_ db: Database, account: Int64, _ ids: [ChunkID]) throws -> [ChunkID: Int64] {
        let lookup = try db.cachedStatement(sql: "SELECT length FROM account_chunks WHERE account_id = ? AND id = ?")
        var held: [ChunkID: Int64] = [:]
        for id in ids {
            if let length = try Int64.fetchOne(lookup, arguments: [account, Data(id.bytes)]) { held[id] = length }
        }
        return held
    }

    private static func containerID(_ db: Database, account: Int64, name: ContainerName, create: Bool,
                                    policy: StorePolicy = StorePolicy()) throws -> Int64? {
        if let id = try Int64.fetchOne(db, sql: "SELECT id FROM containers WHERE account_id = ? AND name = ?",
                                       arguments: [account, name.value]) {
            return id
        }
        guard create else { return nil }
        try AccountLimits.checkNewContainer(existing: try Int64.fetchOne(db, sql: "SELECT COUNT(*) FROM containers WHERE account_id = ?",
                                                                         arguments: [account]) ?? 0, policy: policy)
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

    /// Throws `conflict` if a live document of the container is an ancestor of `path` (a
    /// directory document aside) or lies below it (unless `kind` is a directory): the namespace
    /// is a tree (docs/PROTOCOL.md, "Names"). Run inside the write transaction that creates or
    /// commits the version, so the rule holds atomically.
    private static func checkNamespace(_ db: Database, container: Int64, path: DocumentPath, kind: DocumentKind) throws {
        // Two lookups, each a search of the (container_id, path) index: SQLite plans the two
        // conditions joined by OR as a scan of the whole container, which made every announce
        // and commit cost time in proportion to the documents already there.
        let live = """
            SELECT d.path FROM documents d
            JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
            WHERE d.container_id = ? AND %@ AND v.state != 'deleted'
            LIMIT 1
            """
        let ancestors = path.ancestors
        if !ancestors.isEmpty, let other = try String.fetchOne(db, sql: live.replacingOccurrences(
            of: "%@", with: "d.path IN (\(ancestors.map { _ in "?" }.joined(separator: ", "))) AND v.kind != '\(DocumentKind.directory.rawValue)'"),
            arguments: StatementArguments([container] as [any DatabaseValueConvertible]) + StatementArguments(ancestors)) {
            throw path.namespaceConflict(with: other)
        }
        let range = path.descendantRange
        if !kind.holdsDocuments,
           let other = try String.fetchOne(db, sql: live.replacingOccurrences(of: "%@", with: "d.path >= ? AND d.path < ?"),
                                           arguments: [container, range.low, range.high]) {
            throw path.namespaceConflict(with: other)
        }
    }

    private static func nextSequence(_ db: Database, container: Int64) throws -> Int64 {
        try db.execute(sql: "UPDATE containers SET sequence = sequence + 1 WHERE id = ?", arguments: [container])
        return try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [container])!
    }

    /// Changes a version's state as one change on the feed.
    private static func setState(_ db: Database, _ state: VersionState, document: Int64, version: Int64, container: Int64) throws {
        let sequence = try nextSequence(db, container: container)
        try db.execute(sql: "UPDATE versions SET state = ?, sequence = ? WHERE document_id = ? AND version = ?",
                       arguments: [state.rawValue, sequence, document, version])
    }

    /// Counts a committed manifest's distinct chunks as referenced once more (`by: 1`) or once
    /// less (`by: -1`); chunks no version references any more leave the account and its quota.
    static func adjustReferences(_ db: Database, account: Int64, manifest: Manifest, by delta: Int) throws {
        let update = try db.cachedStatement(sql: "UPDATE account_chunks SET refs = refs + ? WHERE account_id = ? AND id = ?")
        var released: Int64 = 0
        let unreferenced = try db.cachedStatement(sql: "SELECT length FROM account_chunks WHERE account_id = ? AND id = ? AND refs <= 0")
        let remove = try db.cachedStatement(sql: "DELETE FROM account_chunks WHERE account_id = ? AND id = ?")
        for id in Set(manifest.allChunks.map(\.id)) {
            let key: StatementArguments = [account, Data(id.bytes)]
            try update.execute(arguments: [delta] + key)
            if delta < 0, let length = try Int64.fetchOne(unreferenced, arguments: key) {
                try remove.execute(arguments: key)
                released += length
            }
        }
        if released > 0 {
            try db.execute(sql: "UPDATE accounts SET used = MAX(0, used - ?) WHERE id = ?", arguments: [released, account])
        }
    }

    /// Removes a version and gives back what only it referenced.
    private static func removeVersion(_ db: Database, account: Int64, document: Int64, version: Int64) throws {
        if let blob = try Data.fetchOne(db, sql: "SELECT manifest FROM versions WHERE document_id = ? AND version = ?",
                                        arguments: [document, version]) {
            try adjustReferences(db, account: account, manifest: try Manifest(decoding: Array(blob)), by: -1)
        }
        try db.execute(sql: "DELETE FROM versions WHERE document_id = ? AND version = ?", arguments: [document, version])
    }

    /// Removes superseded versions past the policy: beyond the newest `keepVersions` and older
    /// than `keepDays`. Current, conflict, uploading and deletion versions are never pruned.
    private static func prune(_ db: Database, account: Int64, document: Int64, policy: StorePolicy) throws {
        let cutoff = now() - Int64(policy.keepDays) * 86_400
        let old = try Int64.fetchAll(db, sql: """
            SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' AND created_at <= ?
            AND version NOT IN (SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' ORDER BY version DESC LIMIT ?)
            """, arguments: [document, cutoff, document, policy.keepVersions])
        for version in old { try removeVersion(db, account: account, document: document, version: version) }
    }

    /// The unresolved conflict versions of the row's document, as a comma-separated list.
    private static let conflictsColumn =
        "(SELECT group_concat(c.version) FROM versions c WHERE c.document_id = v.document_id AND c.state = 'conflict') AS conflicts"

    private static func info(_ db: Database, document: Int64, path: DocumentPath, version: Int64) throws -> DocumentInfo? {
        guard let row = try Row.fetchOne(db, sql: "SELECT ? AS path, v.*, \(conflictsColumn) FROM versions v WHERE v.document_id = ? AND v.version = ?",
                                         arguments: [path.value, document, version]) else { return nil }
        return try info(row: row)
    }

    private static func entry(row: Row) throws -> KeyValueEntry {
        let text: String? = row["value"]
        return KeyValueEntry(key: row["key"], value: try text.map { try JSONValue(parsing: $0) }, timestampNs: row["timestamp_ns"],
                             device: row["device"], sequence: row["sequence"])
    }

    private static func info(row: Row) throws -> DocumentInfo {
        let digest: Data? = row["manifest_digest"]
        let conflicts = (row["conflicts"] as String?)?.split(separator: ",").compactMap { Int64($0) }.sorted()
        return DocumentInfo(
            path: try DocumentPath(row["path"] as String), version: row["version"],
            state: VersionState(rawValue: row["state"]) ?? .uploading, kind: DocumentKind(rawValue: row["kind"]) ?? .file,
            size: row["size"], mtimeNs: row["mtime_ns"], mode: row["mode"], baseVersion: row["base_version"],
            manifestDigest: digest.flatMap { ChunkID(bytes: $0)?.hex }, files: row["files"], chunks: row["chunks"],
            device: row["device"], sequence: row["sequence"], conflicts: conflicts?.isEmpty == false ? conflicts : nil)
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// Test seam: caps the database at its current size plus `extraPages` pages, so the next
    /// writes that need more meet SQLITE_FULL as on a full disk; `nil` lifts the cap.
    package func limitGrowth(extraPages: Int?) async throws {
        try await pool.writeWithoutTransaction { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(extraPages.map { pages + $0 } ?? 1_073_741_823)")
        }
    }

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
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            throw XferError(.storageFull, "the metadata database's disk is full; nothing was changed; free some space and retry", cause: DescribedError(error))
        } catch {
            throw XferError(.io, "the metadata database failed", cause: DescribedError(error))
        }
    }
}

