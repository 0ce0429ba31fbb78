import Foundation
import GRDB
import XferCore
import XferProtocol

/// The embedded metadata store: one SQLite database (WAL mode) in the server's data directory.
///
/// GRDB's `DatabasePool` serializes writers and runs readers concurrently; every method is
/// one transaction, its rules written once for both backends (``SQLMetadataStore``).
public final class SQLiteMetadataStore: SQLMetadataStore {
    let pool: DatabasePool

    let policy: StorePolicy

    let sealing: SealingKeys?

    let ids: ChunkIDCipher?

    /// Opens (creating and migrating as needed) the database at `path`.
    /// - Parameter sealing: Keys that seal manifests and values at rest and open the store's
    ///   index key, which chunk ids are enciphered under (made, and the ids stored so far
    ///   enciphered, the first time a store is given keys). ``ServerData/open(_:policy:sealing:use:metadata:packs:)``
    ///   checks them against the ones the store records.
    /// - Throws: `io` if it cannot be opened.
    public convenience init(path: String, policy: StorePolicy = StorePolicy(), sealing: SealingKeys? = nil) throws {
        try self.init(path: path, policy: policy, sealing: sealing, migratingUpTo: nil)
    }

    /// Test seam for migrations: `migratingUpTo` stops after the migration of that name, so a
    /// test can fill a database laid out as an older release left it.
    package init(
        path: String, policy: StorePolicy = StorePolicy(), sealing: SealingKeys? = nil, migratingUpTo last: String?
    ) throws {
        self.policy = policy
        self.sealing = sealing
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            if !db.configuration.readonly { try db.execute(sql: Self.writerPragmas) }
            SQLiteSession.prepare(db)
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB sets `synchronous = NORMAL` on the writer as it turns WAL on, after
            // prepareDatabase: under NORMAL a commit is synced only at the next checkpoint, so a
            // power cut could take back commits already answered. Every commit is synced here.
            try pool.writeWithoutTransaction { try $0.execute(sql: "PRAGMA synchronous = FULL") }
            if let last { try Self.migrator.migrate(pool, upTo: last) } else { try Self.migrator.migrate(pool) }
            if last == nil {
                try pool.write { db in
                    try MetadataTransaction(sql: SQLiteSession(db: db), policy: policy, checkingPlainIDs: false)
                        .fillFoldedNames()
                }
            }
        } catch {
            throw XferError(.io, "cannot open the metadata database \(path)", cause: DescribedError(error))
        }
        let pool = pool
        do {
            ids = try sealing.map { keys in
                try pool.write { db in
                    try MetadataTransaction(sql: SQLiteSession(db: db), policy: policy, checkingPlainIDs: false)
                        .indexKey(keys)
                }
            }
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(.io, "cannot set up the index key of \(path)", cause: DescribedError(error))
        }
    }

    /// The writer's page cache and checkpoints. Chunk ids are random, so each upload's rows land
    /// on pages all over the id-keyed tables: with SQLite's default 2 MiB cache most of those
    /// pages were read again for every batch, and a checkpoint every 1,000 WAL pages copied each
    /// page into the database once per batch that touched it. A 32 MiB cache and a checkpoint
    /// every 8,192 pages (32 MiB) cut a first push of 200,000 small files from 20.0–20.5 to
    /// 17.7 s (docs/PERFORMANCE.md, "What the server writes"); the WAL is cut back to 32 MiB after a
    /// checkpoint.
    static let writerPragmas = """
        PRAGMA cache_size = -32768;
        PRAGMA wal_autocheckpoint = 8192;
        PRAGMA journal_size_limit = 33554432;
        """

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
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
            try db.execute(
                sql: """
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
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT c.account_id, v.manifest FROM versions v JOIN containers c ON c.id = v.container_id
                    WHERE v.manifest IS NOT NULL AND v.state IN ('current', 'superseded')
                    """)
            for row in rows {
                let blob: Data = row["manifest"]
                try MetadataTransaction(sql: SQLiteSession(db: db), policy: StorePolicy(), checkingPlainIDs: false)
                    .adjustReferences(account: row["account_id"], manifest: try Manifest(decoding: Array(blob)), by: 1)
            }
        }
        migrator.registerMigration("v3: chunk leases for garbage collection") { db in
            // added_at: when an upload recorded the chunk for the account. A chunk no committed
            // version references (refs = 0) is held as a lease for a commit still to come, until
            // garbage collection's grace period has passed since then.
            try db.execute(
                sql: """
                    ALTER TABLE account_chunks ADD COLUMN added_at INTEGER NOT NULL DEFAULT 0;
                    CREATE INDEX account_chunks_by_id ON account_chunks (id);
                    """)
        }
        migrator.registerMigration("v4: chunk deletions") { db in
            // A chunk garbage collection is deleting (finished_at NULL) or deleted at finished_at:
            // an upload that started before then cannot be sure its stored copy survived.
            try db.execute(
                sql: """
                    CREATE TABLE chunk_deletions (id BLOB PRIMARY KEY, started_at INTEGER NOT NULL, finished_at INTEGER) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v5: chunk locations in packs") { db in
            try db.execute(
                sql: """
                    CREATE TABLE chunk_locations (id BLOB PRIMARY KEY, pack TEXT NOT NULL, "offset" INTEGER NOT NULL,
                                                  length INTEGER NOT NULL, recorded_at INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack);
                    """)
        }
        migrator.registerMigration("v6: pending versions by container") { db in
            try db.execute(sql: "CREATE INDEX versions_uploading ON versions (container_id) WHERE state = 'uploading'")
        }
        migrator.registerMigration("v7: deployment identity") { db in
            try db.execute(
                sql: """
                    CREATE TABLE deployment (id TEXT NOT NULL);
                    INSERT INTO deployment VALUES (lower(hex(randomblob(16))));
                    """)
        }
        migrator.registerMigration("v8: sealing keys") { db in
            try db.execute(
                sql: """
                    CREATE TABLE sealing_keys (id TEXT PRIMARY KEY, added_at INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE TABLE sealing_index (key_id TEXT PRIMARY KEY, wrapped BLOB NOT NULL) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v9: end-to-end encrypted containers") { db in
            try db.execute(
                sql: """
                    CREATE TABLE container_keys (container_id INTEGER PRIMARY KEY REFERENCES containers(id),
                                                 wrapped BLOB NOT NULL, key_id TEXT NOT NULL, updated_at INTEGER NOT NULL)
                    """)
        }
        migrator.registerMigration("v10: compact chunk index") { db in
            // Each upload inserts rows keyed by random chunk ids, so a batch dirties pages all
            // over these trees and the WAL writes every one of them again: smaller trees, fewer
            // pages. A location names its pack by number (the name and the time it was recorded
            // are the pack's, in `packs`), and a holding is keyed by the chunk first, which also
            // serves the look-ups by chunk alone that needed a second index (docs/PERFORMANCE.md,
            // "What the server writes").
            try db.execute(
                sql: """
                    CREATE TABLE packs (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, recorded_at INTEGER NOT NULL);
                    INSERT INTO packs (name, recorded_at) SELECT pack, MAX(recorded_at) FROM chunk_locations GROUP BY pack ORDER BY MIN(recorded_at);
                    CREATE TABLE chunk_locations_v10 (id BLOB PRIMARY KEY, pack_id INTEGER NOT NULL, "offset" INTEGER NOT NULL,
                                                      length INTEGER NOT NULL) WITHOUT ROWID;
                    INSERT INTO chunk_locations_v10 (id, pack_id, "offset", length)
                        SELECT l.id, p.id, l."offset", l.length FROM chunk_locations l JOIN packs p ON p.name = l.pack;
                    DROP TABLE chunk_locations;
                    ALTER TABLE chunk_locations_v10 RENAME TO chunk_locations;
                    CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack_id);
                    CREATE TABLE account_chunks_v10 (
                        id BLOB NOT NULL,
                        account_id INTEGER NOT NULL,
                        length INTEGER NOT NULL,
                        refs INTEGER NOT NULL DEFAULT 0,
                        added_at INTEGER NOT NULL DEFAULT 0,
                        PRIMARY KEY (id, account_id)) WITHOUT ROWID;
                    INSERT INTO account_chunks_v10 (id, account_id, length, refs, added_at)
                        SELECT id, account_id, length, refs, added_at FROM account_chunks;
                    DROP TABLE account_chunks;
                    ALTER TABLE account_chunks_v10 RENAME TO account_chunks;
                    """)
        }
        migrator.registerMigration("v11: folded names for queries") { db in
            // Filled by MetadataTransaction.fillFoldedNames once migrated (Swift folds the names).
            try db.execute(
                sql: """
                    ALTER TABLE documents ADD COLUMN name_folded TEXT;
                    CREATE INDEX documents_by_name ON documents (container_id, name_folded);
                    """)
        }
        migrator.registerMigration("v12: query indexes") { db in
            // docs/PERFORMANCE.md, "Search at a million documents": a name tested in path order
            // from the index alone; time and size orders, and the deleted and conflicted, from
            // indexes of their own.
            try db.execute(
                sql: """
                    CREATE INDEX documents_by_path_name ON documents (container_id, path, name_folded);
                    CREATE INDEX versions_by_mtime ON versions (container_id, mtime_ns);
                    CREATE INDEX versions_by_size ON versions (container_id, size);
                    CREATE INDEX versions_deleted ON versions (container_id, document_id) WHERE state = 'deleted';
                    CREATE INDEX versions_conflict ON versions (container_id, document_id) WHERE state = 'conflict';
                    """)
        }
        migrator.registerMigration("v13: web sessions, share links, superseded times") { db in
            // The web view's signed-in browsers (docs/WEB.md): a session's secret kept as its
            // SHA-256, with the token it was opened with (revoking that ends the session).
            // Share links: the link's secret kept as its SHA-256, what it grants, until when.
            try db.execute(
                sql: """
                    CREATE TABLE web_sessions (hash BLOB PRIMARY KEY, account_id INTEGER NOT NULL REFERENCES accounts(id),
                      token_hash BLOB NOT NULL, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE INDEX web_sessions_by_account ON web_sessions (account_id, created_at);
                    CREATE INDEX web_sessions_by_expiry ON web_sessions (expires_at);
                    CREATE TABLE share_links (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, account_id INTEGER NOT NULL REFERENCES accounts(id),
                      container TEXT NOT NULL, path TEXT NOT NULL, version INTEGER, password TEXT, created_at INTEGER NOT NULL, expires_at INTEGER);
                    CREATE INDEX share_links_by_account ON share_links (account_id, id);
                    ALTER TABLE versions ADD COLUMN superseded_at INTEGER;
                    """)
        }
        migrator.registerMigration("v14: WebDAV dead properties") { db in
            // What WebDAV clients set with PROPPATCH (docs/WEBDAV.md): by container and path
            // (a document's, or a folder's without its trailing /), each property's element kept
            // whole, as XML ready to be sent back.
            try db.execute(
                sql: """
                    CREATE TABLE dav_properties (container_id INTEGER NOT NULL REFERENCES containers(id), path TEXT NOT NULL,
                      namespace TEXT NOT NULL, name TEXT NOT NULL, xml TEXT NOT NULL,
                      PRIMARY KEY (container_id, path, namespace, name)) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v15: WebDAV locks") { db in
            // WebDAV's write locks (docs/WEBDAV.md): by token, on a path as dav_properties
            // names it, each with its depth, scope, the client's owner element and its expiry
            // (store clock, ns).
            try db.execute(
                sql: """
                    CREATE TABLE dav_locks (token TEXT PRIMARY KEY, container_id INTEGER NOT NULL REFERENCES containers(id),
                      path TEXT NOT NULL, exclusive BOOLEAN NOT NULL, infinite BOOLEAN NOT NULL, owner TEXT,
                      timeout INTEGER NOT NULL, expires_at INTEGER NOT NULL);
                    CREATE INDEX dav_locks_by_container ON dav_locks (container_id, expires_at);
                    """)
        }
        migrator.registerMigration("v16: token terms") { db in
            // A token's device, scope (read-only, one container) and expiry (store clock, ns);
            // the tokens there are keep what they could do (full scope, no expiry).
            try db.execute(
                sql: """
                    ALTER TABLE tokens ADD COLUMN device TEXT;
                    ALTER TABLE tokens ADD COLUMN read_only BOOLEAN NOT NULL DEFAULT 0;
                    ALTER TABLE tokens ADD COLUMN container TEXT;
                    ALTER TABLE tokens ADD COLUMN expires_at INTEGER;
                    """)
        }
        migrator.registerMigration("v17: version records in the quota") { db in
            try db.execute(
                sql: "ALTER TABLE accounts ADD COLUMN version_bytes INTEGER NOT NULL DEFAULT 0;"
                    + Self.versionBytesBackfill)
        }
        migrator.registerMigration("v18: container members") { db in
            // Who else an account's container is shared with, as reader or writer (docs/SHARING.md).
            try db.execute(
                sql: """
                    CREATE TABLE container_members (container_id INTEGER NOT NULL REFERENCES containers(id),
                      account_id INTEGER NOT NULL REFERENCES accounts(id), role TEXT NOT NULL, added_at INTEGER NOT NULL,
                      PRIMARY KEY (container_id, account_id)) WITHOUT ROWID;
                    CREATE INDEX container_members_by_account ON container_members (account_id);
                    """)
        }
        migrator.registerMigration("v19: sharing encrypted containers") { db in
            // Each account's public key; each member's wrapped container key; each rotation's
            // link (docs/SHARING.md, "Encrypted containers").
            try db.execute(
                sql: """
                    CREATE TABLE account_keys (account_id INTEGER PRIMARY KEY REFERENCES accounts(id),
                      public_key BLOB NOT NULL, updated_at INTEGER NOT NULL);
                    ALTER TABLE container_members ADD COLUMN wrapped_key BLOB;
                    ALTER TABLE container_members ADD COLUMN key_id TEXT;
                    CREATE TABLE container_key_links (container_id INTEGER NOT NULL REFERENCES containers(id),
                      generation INTEGER NOT NULL, link BLOB NOT NULL, PRIMARY KEY (container_id, generation)) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v20: records") { db in
            try db.execute(sql: Self.recordTables())
        }
        migrator.registerMigration("v21: record locations and webhooks") { db in
            try db.execute(sql: Self.recordLocationAndWebhookTables())
            // Locations saved before they were indexed (SQLite cannot compute the points itself).
            for row in try Row.fetchAll(db, sql: RecordLocations.storedWithLocations) {
                for point in RecordLocations.points(stored: row["fields"]) {
                    try db.execute(
                        sql: RecordLocations.insertPoint + " VALUES (?, ?, ?, ?, ?, ?, ?)",
                        arguments: [row["id"], row["zone_id"], row["type"], point.field, point.x, point.y, point.z])
                }
            }
        }
        migrator.registerMigration("v22: record query indexes") { db in
            try db.execute(sql: Self.recordQueryIndexes)
            // Dropped indexes take their statistics along: the planner's are taken again now.
            for statement in SQLDialect.sqlite.refreshStatistics { try db.execute(sql: statement) }
        }
        return migrator
    }

    /// Records beside documents (docs/RECORDS.md): zones, records (a deleted one stays as a
    /// tombstone for the changes feed), each record's indexed values for queries, subscriptions
    /// and the notifications they made. The same
    /// statements on both backends but for the row ids and the collation of names.
    static func recordTables(id: String = "INTEGER PRIMARY KEY", collate: String = "")
        -> String
    {
        """
        ALTER TABLE containers ADD COLUMN record_sequence BIGINT NOT NULL DEFAULT 0;
        CREATE TABLE record_zones (id \(id), container_id BIGINT NOT NULL REFERENCES containers(id),
          name TEXT\(collate) NOT NULL, sequence BIGINT NOT NULL, deleted BOOLEAN NOT NULL, UNIQUE (container_id, name));
        CREATE TABLE records (id \(id), zone_id BIGINT NOT NULL REFERENCES record_zones(id), name TEXT\(collate) NOT NULL,
          type TEXT\(collate) NOT NULL, fields TEXT, sequence BIGINT NOT NULL, deleted BOOLEAN NOT NULL,
          created_at BIGINT NOT NULL, created_by TEXT NOT NULL, created_device TEXT,
          modified_at BIGINT NOT NULL, modified_by TEXT NOT NULL, modified_device TEXT, UNIQUE (zone_id, name));
        CREATE INDEX records_by_sequence ON records (zone_id, sequence);
        CREATE INDEX records_by_type ON records (zone_id, type, deleted);
        CREATE TABLE record_values (record_id BIGINT NOT NULL REFERENCES records(id), zone_id BIGINT NOT NULL,
          type TEXT\(collate) NOT NULL, field TEXT\(collate) NOT NULL, kind TEXT NOT NULL, number BIGINT, text TEXT\(collate));
        CREATE INDEX record_values_by_number ON record_values (zone_id, type, field, kind, number);
        CREATE INDEX record_values_by_text ON record_values (zone_id, type, field, kind, text);
        CREATE INDEX record_values_by_record ON record_values (record_id);
        CREATE TABLE record_subscriptions (container_id BIGINT NOT NULL REFERENCES containers(id),
          subscription_id TEXT\(collate) NOT NULL, zone_name TEXT\(collate) NOT NULL, kind TEXT NOT NULL, query TEXT,
          fires_on TEXT NOT NULL, fires_once BOOLEAN NOT NULL, PRIMARY KEY (container_id, subscription_id));
        CREATE TABLE record_notifications (container_id BIGINT NOT NULL REFERENCES containers(id), sequence BIGINT NOT NULL,
          subscription_id TEXT\(collate) NOT NULL, zone_name TEXT NOT NULL, record_name TEXT NOT NULL, record_type TEXT,
          reason TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (container_id, sequence, subscription_id));
        """
    }

    /// Each LOCATION of a record as a point on the unit sphere (``RecordLocations``), walked by
    /// latitude band for NEAR; each subscription's webhook with where its delivery stands
    /// (``WebhookRules``); the `DELETE_SELF` references a deletion follows. The same statements
    /// on both backends but for the collation.
    static func recordLocationAndWebhookTables(collate: String = "") -> String {
        """
        CREATE TABLE record_locations (record_id BIGINT NOT NULL REFERENCES records(id), zone_id BIGINT NOT NULL,
          type TEXT\(collate) NOT NULL, field TEXT\(collate) NOT NULL, x BIGINT NOT NULL, y BIGINT NOT NULL, z BIGINT NOT NULL);
        CREATE INDEX record_locations_by_z ON record_locations (zone_id, type, field, z);
        CREATE INDEX record_locations_by_record ON record_locations (record_id);
        CREATE TABLE record_webhooks (container_id BIGINT NOT NULL REFERENCES containers(id),
          subscription_id TEXT\(collate) NOT NULL, url TEXT NOT NULL, secret TEXT NOT NULL, cursor BIGINT NOT NULL,
          failures BIGINT NOT NULL, last_error TEXT, next_attempt_at BIGINT NOT NULL, lease_until BIGINT NOT NULL,
          lease_token TEXT, retired BOOLEAN NOT NULL, PRIMARY KEY (container_id, subscription_id));
        CREATE INDEX record_notifications_by_subscription ON record_notifications (container_id, subscription_id, sequence);
        CREATE INDEX record_values_delete_self ON record_values (zone_id, text) WHERE kind = 'DELETE_SELF';
        """
    }

    /// The indexes a records/query walks (``RecordQueryPlan``): the value indexes end in
    /// `record_id`, so a filter's matches are read from the index alone; the per-record index
    /// leads with what a filter tests, so testing one record is one seek; the records of a
    /// type are walked in name order; a band of latitudes holds its points whole, so NEAR tests
    /// them in the index. The same statements on both backends.
    static let recordQueryIndexes = """
        DROP INDEX record_values_by_number;
        CREATE INDEX record_values_by_number ON record_values (zone_id, type, field, kind, number, record_id);
        DROP INDEX record_values_by_text;
        CREATE INDEX record_values_by_text ON record_values (zone_id, type, field, kind, text, record_id);
        DROP INDEX record_values_by_record;
        CREATE INDEX record_values_by_record ON record_values (record_id, field, kind, text, number);
        DROP INDEX records_by_type;
        CREATE INDEX records_by_type ON records (zone_id, type, deleted, name, id);
        DROP INDEX record_locations_by_z;
        CREATE INDEX record_locations_by_z ON record_locations (zone_id, type, field, z, x, y, record_id)
        """

    /// What the committed versions an account keeps cost its quota
    /// (``QuotaRules/versionCost(manifestBytes:)``), computed from the rows: for accounts that
    /// kept versions before the quota counted them. The same statement on both backends.
    static let versionBytesBackfill = """
        UPDATE accounts SET version_bytes = COALESCE((
          SELECT SUM(\(QuotaRules.versionRecordBytes) + COALESCE(LENGTH(v.manifest), 0))
          FROM versions v JOIN containers c ON c.id = v.container_id
          WHERE c.account_id = accounts.id AND v.state != 'uploading'), 0)
        """

    /// Test seam: the writer's `synchronous` setting (2: FULL).
    package func writerSynchronous() async throws -> Int {
        try await pool.writeWithoutTransaction { try Int.fetchOne($0, sql: "PRAGMA synchronous") ?? -1 }
    }

    /// Test seam: caps the database at its current size plus `extraPages` pages, so the next
    /// writes that need more meet SQLITE_FULL as on a full disk; `nil` lifts the cap.
    package func limitGrowth(extraPages: Int?) async throws {
        try await pool.writeWithoutTransaction { db in
            let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            try db.execute(sql: "PRAGMA max_page_count = \(extraPages.map { pages + $0 } ?? 1_073_741_823)")
        }
    }

    func reading<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await pool.read { db in try body(SQLiteSession(db: db)) } }
    }

    func writing<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await Self.mappingErrors { try await pool.write { db in try body(SQLiteSession(db: db)) } }
    }

    /// Passes ``XferError``s through and wraps database errors as `io`.
    static func mappingErrors<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as XferError {
            throw error
        } catch let error as DatabaseError where error.resultCode == .SQLITE_FULL {
            throw XferError(
                .storageFull, "the metadata database's disk is full; nothing was changed; free some space and retry",
                cause: DescribedError(error))
        } catch {
            throw XferError(.io, "the metadata database failed", cause: DescribedError(error))
        }
    }
}
