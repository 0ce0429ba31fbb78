import Foundation
import Logging
import NIOCore
import PostgresNIO
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
public final class PostgresMetadataStore: MetadataStore, @unchecked Sendable {
    let client: PostgresClient
    private let runner: Task<Void, Never>
    private let policy: StorePolicy
    private let logger: Logger

    /// Connects to `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE` and migrates the schema.
    /// - Parameters:
    ///   - url: The database.
    ///   - policy: Retention and key-value limits.
    ///   - schema: A schema to work in (created if missing), for tests that share a database.
    /// - Throws: `invalid_configuration` for a bad URL, `io` if the database cannot be reached.
    ///   A `?schema=NAME` in the URL does the same (one database, several deployments).
    public init(url: String, policy: StorePolicy = StorePolicy(), schema: String? = nil) async throws {
        let schema = schema ?? URLComponents(string: url)?.queryItems?.first { $0.name == "schema" }?.value
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme ?? ""),
              let host = components.host, let user = components.user else {
            throw XferError(.invalidConfiguration, "--metadata must look like postgres://USER@HOST:PORT/DATABASE, not \(url)")
        }
        let database = components.path.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        var configuration = PostgresClient.Configuration(host: host, port: components.port ?? 5432, username: user,
                                                         password: components.password, database: database.isEmpty ? nil : database,
                                                         tls: .disable)
        if let schema {
            guard schema.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                throw XferError(.invalidConfiguration, "a schema name is letters, digits and _")
            }
            configuration.options.additionalStartupParameters = [("search_path", schema)]
        }
        configuration.options.maximumConnections = 32
        client = PostgresClient(configuration: configuration)
        let client = client
        runner = Task { await client.run() }
        self.policy = policy
        var logger = Logger(label: "xfer.postgres")
        logger.logLevel = .warning
        self.logger = logger
        do {
            if let schema { try await client.query("CREATE SCHEMA IF NOT EXISTS \(unescaped: schema)") }
            try await migrate()
        } catch {
            runner.cancel()
            throw Self.mapped(error, "cannot set up the metadata database at \(host)")
        }
    }

    /// Closes the connections.
    public func shutdown() {
        listener.withLock { $0?.cancel() }
        runner.cancel()
    }

    private let listener = Mutex<Task<Void, Never>?>(nil)

    /// LISTENs on `xfer_changes` on a connection of its own, reconnecting after a failure, and
    /// calls `handler` for every notification (each commit, delete, resolve or key write by any
    /// server sharing the database).
    public func watchRemoteChanges(_ handler: @escaping @Sendable () -> Void) {
        let client = client
        let logger = logger
        let task = Task {
            while !Task.isCancelled {
                do {
                    try await client.withConnection { connection in
                        try await connection.listen(on: "xfer_changes") { notifications in
                            for try await _ in notifications { handler() }
                        }
                    }
                } catch {
                    // The store closed (its client stopped): nothing more to listen to.
                    if Task.isCancelled || (error as? PSQLError)?.code == .clientClosedConnection { return }
                    logger.warning("LISTEN xfer_changes failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
        listener.withLock { $0?.cancel(); $0 = task }
    }

    deinit {
        listener.withLock { $0?.cancel() }
        runner.cancel()
    }

    // MARK: Schema

    private static let migrations: [(String, String)] = [
        ("v1", """
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
            """),
        ("v2: chunk deletions", """
            CREATE TABLE chunk_deletions (id BYTEA PRIMARY KEY, started_at BIGINT NOT NULL, finished_at BIGINT)
            """),
        ("v3: chunk locations in packs", """
            CREATE TABLE chunk_locations (id BYTEA PRIMARY KEY, pack TEXT NOT NULL, "offset" BIGINT NOT NULL,
                                          length BIGINT NOT NULL, recorded_at BIGINT NOT NULL);
            CREATE INDEX chunk_locations_by_pack ON chunk_locations (pack);
            """),
        ("v4: bytewise path index for the namespace rule", """
            CREATE INDEX documents_path_bytewise ON documents (container_id, path COLLATE "C");
            CREATE INDEX versions_uploading ON versions (container_id) WHERE state = 'uploading';
            """),
        ("v5: deployment identity", """
            CREATE TABLE deployment (id TEXT NOT NULL);
            INSERT INTO deployment VALUES (replace(gen_random_uuid()::text, '-', ''));
            """),
    ]

    private func migrate() async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(7303)", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS xfer_migrations (name TEXT PRIMARY KEY)", logger: logger)
            for (name, sql) in Self.migrations {
                let done = try await connection.query("SELECT 1 FROM xfer_migrations WHERE name = \(name)", logger: logger)
                    .collect().isEmpty == false
                if done { continue }
                for statement in sql.split(separator: ";").map({ $0.trimmingCharacters(in: .whitespacesAndNewlines) }) where !statement.isEmpty {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("INSERT INTO xfer_migrations (name) VALUES (\(name))", logger: logger)
            }
        }
    }

    // MARK: Plumbing

    /// One transaction's queries.
    struct Transaction {
        let connection: PostgresConnection
        let logger: Logger

        func rows(_ query: PostgresQuery) async throws -> [PostgresRandomAccessRow] {
            try await connection.query(query, logger: logger).collect().map { $0.makeRandomAccess() }
        }

        func one(_ query: PostgresQuery) async throws -> PostgresRandomAccessRow? { try await rows(query).first }

        func run(_ query: PostgresQuery) async throws { _ = try await connection.query(query, logger: logger).collect() }

        func int(_ query: PostgresQuery) async throws -> Int64? {
            guard let row = try await one(query) else { return nil }
            return try row[0].decode(Int64?.self)
        }
    }

    private func transaction<T: Sendable>(_ body: @escaping (Transaction) async throws -> T) async throws -> T {
        let logger = logger
        do {
            return try await client.withTransaction(logger: logger) { connection in
                try await body(Transaction(connection: connection, logger: logger))
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
            return XferError(.storageFull, "the metadata database's disk is full; nothing was changed; free some space and retry", cause: DescribedError(error))
        }
        return XferError(.io, message, cause: DescribedError(error))
    }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// The advisory lock that orders deletion marks against uploads recording chunks.
    private static let deletionLock: Int64 = 7304

    // MARK: Accounts and tokens

    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        try await transaction { tx in
            guard let row = try await tx.one("""
                SELECT t.hash, t.admin, a.id, a.name, (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint AS now
                FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id WHERE t.hash = \(Data(tokenHash))
                """) else { return nil }
            guard TokenHash.equal(Array(try row["hash"].decode(Data.self)), tokenHash) else { return nil }
            let now = try row["now"].decode(Int64.self)
            if try row["admin"].decode(Bool.self) { return Principal(accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now) }
            guard let id = try row["id"].decode(Int64?.self), let name = try row["name"].decode(String?.self) else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false, authenticatedAt: now)
        }
    }

    public func deploymentID() async throws -> String {
        try await transaction { tx in try await tx.one("SELECT id FROM deployment LIMIT 1").map { try $0["id"].decode(String.self) } ?? "" }
    }

    public func hasAdminToken() async throws -> Bool {
        try await transaction { tx in try await tx.one("SELECT 1 FROM tokens WHERE admin") != nil }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        try await transaction { tx in
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(hash)), NULL, true, \(Self.now()))")
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await transaction { tx in
            guard let id = try await tx.int("""
                INSERT INTO accounts (name, quota, created_at) VALUES (\(name.value), \(quota), \(Self.now()))
                ON CONFLICT (name) DO NOTHING RETURNING id
                """) else {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(tokenHash)), \(id), false, \(Self.now()))")
            return AccountInfo(name: name.value, quota: quota, used: 0)
        }
    }

    public func addToken(account: AccountName, tokenHash: [UInt8]) async throws {
        try await transaction { tx in
            let id = try await Self.accountID(tx, account)
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(tokenHash)), \(id), false, \(Self.now()))")
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await transaction { tx in
            // Every admin token locked first (in one order), so two revocations cannot each see
            // another admin token left and together remove the last two.
            try await tx.run("SELECT 1 FROM tokens WHERE admin ORDER BY hash FOR UPDATE")
            guard let row = try await tx.one("SELECT admin FROM tokens WHERE hash = \(Data(hash)) FOR UPDATE") else { return false }
            if try row[0].decode(Bool.self), try await tx.int("SELECT COUNT(*) FROM tokens WHERE admin") ?? 0 <= 1 {
                throw XferError(.badRequest, "that is the only admin token; the server would have none left")
            }
            try await tx.run("DELETE FROM tokens WHERE hash = \(Data(hash))")
            return true
        }
    }

    public func revokeTokens(account: AccountName) async throws -> Int {
        try await transaction { tx in
            let id = try await Self.accountID(tx, account)
            return try await tx.rows("DELETE FROM tokens WHERE account_id = \(id) RETURNING hash").count
        }
    }

    private static func accountID(_ tx: Transaction, _ name: AccountName) async throws -> Int64 {
        guard let id = try await tx.int("SELECT id FROM accounts WHERE name = \(name.value)") else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
    }

    public func account(_ accountID: Int64) async throws -> AccountInfo {
        try await transaction { tx in
            guard let row = try await tx.one("SELECT name, quota, used FROM accounts WHERE id = \(accountID)") else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(name: try row["name"].decode(String.self), quota: try row["quota"].decode(Int64.self), used: try row["used"].decode(Int64.self))
        }
    }

    // MARK: Chunks

    public func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID] {
        try await transaction { tx in try await Self.lacking(tx, account: account, ids) }
    }

    public func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (count: Int, bytes: Int64) {
        try await transaction { tx in
            guard let row = try await tx.one("SELECT quota, used FROM accounts WHERE id = \(account) FOR UPDATE") else {
                throw XferError(.notFound, "no such account")
            }
            var lacking = Set(try await Self.lacking(tx, account: account, chunks.map(\.id)))
            if let uploadStartedAt, !lacking.isEmpty {
                // Shared with other uploads, exclusive with a deletion's marking (beginDeletion):
                // either the mark is visible here, or this transaction's holding is visible there.
                try await tx.run("SELECT pg_advisory_xact_lock_shared(\(Self.deletionLock))")
                let batch = lacking.map { ByteBuffer(bytes: $0.bytes) }
                for row in try await tx.rows("""
                    SELECT id FROM chunk_deletions WHERE id = ANY(\(batch)) AND (finished_at IS NULL OR finished_at >= \(uploadStartedAt))
                    """) {
                    if let id = ChunkID(bytes: try row[0].decode(Data.self)) { lacking.remove(id) }
                }
            }
            let fresh = chunks.filter { lacking.remove($0.id) != nil }
            let bytes = fresh.reduce(Int64(0)) { $0 + Int64($1.length) }
            let quota = try row["quota"].decode(Int64.self)
            let used = try row["used"].decode(Int64.self)
            guard used + bytes <= quota else {
                throw XferError(.quotaExceeded, "storing \(ByteCount(bytes).description) more would take the account past its quota of \(ByteCount(quota).description) (\(ByteCount(used).description) used)")
            }
            if !fresh.isEmpty {
                let ids = fresh.map { ByteBuffer(bytes: $0.id.bytes) }
                let lengths = fresh.map { Int64($0.length) }
                try await tx.run("""
                    INSERT INTO account_chunks (account_id, id, length, added_at)
                    SELECT \(account), chunk.id, chunk.length, \(Self.now()) FROM unnest(\(ids), \(lengths)) AS chunk(id, length)
                    """)
            }
            try await tx.run("UPDATE accounts SET used = used + \(bytes) WHERE id = \(account)")
            return (fresh.count, bytes)
        }
    }

    // MARK: Documents

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            let (document, version) = try await Self.announce(tx, account: account, container: containerID, request, policy: policy, direct: false)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document, path: request.path, version: version)!
        }
    }

    /// Records a pending version. A direct one (committed in the same transaction) is not
    /// counted against the account's pending versions.
    private static func announce(_ tx: Transaction, account: Int64, container containerID: Int64, _ request: AnnounceRequest,
                                 policy: StorePolicy, direct: Bool) async throws -> (document: Int64, version: Int64) {
        let sequence = try await nextSequence(tx, container: containerID)
        try await checkNamespace(tx, container: containerID, path: request.path, kind: request.kind)
        if !direct {
            try AccountLimits.checkNewPending(existing: try await tx.int("""
                SELECT COUNT(*) FROM versions WHERE state = 'uploading' AND container_id IN (SELECT id FROM containers WHERE account_id = \(account))
                """) ?? 0, policy: policy)
        }
        let document = try await documentRow(tx, container: containerID, path: request.path, create: true)!
        let version = document.latest + 1
        try await tx.run("UPDATE documents SET latest_version = \(version) WHERE id = \(document.id)")
        try await tx.run("""
            INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, device, sequence, created_at)
            VALUES (\(document.id), \(version), \(containerID), 'uploading', \(request.kind.rawValue), \(request.size), \(request.mtimeNs),
                    \(Int64(request.mode)), \(request.baseVersion), \(request.device), \(sequence), \(now()))
            """)
        return (document.id, version)
    }

    public func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                       manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            // The container's row lock first: commits to one container are serialized, as on SQLite.
            _ = try await tx.int("SELECT id FROM containers WHERE id = \(containerID) FOR UPDATE")
            let info = try await Self.commit(tx, account: account, container: containerID, path: path, version: version,
                                             baseVersion: baseVersion, manifest: manifest, encoded: encoded, policy: policy)
            try await Self.notify(tx, container: containerID)
            return info
        }
    }

    public func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>] {
        let policy = policy
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            _ = try await tx.int("SELECT id FROM containers WHERE id = \(containerID) FOR UPDATE")
            // Every chunk row the batch references, locked once in id order (as one commit does),
            // so two batches sharing chunks cannot deadlock.
            var all = Set<ChunkID>()
            for item in items { all.formUnion(item.manifest.allChunks.map(\.id)) }
            _ = try await Self.heldLengths(tx, account: account, Array(all))
            var results: [Result<DocumentInfo, XferError>] = []
            for item in items {
                try await tx.run("SAVEPOINT direct_commit")
                do {
                    let (_, version) = try await Self.announce(tx, account: account, container: containerID, item.announce, policy: policy, direct: true)
                    let info = try await Self.commit(tx, account: account, container: containerID, path: item.announce.path, version: version,
                                                     baseVersion: item.announce.baseVersion, manifest: item.manifest, encoded: item.encoded,
                                                     policy: policy)
                    try await tx.run("RELEASE SAVEPOINT direct_commit")
                    results.append(.success(info))
                } catch let error as XferError {
                    try await tx.run("ROLLBACK TO SAVEPOINT direct_commit")
                    try await tx.run("RELEASE SAVEPOINT direct_commit")
                    results.append(.failure(error))
                }
            }
            try await Self.notify(tx, container: containerID)
            return results
        }
    }

    /// Commits an announced version, the container's row already locked.
    private static func commit(_ tx: Transaction, account: Int64, container containerID: Int64, path: DocumentPath, version: Int64,
                               baseVersion: Int64?, manifest: Manifest, encoded: [UInt8], policy: StorePolicy) async throws -> DocumentInfo {
        guard let document = try await documentRow(tx, container: containerID, path: path, create: false),
              let row = try await tx.one("SELECT state, mtime_ns FROM versions WHERE document_id = \(document.id) AND version = \(version)") else {
            throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
        }
        let state = try row["state"].decode(String.self)
        guard state == VersionState.uploading.rawValue else {
            throw XferError(.conflict, "\(path) version \(version) is already \(state)")
        }
        let kind = DocumentKind(manifest.kind)
        try await checkNamespace(tx, container: containerID, path: path, kind: kind)
        let declared = try CommitRules.distinctChunks(manifest)
        let missing = try CommitRules.missing(declared, held: try await heldLengths(tx, account: account, Array(declared.keys)))
        guard missing.isEmpty else { throw XferError.missingChunks(missing) }
        let digest = Data(ChunkID.of(encoded).bytes)
        var outcome = VersionState.current
        if let current = document.current,
           let currentRow = try await tx.one("SELECT state, mtime_ns, manifest_digest FROM versions WHERE document_id = \(document.id) AND version = \(current)"),
           try currentRow["state"].decode(String.self) == VersionState.current.rawValue {
            let currentDigest = try currentRow["manifest_digest"].decode(Data?.self)
            if current == baseVersion || currentDigest == digest {
                try await setState(tx, .superseded, document: document.id, version: current, container: containerID)
            } else if try row["mtime_ns"].decode(Int64.self) >= currentRow["mtime_ns"].decode(Int64.self) {
                try await setState(tx, .conflict, document: document.id, version: current, container: containerID)
            } else {
                outcome = .conflict
            }
        }
        let sequence = try await nextSequence(tx, container: containerID)
        try await tx.run("""
            UPDATE versions SET state = \(outcome.rawValue), kind = \(kind.rawValue), size = \(manifest.totalSize), manifest_digest = \(digest),
                                manifest = \(Data(encoded)), files = \(Int64(manifest.fileCount)), chunks = \(Int64(manifest.allChunks.count)),
                                base_version = \(baseVersion), sequence = \(sequence)
            WHERE document_id = \(document.id) AND version = \(version)
            """)
        if outcome == .current {
            try await tx.run("UPDATE documents SET current_version = \(version) WHERE id = \(document.id)")
        }
        try await adjustReferences(tx, account: account, manifest: manifest, by: 1)
        try await prune(tx, account: account, document: document.id, policy: policy)
        return try await info(tx, document: document.id, path: path, version: version)!
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8]) {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let number = version ?? document.current,
                  let info = try await Self.info(tx, document: document.id, path: path, version: number),
                  [.current, .superseded, .conflict].contains(info.state),
                  let row = try await tx.one("SELECT manifest FROM versions WHERE document_id = \(document.id) AND version = \(number)"),
                  let blob = try row[0].decode(Data?.self) else {
                throw XferError(.notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
            }
            return (info, Array(blob))
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws -> DocumentInfo {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let info = try await Self.info(tx, document: document.id, path: path, version: version ?? document.current ?? document.latest) else {
                throw XferError(.notFound, version.map { "\(path) has no version \($0)" } ?? "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let rows = try await tx.rows("""
                SELECT \(path.value)::text AS path, v.*, \(unescaped: Self.conflictsColumn) FROM versions v
                WHERE v.document_id = \(document.id) ORDER BY v.version DESC
                """)
            return VersionList(versions: try rows.map(Self.info(row:)))
        }
    }

    public func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            // The container's lock before the document's, the order commit, delete and announce
            // take them in (the other order deadlocks against them).
            try await tx.run("SELECT 1 FROM containers WHERE id = \(containerID) FOR UPDATE")
            guard let document = try await Self.documentRow(tx, container: containerID, path: request.path, create: false),
                  let keep = try await Self.info(tx, document: document.id, path: request.path, version: request.keep) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            guard keep.state == .current || keep.state == .conflict else {
                throw XferError(.badRequest, "\(request.path) version \(request.keep) is \(keep.state.rawValue); keep the current version or a conflict version (see `xfer versions`)")
            }
            var others = keep.conflicts ?? []
            if let current = document.current, current != request.keep { others.append(current) }
            for other in others where other != request.keep {
                if request.keepAll {
                    try await Self.setState(tx, .superseded, document: document.id, version: other, container: containerID)
                } else {
                    try await Self.removeVersion(tx, account: account, document: document.id, version: other)
                }
            }
            try await Self.setState(tx, .current, document: document.id, version: request.keep, container: containerID)
            try await tx.run("UPDATE documents SET current_version = \(request.keep) WHERE id = \(document.id)")
            try await Self.prune(tx, account: account, document: document.id, policy: policy)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document.id, path: request.path, version: request.keep)!
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws -> DocumentList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try await tx.int("SELECT sequence FROM containers WHERE id = \(containerID)") ?? 0
            let rows = try await tx.rows("""
                SELECT d.path, v.*, \(unescaped: Self.conflictsColumn) FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = \(containerID) AND left(d.path, length(\(prefix))) = \(prefix)
                  AND d.path COLLATE "C" > \(after ?? "") AND v.state != 'deleted'
                ORDER BY d.path COLLATE "C" LIMIT \(Int64(limit) + 1)
                """)
            return DocumentList.page(try rows.map(Self.info(row:)), cursor: cursor, limit: limit)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let sequence = try await Self.nextSequence(tx, container: containerID)
            guard let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let current = document.current,
                  let info = try await Self.info(tx, document: document.id, path: path, version: current),
                  info.state != .deleted else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            if let baseVersion, baseVersion != current {
                throw XferError.conflict(path: path, current: current, base: baseVersion)
            }
            let version = document.latest + 1
            try await tx.run("UPDATE versions SET state = 'superseded', sequence = \(sequence) WHERE document_id = \(document.id) AND version = \(current)")
            let deletion = try await Self.nextSequence(tx, container: containerID)
            try await tx.run("""
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, sequence, created_at)
                VALUES (\(document.id), \(version), \(containerID), 'deleted', \(info.kind.rawValue), 0, \(Self.now() * 1_000_000_000),
                        \(Int64(info.mode)), \(current), \(deletion), \(Self.now()))
                """)
            try await tx.run("UPDATE documents SET current_version = \(version), latest_version = \(version) WHERE id = \(document.id)")
            try await Self.prune(tx, account: account, document: document.id, policy: policy)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false, head: 0)
            }
            // The head first, and no row past it: each statement of a READ COMMITTED transaction
            // sees a newer snapshot, so a change committed between the rows and a later head
            // would fall behind the cursor and never be seen (ChangeList.page).
            let head = try await tx.int("SELECT sequence FROM containers WHERE id = \(containerID)") ?? 0
            let documents = try await tx.rows("""
                SELECT d.path, v.*, \(unescaped: Self.conflictsColumn) FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = \(containerID) AND v.sequence > \(after) AND v.sequence <= \(head)
                ORDER BY v.sequence LIMIT \(Int64(limit + 1))
                """).map(Self.info(row:))
            let keys = try await tx.rows("""
                SELECT * FROM kv WHERE container_id = \(containerID) AND sequence > \(after) AND sequence <= \(head)
                ORDER BY sequence LIMIT \(Int64(limit + 1))
                """).map(Self.entry(row:))
            return ChangeList.page(documents: documents, keys: keys, after: after, head: head, limit: limit)
        }
    }

    // MARK: Key-value store

    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws -> KeyValueWriteResult {
        let policy = policy
        let (key, text) = try KeyValueRules.check(request)
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            let sequence = try await Self.nextSequence(tx, container: containerID)  // also the container's lock
            let existing = try await tx.one("SELECT * FROM kv WHERE container_id = \(containerID) AND key = \(key)").map(Self.entry(row:))
            if let existing, !existing.isOlder(thanTimestamp: request.timestampNs, device: request.device) {
                // Nothing changes; give the number back (the row lock makes this safe).
                try await tx.run("UPDATE containers SET sequence = sequence - 1 WHERE id = \(containerID)")
                return KeyValueWriteResult(applied: false, entry: existing)
            }
            if let text {
                let usage = try await Self.keyValueUsage(tx, container: containerID, excluding: key)
                try KeyValueRules.checkLimits(keys: usage.keys, bytes: usage.bytes, key: key, text: text, policy: policy)
            } else if existing == nil || existing?.value == nil {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            try await tx.run("""
                INSERT INTO kv (container_id, key, value, timestamp_ns, device, sequence)
                VALUES (\(containerID), \(key), \(text), \(request.timestampNs), \(request.device), \(sequence))
                ON CONFLICT (container_id, key) DO UPDATE SET value = EXCLUDED.value, timestamp_ns = EXCLUDED.timestamp_ns,
                    device = EXCLUDED.device, sequence = EXCLUDED.sequence
                """)
            try await Self.notify(tx, container: containerID)
            return KeyValueWriteResult(applied: true, entry: KeyValueEntry(key: key, value: request.value, timestampNs: request.timestampNs,
                                                                           device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let row = try await tx.one("SELECT * FROM kv WHERE container_id = \(containerID) AND key = \(key) AND value IS NOT NULL") else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try Self.entry(row: row)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        let policy = policy
        return try await transaction { tx in
            guard let id = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return KeyValueList(entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try await tx.rows("SELECT * FROM kv WHERE container_id = \(id) AND value IS NOT NULL ORDER BY key COLLATE \"C\"")
                .map(Self.entry(row:))
            return KeyValueList(entries: entries, bytes: try await Self.keyValueUsage(tx, container: id, excluding: nil).bytes, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
        }
    }

    // MARK: Maintenance

    public func heldChunks(_ ids: [ChunkID]) async throws -> Set<ChunkID> {
        try await transaction { tx in
            var held: Set<ChunkID> = []
            for start in stride(from: 0, to: ids.count, by: 4096) {
                let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
                for row in try await tx.rows("SELECT DISTINCT id FROM account_chunks WHERE id = ANY(\(batch))") {
                    if let id = ChunkID(bytes: try row[0].decode(Data.self)) { held.insert(id) }
                }
            }
            return held
        }
    }

    public func clock() async throws -> Int64 {
        try await transaction { tx in
            try await tx.int("SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint")!
        }
    }

    public func beginDeletion(_ ids: [ChunkID]) async throws -> [ChunkID] {
        guard !ids.isEmpty else { return [] }
        return try await transaction { tx in
            try await tx.run("SELECT pg_advisory_xact_lock(\(Self.deletionLock))")
            let batch = ids.map { ByteBuffer(bytes: $0.bytes) }
            return try await tx.rows("""
                INSERT INTO chunk_deletions (id, started_at, finished_at)
                SELECT c.id, (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint, NULL FROM unnest(\(batch)) AS c(id)
                WHERE NOT EXISTS (SELECT 1 FROM account_chunks a WHERE a.id = c.id)
                ON CONFLICT (id) DO UPDATE SET started_at = EXCLUDED.started_at, finished_at = NULL
                RETURNING id
                """).compactMap { ChunkID(bytes: try $0[0].decode(Data.self)) }
        }
    }

    public func endDeletion(_ ids: [ChunkID]) async throws {
        guard !ids.isEmpty else { return }
        try await transaction { tx in
            let batch = ids.map { ByteBuffer(bytes: $0.bytes) }
            try await tx.run("""
                UPDATE chunk_deletions SET finished_at = (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint WHERE id = ANY(\(batch))
                """)
        }
    }

    public func forgetDeletions(before cutoff: Int64) async throws {
        try await transaction { tx in try await tx.run("DELETE FROM chunk_deletions WHERE finished_at < \(cutoff)") }
    }

    public func recordLocations(_ locations: [ChunkLocation]) async throws {
        guard !locations.isEmpty else { return }
        try await transaction { tx in
            let ids = locations.map { ByteBuffer(bytes: $0.id.bytes) }
            let packs = locations.map(\.pack)
            let offsets = locations.map(\.offset)
            let lengths = locations.map { Int64($0.length) }
            try await tx.run("""
                INSERT INTO chunk_locations (id, pack, "offset", length, recorded_at)
                SELECT u.id, u.pack, u.o, u.l, (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint
                FROM unnest(\(ids)::bytea[], \(packs)::text[], \(offsets)::bigint[], \(lengths)::bigint[]) AS u(id, pack, o, l)
                ON CONFLICT (id) DO NOTHING
                """)
        }
    }

    public func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation] {
        guard !ids.isEmpty else { return [] }
        return try await transaction { tx in
            var found: [ChunkLocation] = []
            for start in stride(from: 0, to: ids.count, by: 4096) {
                let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
                found += try await tx.rows(#"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id = ANY(\#(batch))"#)
                    .compactMap(Self.location)
            }
            return found
        }
    }

    public func locations(shard: UInt8) async throws -> [ChunkLocation] {
        let (low, high) = ChunkLocation.shardBounds(shard)
        return try await transaction { tx in
            try await tx.rows(#"""
                SELECT id, pack, "offset", length, recorded_at FROM chunk_locations
                WHERE id >= \#(ByteBuffer(bytes: low)) AND id < \#(ByteBuffer(bytes: high)) ORDER BY id
                """#).compactMap(Self.location)
        }
    }

    public func locations(pack: String) async throws -> [ChunkLocation] {
        try await transaction { tx in
            try await tx.rows(#"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE pack = \#(pack) ORDER BY "offset""#)
                .compactMap(Self.location)
        }
    }

    public func removeLocations(_ ids: [ChunkID]) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        return try await transaction { tx in
            let batch = ids.map { ByteBuffer(bytes: $0.bytes) }
            let packs = try await tx.rows("DELETE FROM chunk_locations WHERE id = ANY(\(batch)) RETURNING pack")
                .map { try $0[0].decode(String.self) }
            guard !packs.isEmpty else { return [] }
            let emptied = Array(Set(packs))
            let live = try await tx.rows("SELECT DISTINCT pack FROM chunk_locations WHERE pack = ANY(\(emptied))").map { try $0[0].decode(String.self) }
            return Set(emptied).subtracting(live)
        }
    }

    public func packUsage() async throws -> [String: Int64] {
        try await transaction { tx in
            var usage: [String: Int64] = [:]
            for row in try await tx.rows("SELECT pack, SUM(length)::bigint FROM chunk_locations GROUP BY pack") {
                usage[try row[0].decode(String.self)] = try row[1].decode(Int64.self)
            }
            return usage
        }
    }

    public func moveLocations(_ moved: [ChunkLocation], from pack: String) async throws -> Int {
        guard !moved.isEmpty else { return 0 }
        return try await transaction { tx in
            let ids = moved.map { ByteBuffer(bytes: $0.id.bytes) }
            let packs = moved.map(\.pack)
            let offsets = moved.map(\.offset)
            let lengths = moved.map { Int64($0.length) }
            return try await tx.rows("""
                UPDATE chunk_locations c SET pack = u.pack, "offset" = u.o, length = u.l
                FROM unnest(\(ids)::bytea[], \(packs)::text[], \(offsets)::bigint[], \(lengths)::bigint[]) AS u(id, pack, o, l)
                WHERE c.id = u.id AND c.pack = \(pack) RETURNING c.id
                """).count
        }
    }

    private static func location(_ row: PostgresRandomAccessRow) throws -> ChunkLocation? {
        guard let id = ChunkID(bytes: try row[0].decode(Data.self)) else { return nil }
        return ChunkLocation(id: id, pack: try row[1].decode(String.self), offset: try row[2].decode(Int64.self),
                             length: Int(try row[3].decode(Int64.self)), recordedAt: try row[4].decode(Int64.self))
    }

    public func expireLeases(olderThan cutoff: Int64) async throws -> (chunks: Int, bytes: Int64) {
        try await transaction { tx in
            let rows = try await tx.rows("""
                DELETE FROM account_chunks WHERE refs <= 0 AND added_at <= \(cutoff) RETURNING account_id, length
                """)
            var perAccount: [Int64: Int64] = [:]
            for row in rows { perAccount[try row["account_id"].decode(Int64.self), default: 0] += try row["length"].decode(Int64.self) }
            for (account, bytes) in perAccount {
                try await tx.run("UPDATE accounts SET used = GREATEST(0, used - \(bytes)) WHERE id = \(account)")
            }
            return (rows.count, perAccount.values.reduce(0, +))
        }
    }

    public func expireUploads(olderThan cutoff: Int64) async throws -> Int {
        try await transaction { tx in
            let rows = try await tx.rows("SELECT document_id, version, container_id FROM versions WHERE state = 'uploading' AND created_at <= \(cutoff)")
            var expired = 0
            for row in rows {
                _ = try await Self.nextSequence(tx, container: try row["container_id"].decode(Int64.self))
                // Asked again under the container's lock: a commit may have made it current since
                // the SELECT (each statement reads a newer snapshot), and a committed version stays.
                expired += try await tx.rows("""
                    DELETE FROM versions WHERE document_id = \(try row["document_id"].decode(Int64.self))
                      AND version = \(try row["version"].decode(Int64.self)) AND state = 'uploading' AND created_at <= \(cutoff)
                    RETURNING version
                    """).count
            }
            return expired
        }
    }

    public func storedManifests(after: StoredVersionKey?, limit: Int) async throws -> [StoredManifest] {
        try await transaction { tx in
            let after = after ?? StoredVersionKey(document: 0, version: 0)
            return try await tx.rows("""
                SELECT c.account_id, c.name AS container, d.path, v.document_id, v.version, v.state, v.manifest, v.manifest_digest
                FROM versions v JOIN documents d ON d.id = v.document_id JOIN containers c ON c.id = v.container_id
                WHERE v.manifest IS NOT NULL AND (v.document_id, v.version) > (\(after.document), \(after.version))
                ORDER BY v.document_id, v.version LIMIT \(Int64(limit))
                """).map { row in
                StoredManifest(key: StoredVersionKey(document: try row["document_id"].decode(Int64.self), version: try row["version"].decode(Int64.self)),
                               account: try row["account_id"].decode(Int64.self), container: try row["container"].decode(String.self),
                               path: try row["path"].decode(String.self), state: try row["state"].decode(String.self),
                               encoded: Array(try row["manifest"].decode(Data.self)), digest: try row["manifest_digest"].decode(Data?.self).map(Array.init))
            }
        }
    }

    public func chunkRecords(after: ChunkRecordKey?, limit: Int) async throws -> [ChunkRecordRow] {
        try await transaction { tx in
            try await tx.rows("""
                SELECT account_id, id, length, refs FROM account_chunks WHERE (account_id, id) > (\(after?.account ?? -1), \(Data(after?.id.bytes ?? [])))
                ORDER BY account_id, id LIMIT \(Int64(limit))
                """).compactMap { row in
                guard let id = ChunkID(bytes: try row["id"].decode(Data.self)) else { return nil }
                return ChunkRecordRow(account: try row["account_id"].decode(Int64.self), id: id, length: try row["length"].decode(Int64.self),
                                      refs: try row["refs"].decode(Int64.self))
            }
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await transaction { tx in
            try await tx.rows("""
                SELECT a.id, a.name, a.used, (SELECT COALESCE(SUM(length), 0) FROM account_chunks WHERE account_id = a.id)::bigint AS held
                FROM accounts a ORDER BY a.id
                """).map {
                AccountUsage(id: try $0["id"].decode(Int64.self), name: try $0["name"].decode(String.self), used: try $0["used"].decode(Int64.self),
                             held: try $0["held"].decode(Int64.self))
            }
        }
    }

    // MARK: Helpers (inside a transaction)

    private struct DocumentRow {
        var id: Int64
        var current: Int64?
        var latest: Int64
    }

    /// The ids (of `ids`, first occurrences, in order) the account does not hold: one query per
    /// 4,096 ids.
    /// The stored length of each of `ids` the account holds, the rows locked until the end of
    /// the transaction: a commit that found a chunk held must still find it when it adds its
    /// reference, so no release in another container (or lease expiry) may delete the row in
    /// between (READ COMMITTED would let the later UPDATE match nothing). Locks are taken in id
    /// order, as ``adjustReferences(_:account:manifest:by:)`` takes them, so two never deadlock.
    private static func heldLengths(_ tx: Transaction, account: Int64, _ ids: [ChunkID]) async throws -> [ChunkID: Int64] {
        var held: [ChunkID: Int64] = [:]
        let ids = sortedForLocking(ids)
        for start in stride(from: 0, to: ids.count, by: 4096) {
            let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
            for row in try await tx.rows("SELECT id, length FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) ORDER BY id FOR UPDATE") {
                if let id = ChunkID(bytes: try row[0].decode(Data.self)) { held[id] = try row[1].decode(Int64.self) }
            }
        }
        return held
    }

    /// Chunk ids in the order PostgreSQL sorts `bytea` (bytewise), so row locks are taken in one order.
    private static func sortedForLocking(_ ids: [ChunkID]) -> [ChunkID] {
        ids.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    private static func lacking(_ tx: Transaction, account: Int64, _ ids: [ChunkID]) async throws -> [ChunkID] {
        var seen: Set<ChunkID> = []
        let unique = ids.filter { seen.insert($0).inserted }
        var held: Set<ChunkID> = []
        for start in stride(from: 0, to: unique.count, by: 4096) {
            let batch = unique[start..<min(start + 4096, unique.count)].map { ByteBuffer(bytes: $0.bytes) }
            for row in try await tx.rows("SELECT id FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch))") {
                if let id = ChunkID(bytes: try row[0].decode(Data.self)) { held.insert(id) }
            }
        }
        return unique.filter { !held.contains($0) }
    }

    /// Live keys of a container and their bytes (key plus stored JSON text), what the limits
    /// count; `excluding` leaves one key out (the one being written).
    private static func keyValueUsage(_ tx: Transaction, container: Int64, excluding key: String?) async throws -> (keys: Int, bytes: Int) {
        let row = try await tx.one("""
            SELECT COUNT(*) AS keys, COALESCE(SUM(octet_length(key) + octet_length(value)), 0)::bigint AS bytes FROM kv
            WHERE container_id = \(container) AND value IS NOT NULL AND key IS DISTINCT FROM \(key)
            """)!
        return (Int(try row["keys"].decode(Int64.self)), Int(try row["bytes"].decode(Int64.self)))
    }

    private static func containerID(_ tx: Transaction, account: Int64, name: ContainerName, create: Bool,
                                    policy: StorePolicy = StorePolicy()) async throws -> Int64? {
        if let id = try await tx.int("SELECT id FROM containers WHERE account_id = \(account) AND name = \(name.value)") { return id }
        guard create else { return nil }
        try AccountLimits.checkNewContainer(existing: try await tx.int("SELECT COUNT(*) FROM containers WHERE account_id = \(account)") ?? 0,
                                            policy: policy)
        try await tx.run("INSERT INTO containers (account_id, name) VALUES (\(account), \(name.value)) ON CONFLICT (account_id, name) DO NOTHING")
        return try await tx.int("SELECT id FROM containers WHERE account_id = \(account) AND name = \(name.value)")
    }

    private static func documentRow(_ tx: Transaction, container: Int64, path: DocumentPath, create: Bool) async throws -> DocumentRow? {
        if create {
            try await tx.run("INSERT INTO documents (container_id, path) VALUES (\(container), \(path.value)) ON CONFLICT (container_id, path) DO NOTHING")
        }
        guard let row = try await tx.one("""
            SELECT id, current_version, latest_version FROM documents WHERE container_id = \(container) AND path = \(path.value) FOR UPDATE
            """) else { return nil }
        return DocumentRow(id: try row["id"].decode(Int64.self), current: try row["current_version"].decode(Int64?.self),
                           latest: try row["latest_version"].decode(Int64.self))
    }

    /// Throws `conflict` if a live document of the container is an ancestor of `path` (a
    /// directory document aside) or lies below it (unless `kind` is a directory): the namespace
    /// is a tree (docs/PROTOCOL.md, "Names"). Called under the container's row lock, so the
    /// rule holds atomically across servers.
    private static func checkNamespace(_ tx: Transaction, container: Int64, path: DocumentPath, kind: DocumentKind) async throws {
        let range = path.descendantRange
        // A directory holds documents: below one, only the ancestors are asked about.
        let (low, high) = kind.holdsDocuments ? ("", "") : range
        if let row = try await tx.one("""
            SELECT d.path FROM documents d
            JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
            WHERE d.container_id = \(container) AND v.state != 'deleted'
              AND ((d.path = ANY(\(path.ancestors)) AND v.kind != \(DocumentKind.directory.rawValue))
                   OR (d.path COLLATE "C" >= \(low) AND d.path COLLATE "C" < \(high)))
            LIMIT 1
            """) {
            throw path.namespaceConflict(with: try row["path"].decode(String.self))
        }
    }

    /// The container's next feed number; holds its row lock to the end of the transaction.
    private static func nextSequence(_ tx: Transaction, container: Int64) async throws -> Int64 {
        try await tx.int("UPDATE containers SET sequence = sequence + 1 WHERE id = \(container) RETURNING sequence")!
    }

    /// Wakes long polls on every server (they re-read the feed).
    private static func notify(_ tx: Transaction, container: Int64) async throws {
        try await tx.run("SELECT pg_notify('xfer_changes', \(String(container)))")
    }

    private static func setState(_ tx: Transaction, _ state: VersionState, document: Int64, version: Int64, container: Int64) async throws {
        let sequence = try await nextSequence(tx, container: container)
        try await tx.run("UPDATE versions SET state = \(state.rawValue), sequence = \(sequence) WHERE document_id = \(document) AND version = \(version)")
    }

    private static func adjustReferences(_ tx: Transaction, account: Int64, manifest: Manifest, by delta: Int64) async throws {
        let ids = sortedForLocking(Array(Set(manifest.allChunks.map(\.id))))
        var released: Int64 = 0
        for start in stride(from: 0, to: ids.count, by: 4096) {
            let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
            if delta < 0 {
                // A release locks in id order too (a commit locked its rows in heldLengths).
                try await tx.run("SELECT 1 FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) ORDER BY id FOR UPDATE")
            }
            try await tx.run("UPDATE account_chunks SET refs = refs + \(delta) WHERE account_id = \(account) AND id = ANY(\(batch))")
            if delta < 0 {
                for row in try await tx.rows("DELETE FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) AND refs <= 0 RETURNING length") {
                    released += try row[0].decode(Int64.self)
                }
            }
        }
        if released > 0 {
            try await tx.run("UPDATE accounts SET used = GREATEST(0, used - \(released)) WHERE id = \(account)")
        }
    }

    private static func removeVersion(_ tx: Transaction, account: Int64, document: Int64, version: Int64) async throws {
        if let row = try await tx.one("SELECT manifest FROM versions WHERE document_id = \(document) AND version = \(version)"),
           let blob = try row[0].decode(Data?.self) {
            try await adjustReferences(tx, account: account, manifest: try Manifest(decoding: Array(blob)), by: -1)
        }
        try await tx.run("DELETE FROM versions WHERE document_id = \(document) AND version = \(version)")
    }

    private static func prune(_ tx: Transaction, account: Int64, document: Int64, policy: StorePolicy) async throws {
        let cutoff = now() - Int64(policy.keepDays) * 86_400
        let old = try await tx.rows("""
            SELECT version FROM versions WHERE document_id = \(document) AND state = 'superseded' AND created_at <= \(cutoff)
            AND version NOT IN (SELECT version FROM versions WHERE document_id = \(document) AND state = 'superseded'
                                ORDER BY version DESC LIMIT \(Int64(policy.keepVersions)))
            """)
        for row in old { try await removeVersion(tx, account: account, document: document, version: try row[0].decode(Int64.self)) }
    }

    private static let conflictsColumn =
        "(SELECT string_agg(c.version::text, ',') FROM versions c WHERE c.document_id = v.document_id AND c.state = 'conflict') AS conflicts"

    private static func info(_ tx: Transaction, document: Int64, path: DocumentPath, version: Int64) async throws -> DocumentInfo? {
        guard let row = try await tx.one("""
            SELECT \(path.value)::text AS path, v.*, \(unescaped: conflictsColumn) FROM versions v
            WHERE v.document_id = \(document) AND v.version = \(version)
            """) else { return nil }
        return try info(row: row)
    }

    private static func entry(row: PostgresRandomAccessRow) throws -> KeyValueEntry {
        let text = try row["value"].decode(String?.self)
        return KeyValueEntry(key: try row["key"].decode(String.self), value: try text.map { try JSONValue(parsing: $0) },
                             timestampNs: try row["timestamp_ns"].decode(Int64.self), device: try row["device"].decode(String.self),
                             sequence: try row["sequence"].decode(Int64.self))
    }

    private static func info(row: PostgresRandomAccessRow) throws -> DocumentInfo {
        let digest = try row["manifest_digest"].decode(Data?.self)
        let conflicts = try row["conflicts"].decode(String?.self)?.split(separator: ",").compactMap { Int64($0) }.sorted()
        return DocumentInfo(
            path: try DocumentPath(try row["path"].decode(String.self)), version: try row["version"].decode(Int64.self),
            state: VersionState(rawValue: try row["state"].decode(String.self)) ?? .uploading,
            kind: DocumentKind(rawValue: try row["kind"].decode(String.self)) ?? .file,
            size: try row["size"].decode(Int64.self), mtimeNs: try row["mtime_ns"].decode(Int64.self),
            mode: UInt32(truncatingIfNeeded: try row["mode"].decode(Int64.self)), baseVersion: try row["base_version"].decode(Int64?.self),
            manifestDigest: digest.flatMap { ChunkID(bytes: $0)?.hex }, files: try row["files"].decode(Int64?.self).map(Int.init),
            chunks: try row["chunks"].decode(Int64?.self).map(Int.init), device: try row["device"].decode(String?.self),
            sequence: try row["sequence"].decode(Int64.self), conflicts: conflicts?.isEmpty == false ? conflicts : nil)
    }
}
