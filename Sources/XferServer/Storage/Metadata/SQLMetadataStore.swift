import Foundation
import Synchronization
import XferCore
import XferProtocol

/// A metadata store over SQL: the backend supplies its connection handling (``read(_:)`` and
/// ``write(_:)`` as one transaction on a ``SQLSession``); everything else (the version state
/// machine, quota and references, key-value rules, the deletion protocol, the chunk-location
/// index) is written once, in this protocol's extensions, against ``MetadataTransaction``.
///
/// SQLite (``SQLiteMetadataStore``) and PostgreSQL (``PostgresMetadataStore``) conform, and
/// one conformance suite (MetadataStoreTests, run on both) holds them to the same answers.
protocol SQLMetadataStore: MetadataStore {
    var policy: StorePolicy { get }

    /// The keys manifests and key-value values are sealed with at rest; `nil` keeps new ones plain.
    var sealing: SealingKeys? { get }

    /// How chunk ids are kept at rest: enciphered under the store's index key when it has keys.
    var ids: ChunkIDCipher? { get }

    /// Runs `body` as one read-only transaction.
    func reading<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T

    /// Runs `body` as one read-write transaction: all of its changes, or (if it throws) none.
    func writing<T: Sendable>(_ body: @escaping @Sendable (any SQLSession) throws -> T) async throws -> T
}

extension SQLMetadataStore {
    func read<T: Sendable>(_ body: @escaping @Sendable (MetadataTransaction) throws -> T) async throws -> T {
        let (policy, sealing, ids) = (policy, sealing, ids)
        return try await reading { try body(MetadataTransaction(sql: $0, policy: policy, sealing: sealing, ids: ids)) }
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (MetadataTransaction) throws -> T) async throws -> T {
        let (policy, sealing, ids) = (policy, sealing, ids)
        return try await writing {
            let transaction = MetadataTransaction(sql: $0, policy: policy, sealing: sealing, ids: ids)
            let result = try body(transaction)
            try transaction.recordSequences()
            try transaction.recordVersionBytes()
            return result
        }
    }

    /// Test seam: one statement, as it is (ids bound as given), in a transaction of its own.
    func execute(_ statement: String, _ values: [SQLValue]) async throws {
        _ = try await writing { try $0.rows(statement, values).count }
    }
}

/// One transaction of the metadata store: the row operations the rules are made of, written
/// once for both backends over ``SQLSession``.
struct MetadataTransaction {
    let sql: any SQLSession
    let policy: StorePolicy
    let sealing: SealingKeys?
    /// How `sql` keeps chunk ids (its ``ChunkIDSession``'s contexts); `nil`: as they are.
    let storedIDs: ChunkIDCipher.Contexts?
    /// The feed numbers this transaction has handed out (``nextSequence(container:)``).
    let sequences = FeedNumbers()
    /// What this transaction has charged its accounts for versions (``chargeVersion(account:manifestBytes:refusable:)``).
    let versionBytes = VersionBytes()

    /// A transaction on `session`, chunk ids bound through `ids` (``ChunkIDSession``);
    /// `checkingPlainIDs: false` only where no index key can be looked for (making it, or a
    /// migration from before its table).
    init(
        sql session: any SQLSession, policy: StorePolicy, sealing: SealingKeys? = nil, ids: ChunkIDCipher? = nil,
        checkingPlainIDs: Bool = true
    ) {
        let bound = ChunkIDSession(base: session, ids: ids, checksPlain: checkingPlainIDs)
        sql = bound
        storedIDs = bound.ids
        self.policy = policy
        self.sealing = sealing
    }

    var dialect: SQLDialect { sql.dialect }

    /// Records that values sealed with `key` are stored from this transaction on (nothing if
    /// recorded already), before the first reference to one commits.
    func noteSealing(with key: SealingKeyID?) throws {
        guard let key else { return }
        try sql.rows(
            "INSERT INTO sealing_keys (id, added_at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", key.description,
            try clock())
    }

    /// A manifest's bytes as the versions table keeps them: sealed when the store has keys
    /// (bound to its document and version, whose row never moves).
    func storedManifest(_ encoded: [UInt8], document: Int64, version: Int64) throws -> [UInt8] {
        guard let sealing else { return encoded }
        try noteSealing(with: sealing.current.id)
        return sealing.seal(encoded, context: Sealing.manifestContext(document: document, version: version))
    }

    /// A manifest's encoding from what the versions table keeps (opened if it was sealed).
    func openedManifest(_ stored: [UInt8], document: Int64, version: Int64) throws -> [UInt8] {
        guard Sealing.isSealed(stored) else { return stored }
        return Array(
            try SealingKeys.openIfSealed(
                stored[...], keys: sealing, context: Sealing.manifestContext(document: document, version: version),
                what: "the manifest of version \(version) of document \(document)"))
    }

    /// Seconds since 1970: the `created_at` and `added_at` of rows.
    static func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// The store's clock in nanoseconds (the database's on PostgreSQL, so every server agrees).
    func clock() throws -> Int64 {
        guard let now = try sql.int("SELECT \(dialect.clock)") else {
            throw XferError(.internal, "the metadata store has no clock")
        }
        return now
    }

    /// The container's row id. With `create`, for a write: made if absent, its lock taken
    /// (``lockContainer(_:)``), and refused (`encrypted_container`) if it is end-to-end
    /// encrypted and the write is not `sealed` (a document under a sealed path,
    /// ``NameSealing/isSealed(path:)``), so a client that does not know it is encrypted never
    /// stores plain data in it.
    func containerID(account: Int64, name: ContainerName, create: Bool, sealed: Bool = false) throws -> Int64? {
        // An owner's name is resolved to the owner's account before the store (``ContainerTarget``).
        guard name.owner == nil else { throw XferError(.notFound, "no container \(name) in this account") }
        let select = "SELECT id FROM containers WHERE account_id = ? AND name = ?"
        if let id = try sql.int(select, account, name.value) {
            if create { try lockForWrite(id, name, sealed: sealed) }
            return id
        }
        guard create else { return nil }
        try AccountLimits.checkNewContainer(
            existing: try sql.int("SELECT COUNT(*) FROM containers WHERE account_id = ?", account) ?? 0,
            policy: policy)
        try sql.rows(
            "INSERT INTO containers (account_id, name) VALUES (?, ?) ON CONFLICT (account_id, name) DO NOTHING",
            account, name.value)
        guard let id = try sql.int(select, account, name.value) else { return nil }
        try lockForWrite(id, name, sealed: sealed)
        return id
    }

    /// The container's lock, then the look for its key: a key made meanwhile (which takes the
    /// same lock, and finds the container empty) is seen, on PostgreSQL as on SQLite.
    private func lockForWrite(_ id: Int64, _ name: ContainerName, sealed: Bool) throws {
        try lockContainer(id)
        if !sealed, try isEncrypted(container: id) {
            throw XferError(
                .encryptedContainer,
                """
                container \(name) is end-to-end encrypted; this server takes only sealed documents in it (names \
                sealed by a client holding its key), and no plain values
                """)
        }
    }

    /// Whether the container is end-to-end encrypted (it has a key).
    func isEncrypted(container id: Int64) throws -> Bool {
        try sql.one("SELECT 1 FROM container_keys WHERE container_id = ?", id) != nil
    }

    /// Locks the container's row to the end of the transaction: on PostgreSQL, commits,
    /// deletions, resolutions and key writes to one container are serialized, as SQLite's one
    /// writer serializes everything. Taken before any document's lock, always.
    func lockContainer(_ id: Int64) throws {
        try sql.rows("SELECT id FROM containers WHERE id = ?\(dialect.forUpdate)", id)
    }

    /// The container's next feed number; holds its row lock to the end of the transaction, so
    /// numbers are handed out and become visible in order.
    ///
    /// The row is written once for the first number and once more at the end
    /// (``recordSequences()``), not once a number: a batch of 500 commits took 1,500 numbers,
    /// and on PostgreSQL each update of the one row left a version that every later update,
    /// and every foreign-key check against the container, walked again (7.2 s for the batch,
    /// against 0.17 s on SQLite).
    func nextSequence(container: Int64) throws -> Int64 {
        if let next = sequences.next(container) { return next }
        guard
            let sequence = try sql.int(
                "UPDATE containers SET sequence = sequence + 1 WHERE id = ? RETURNING sequence", container)
        else {
            throw XferError(.internal, "container \(container) vanished inside its own transaction")
        }
        sequences.started(container, at: sequence)
        return sequence
    }

    /// Writes the last feed number this transaction handed out for each container, before it
    /// commits (``SQLMetadataStore/write(_:)`` calls it). Never lowers one: a number handed out
    /// in a savepoint rolled back since is a gap, never used twice.
    func recordSequences() throws {
        for (container, last) in sequences.unwritten() {
            try sql.rows("UPDATE containers SET sequence = ? WHERE id = ? AND sequence < ?", last, container, last)
        }
    }

    /// Which of `ids` any account holds.
    func heldByAnyAccount(_ ids: [ChunkID]) throws -> Set<ChunkID> {
        var held: Set<ChunkID> = []
        for batch in ids.batched(atMost: sqlBatchSize) {
            for row in try sql.rows(
                "SELECT DISTINCT id FROM account_chunks WHERE id IN (\(sqlPlaceholders(batch.count)))",
                batch.map(\.sqlValue))
            {
                if let id = try row.chunkID(0) { held.insert(id) }
            }
        }
        return held
    }

    /// Gives `bytes` back to an account's recorded use (never below zero).
    func release(_ bytes: Int64, account: Int64) throws {
        guard bytes > 0 else { return }
        try sql.rows(
            "UPDATE accounts SET used = CASE WHEN used > ? THEN used - ? ELSE 0 END WHERE id = ?", bytes, bytes, account
        )
    }
}

/// The feed numbers one transaction hands out, by container: the first comes from the row
/// (which locks it), the rest are counted here and written once at the end.
final class FeedNumbers: Sendable {
    private struct Taken {
        var last: Int64
        var written: Int64
    }
    private let taken = Mutex<[Int64: Taken]>([:])

    /// The next number for `container`, if this transaction has its row already.
    func next(_ container: Int64) -> Int64? {
        taken.withLock { taken in
            guard var entry = taken[container] else { return nil }
            entry.last += 1
            taken[container] = entry
            return entry.last
        }
    }

    /// The row gave `sequence` (and is written up to it).
    func started(_ container: Int64, at sequence: Int64) {
        taken.withLock { $0[container] = Taken(last: sequence, written: sequence) }
    }

    /// Each container whose last number is not written yet, with that number; counts them as written.
    func unwritten() -> [(container: Int64, last: Int64)] {
        taken.withLock { taken in
            var result: [(container: Int64, last: Int64)] = []
            for (container, entry) in taken where entry.last > entry.written {
                result.append((container, entry.last))
                taken[container]?.written = entry.last
            }
            return result
        }
    }
}
