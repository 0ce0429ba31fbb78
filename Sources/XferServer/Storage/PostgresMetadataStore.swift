import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The metadata store in PostgreSQL, for several servers sharing one deployment.
///
/// The schema is SQLiteMetadataStore's, in PostgreSQL's types; migrations run on start under
/// an advisory lock, so servers starting together apply each once. Every method is one
/// transaction. The change feed stays gap-free and ordered per container with many writers:
/// a sequence number is taken with `UPDATE containers … RETURNING`, which holds the
/// container's row lock until the transaction commits, so numbers are handed out and become
/// visible in order. Each commit sends `NOTIFY xfer_changes` so other servers' long polls wake.
public final class PostgresMetadataStore: SQLMetadataStore, Service, Sendable {
    let client: PostgresClient

    let policy: StorePolicy

    let sealing: SealingKeys?

    private let schema: String?

    private let host: String

    private let indexKey = Mutex<ChunkIDCipher?>(nil)

    var ids: ChunkIDCipher? { indexKey.withLock { $0 } }

    let logger: Logger

    /// The task running ``run()`` for a store opened by ``init(url:policy:schema:sealing:)``,
    /// which is not under a service group; ended by ``shutdown()``.
    private let owned = Mutex<Task<Void, Never>?>(nil)

    private let listener: PostgresChangeListener

    /// Connections to the database at most.
    public static let maximumConnections = 32

    /// Makes the store for `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` without connecting:
    /// ``run()`` (a `Service`, run by `xfer serve`'s service group) runs its connections, and
    /// ``prepare()`` then migrates the schema.
    /// - Parameters:
    ///   - url: The database. A `?schema=NAME` in it works in that schema (one database,
    ///     several deployments).
    ///   - policy: Retention and key-value limits.
    ///   - schema: A schema to work in (created if missing), for tests that share a database.
    ///   - sealing: Keys that seal manifests at rest.
    /// - Throws: `invalid_configuration` for a bad URL or schema name.
    public init(
        configuring url: String, policy: StorePolicy = StorePolicy(), schema: String? = nil,
        sealing: SealingKeys? = nil
    ) throws {
        let schema = schema ?? URLComponents(string: url)?.queryItems?.first { $0.name == "schema" }?.value
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
            let host = components.host, let user = components.user
        else {
            throw XferError(
                .invalidConfiguration, "--metadata must look like postgres://USER@HOST:PORT/DATABASE, not \(url)")
        }
        let database = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: user,
            password: components.password, database: database.isEmpty ? nil : database,
            tls: .disable)
        if let schema {
            guard schema.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw XferError(.invalidConfiguration, "a schema name is letters, digits and _")
            }
            configuration.options.additionalStartupParameters = [("search_path", schema)]
        }
        configuration.options.maximumConnections = Self.maximumConnections
        client = PostgresClient(configuration: configuration)
        (self.policy, self.sealing, self.schema, self.host) = (policy, sealing, schema, host)
        var logger = Logger(label: "xfer.postgres")
        logger.logLevel = .warning
        self.logger = logger
        listener = PostgresChangeListener(client: client, logger: logger)
    }

    /// Connects to the database and migrates the schema, for a program that runs no service
    /// group: the store runs its own connections until ``shutdown()``.
    /// - Throws: `invalid_configuration` for a bad URL, `io` if the database cannot be reached.
    public convenience init(
        url: String, policy: StorePolicy = StorePolicy(), schema: String? = nil, sealing: SealingKeys? = nil
    ) async throws {
        try await self.init(url: url, policy: policy, schema: schema, sealing: sealing, migratingUpTo: nil)
    }

    /// Test seam for migrations: `migratingUpTo` stops after the migration of that name, so a
    /// test can fill a schema laid out as an older release left it.
    package convenience init(
        url: String, policy: StorePolicy = StorePolicy(), schema: String? = nil, sealing: SealingKeys? = nil,
        migratingUpTo last: String?
    ) async throws {
        try self.init(configuring: url, policy: policy, schema: schema, sealing: sealing)
        let (client, listener) = (client, listener)
        owned.withLock { $0 = Task { await Self.run(client, listener) } }
        do {
            try await prepare(migratingUpTo: last)
        } catch {
            shutdown()
            throw error
        }
    }

    /// Runs the client's connections and, once a server watches, the LISTEN for other servers'
    /// changes, until the task is cancelled or its service group shuts down. Once per store,
    /// and only for one made by ``init(configuring:policy:schema:sealing:)`` (the other runs
    /// its own).
    public func run() async {
        await Self.run(client, listener)
    }

    private static func run(_ client: PostgresClient, _ listener: PostgresChangeListener) async {
        await withDiscardingTaskGroup { group in
            group.addTask { await client.run() }
            group.addTask { await cancelWhenGracefulShutdown { await listener.run() } }
        }
    }

    /// Creates the schema if it is named and missing, migrates it, and loads the index key.
    /// Needs ``run()`` running.
    /// - Throws: `io` if the database cannot be reached or a migration fails.
    public func prepare() async throws {
        try await prepare(migratingUpTo: nil)
    }

    func prepare(migratingUpTo last: String?) async throws {
        do {
            if let schema { try await client.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: schema)") }
            try await migrate(upTo: last)
            let policy = policy
            if last == nil {
                try await writing {
                    try MetadataTransaction(sql: $0, policy: policy, checkingPlainIDs: false).fillFoldedNames()
                }
            }
            if let sealing {
                let key = try await writing {
                    try MetadataTransaction(sql: $0, policy: policy, checkingPlainIDs: false).indexKey(sealing)
                }
                indexKey.withLock { $0 = key }
            }
        } catch {
            throw Self.mapped(error, "cannot set up the metadata database at \(host)")
        }
    }

    /// Closes the connections of a store that runs its own (``init(url:policy:schema:sealing:)``).
    public func shutdown() {
        listener.stop()
        owned.withLock { $0?.cancel() }
    }

    /// Calls `handler` for every notification on `xfer_changes` (each commit, delete, resolve or
    /// key write by any server sharing the database), from a connection of its own that ``run()``
    /// holds once the first handler is given.
    public func watchRemoteChanges(_ handler: @escaping @Sendable () -> Void) {
        listener.watch(handler)
    }

    deinit {
        owned.withLock { $0?.cancel() }
    }

    static let migrations: [(String, String)] = [
        (
            "v1",
            """
            CREATE TABLE accounts (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, quota BIGINT NOT NULL,
                                   used BIGINT NOT NULL DEFAULT 0, created_at BIGINT NOT NULL);
            CREATE TABLE tokens (hash BYTEA PRIMARY KEY, account_id BIGINT REFERENCES accounts(id), admin BOOLEAN NOT NULL DEFAULT false,
                                 created_at BIGINT NOT NULL);
            CREATE TABLE account_chunks (account_id BIGINT NOT NULL, id BYTEA NOT NULL, length BIGINT NOT NULL,
                                         refs BIGINT NOT NULL DEFAULT 0, added_at BIGINT NOT NULL DEFAULT 0,
                                         PRIMARY KEY (account_id, id));
            CREATE INDEX account_chunks_by_id ON account_chunks (id);
            CREATE TABLE containers (id BIGSERIAL PRIMARY KEY, account_id BIGINT NOT NULL REFERENCES accounts(id), name TEXT NOT NULL,
                                     sequence BIGINT NOT NULL DEFAULT 0, UNIQUE (account_id, name));
            CREATE TABLE documents (id BIGSERIAL PRIMARY KEY, container_id BIGINT NOT NULL REFERENCES containers(id), path TEXT NOT NULL,
                                    current_version BIGINT, latest_version BIGINT NOT NULL DEFAULT 0, UNIQUE (container_id, path));
            CREATE TABLE versions (document_id BIGINT NOT NULL REFERENCES documents(id), version BIGINT NOT NULL,
                                   container_id BIGINT NOT NULL, state TEXT NOT NULL, kind TEXT NOT NULL, size BIGINT NOT NULL,
                                   mtime_ns BIGINT NOT NULL, mode BIGINT NOT NULL, base_version BIGINT, device TEXT,
                                   manifest_digest BYTEA, manifest BYTEA, files BIGINT, chunks BIGINT, sequence BIGINT NOT NULL,
                                   created_at BIGINT NOT NULL, PRIMARY KEY (document_id, version));
            CREATE INDEX versions_feed ON versions (container_id, sequence);
            CREATE TABLE kv (container_id BIGINT NOT NULL, key TEXT NOT NULL, value TEXT, timestamp_ns BIGINT NOT NULL,
                             device TEXT NOT NULL, sequence BIGINT NOT NULL, PRIMARY KEY (container_id, key));
            CREATE INDEX kv_feed ON kv (container_id, sequence);
            """
        ),
        (
            "v2: chunk deletions",
            """
            CREATE TABLE chunk_deletions (id BYTEA PRIMARY KEY, started_at BIGINT NOT NULL, finished_at BIGINT)
            """
        ),
        (
            "v3: chunk locations in packs",
            """
            CREATE TABLE chunk_locations (id BYTEA PRIMARY KEY, pack TEXT NOT NULL, "offset" BIGINT NOT NULL,
                                          length BIGINT NOT NULL, recorded_at BIGINT NOT NULL);
            CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack);
            """
        ),
        (
            "v4: bytewise path index for the namespace rule",
            """
            CREATE INDEX documents_path_bytewise ON documents (container_id, path COLLATE "C");
            CREATE INDEX versions_uploading ON versions (container_id) WHERE state = 'uploading';
            """
        ),
        (
            "v5: deployment identity",
            """
            CREATE TABLE deployment (id TEXT NOT NULL);
            INSERT INTO deployment VALUES (replace(gen_random_uuid()::text, '-', ''));
            """
        ),
        (
            "v6: sealing keys",
            """
            CREATE TABLE sealing_keys (id TEXT PRIMARY KEY, added_at BIGINT NOT NULL);
            CREATE TABLE sealing_index (key_id TEXT PRIMARY KEY, wrapped BYTEA NOT NULL)
            """
        ),
        (
            "v7: end-to-end encrypted containers",
            """
            CREATE TABLE container_keys (container_id BIGINT PRIMARY KEY REFERENCES containers(id),
                                         wrapped BYTEA NOT NULL, key_id TEXT NOT NULL, updated_at BIGINT NOT NULL)
            """
        ),
        // As SQLite's v10: locations name their pack by number, holdings are keyed by chunk first.
        (
            "v8: compact chunk index",
            """
            CREATE TABLE packs (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, recorded_at BIGINT NOT NULL);
            INSERT INTO packs (name, recorded_at) SELECT pack, MAX(recorded_at) FROM chunk_locations GROUP BY pack ORDER BY MIN(recorded_at);
            ALTER TABLE chunk_locations ADD COLUMN pack_id BIGINT;
            UPDATE chunk_locations l SET pack_id = p.id FROM packs p WHERE p.name = l.pack;
            ALTER TABLE chunk_locations ALTER COLUMN pack_id SET NOT NULL;
            DROP INDEX chunk_locations_by_pack;
            ALTER TABLE chunk_locations DROP COLUMN pack, DROP COLUMN recorded_at;
            CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack_id);
            ALTER TABLE account_chunks DROP CONSTRAINT account_chunks_pkey, ADD PRIMARY KEY (id, account_id);
            DROP INDEX account_chunks_by_id
            """
        ),
        // As SQLite's v11; filled by MetadataTransaction.fillFoldedNames once migrated.
        (
            "v9: folded names for queries",
            """
            ALTER TABLE documents ADD COLUMN name_folded TEXT;
            CREATE INDEX documents_by_name ON documents (container_id, name_folded COLLATE "C")
            """
        ),
        // As SQLite's v12.
        (
            "v10: query indexes",
            """
            CREATE INDEX documents_by_path_name ON documents (container_id, path COLLATE "C", name_folded);
            CREATE INDEX versions_by_mtime ON versions (container_id, mtime_ns);
            CREATE INDEX versions_by_size ON versions (container_id, size);
            CREATE INDEX versions_deleted ON versions (container_id, document_id) WHERE state = 'deleted';
            CREATE INDEX versions_conflict ON versions (container_id, document_id) WHERE state = 'conflict'
            """
        ),
        // As SQLite's v13.
        (
            "v11: web sessions, share links, superseded times",
            """
            CREATE TABLE web_sessions (hash BYTEA PRIMARY KEY, account_id BIGINT NOT NULL REFERENCES accounts(id),
              token_hash BYTEA NOT NULL, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL);
            CREATE INDEX web_sessions_by_account ON web_sessions (account_id, created_at);
            CREATE INDEX web_sessions_by_expiry ON web_sessions (expires_at);
            CREATE TABLE share_links (id BIGSERIAL PRIMARY KEY, hash BYTEA NOT NULL UNIQUE, account_id BIGINT NOT NULL REFERENCES accounts(id),
              container TEXT NOT NULL, path TEXT NOT NULL, version BIGINT, password TEXT, created_at BIGINT NOT NULL, expires_at BIGINT);
            CREATE INDEX share_links_by_account ON share_links (account_id, id);
            ALTER TABLE versions ADD COLUMN superseded_at BIGINT
            """
        ),
        // As SQLite's v14.
        (
            "v12: WebDAV dead properties",
            """
            CREATE TABLE dav_properties (container_id BIGINT NOT NULL REFERENCES containers(id), path TEXT COLLATE "C" NOT NULL,
              namespace TEXT NOT NULL, name TEXT NOT NULL, xml TEXT NOT NULL,
              PRIMARY KEY (container_id, path, namespace, name))
            """
        ),
        // As SQLite's v15.
        (
            "v13: WebDAV locks",
            """
            CREATE TABLE dav_locks (token TEXT PRIMARY KEY, container_id BIGINT NOT NULL REFERENCES containers(id),
              path TEXT COLLATE "C" NOT NULL, exclusive BOOLEAN NOT NULL, infinite BOOLEAN NOT NULL, owner TEXT,
              timeout BIGINT NOT NULL, expires_at BIGINT NOT NULL);
            CREATE INDEX dav_locks_by_container ON dav_locks (container_id, expires_at)
            """
        ),
        // As SQLite's v16.
        (
            "v14: token terms",
            """
            ALTER TABLE tokens ADD COLUMN device TEXT, ADD COLUMN read_only BOOLEAN NOT NULL DEFAULT false,
              ADD COLUMN container TEXT, ADD COLUMN expires_at BIGINT
            """
        ),
        // As SQLite's v17.
        (
            "v15: version records in the quota",
            "ALTER TABLE accounts ADD COLUMN version_bytes BIGINT NOT NULL DEFAULT 0;\n"
                + SQLiteMetadataStore.versionBytesBackfill
        ),
        // As SQLite's v18.
        (
            "v16: container members",
            """
            CREATE TABLE container_members (container_id BIGINT NOT NULL REFERENCES containers(id),
              account_id BIGINT NOT NULL REFERENCES accounts(id), role TEXT NOT NULL, added_at BIGINT NOT NULL,
              PRIMARY KEY (container_id, account_id));
            CREATE INDEX container_members_by_account ON container_members (account_id)
            """
        ),
        // As SQLite's v19.
        (
            "v17: sharing encrypted containers",
            """
            CREATE TABLE account_keys (account_id BIGINT PRIMARY KEY REFERENCES accounts(id),
              public_key BYTEA NOT NULL, updated_at BIGINT NOT NULL);
            ALTER TABLE container_members ADD COLUMN wrapped_key BYTEA, ADD COLUMN key_id TEXT;
            CREATE TABLE container_key_links (container_id BIGINT NOT NULL REFERENCES containers(id),
              generation BIGINT NOT NULL, link BYTEA NOT NULL, PRIMARY KEY (container_id, generation))
            """
        ),
        // As SQLite's v20.
        ("v18: records", SQLiteMetadataStore.recordTables(id: "BIGSERIAL PRIMARY KEY", collate: #" COLLATE "C""#)),
        // As SQLite's v21 (and its locations indexed, ``indexStoredLocations(_:)``).
        (locationsMigration, SQLiteMetadataStore.recordLocationAndWebhookTables(collate: #" COLLATE "C""#)),
        // As SQLite's v22.
        ("v20: record query indexes", SQLiteMetadataStore.recordQueryIndexes)
    ]

    func migrate(upTo last: String? = nil) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7303)", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS xfer_migrations (name TEXT PRIMARY KEY)", logger: logger)
            for (name, sql) in Self.migrations {
                let done =
                    try await connection.query("SELECT 1 FROM xfer_migrations WHERE name = \(name)", logger: logger)
                    .collect().isEmpty == false
                if done { continue }
                for statement in sql.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) })
                where !statement.isEmpty {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                if name == Self.locationsMigration { try await indexStoredLocations(connection) }
                try await connection.query("INSERT INTO xfer_migrations (name) VALUES (\(name))", logger: logger)
                if name == last { break }
            }
        }
    }

    static let locationsMigration = "v19: record locations and webhooks"

    /// Indexes the locations of records saved before locations were indexed, in the migration's
    /// transaction (the points are computed here, as for a save).
    private func indexStoredLocations(_ connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            PostgresQuery(unsafeSQL: RecordLocations.storedWithLocations), logger: logger
        )
        .collect()
        for row in rows {
            let (id, zone, type, fields) = try row.decode((Int64, Int64, String, String).self)
            for point in RecordLocations.points(stored: fields) {
                var binds = PostgresBindings(capacity: 7)
                binds.append(id)
                binds.append(zone)
                binds.append(type)
                binds.append(point.field)
                binds.append(point.x)
                binds.append(point.y)
                binds.append(point.z)
                try await connection.query(
                    PostgresQuery(
                        unsafeSQL: RecordLocations.insertPoint + " VALUES ($1, $2, $3, $4, $5, $6, $7)", binds: binds),
                    logger: logger)
            }
        }
    }

    func reading<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        try await writing(body)
    }

    /// One transaction: the rules run on a thread of the process's blocking pool, each
    /// statement a round trip on the transaction's connection (``PostgresSession``).
    func writing<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T {
        let logger = logger
        do {
            return try await client.withTransaction(logger: logger) { connection in
                try await NIOThreadPool.singleton.runIfActive {
                    try body(PostgresSession(connection: connection, logger: logger))
                }
            }
        } catch {
            throw Self.mapped(error, "the metadata database failed")
        }
    }

    static func mapped(_ error: any Error, _ message: String) -> any Error {
        if let error = error as? XferError { return error }
        if let transaction = error as? PostgresTransactionError {
            if let closure = transaction.closureError as? XferError { return closure }
            if let closure = transaction.closureError { return mapped(closure, message) }
        }
        if let psql = error as? PSQLError, psql.serverInfo?[.sqlState] == "53100" {
            return XferError(
                .storageFull, "the metadata database's disk is full; nothing was changed; free some space and retry",
                cause: DescribedError(error))
        }
        return XferError(.io, message, cause: DescribedError(error))
    }
}
