import Foundation
import XferCore
import XferProtocol

/// A document's row: its id, current version (none while only a pending one exists) and the
/// highest version number handed out.
struct DocumentRow {
    var id: Int64
    var current: Int64?
    var latest: Int64
}

// The rows of documents, versions and the chunks an account holds.
extension MetadataTransaction {
    /// The distinct ids of `ids` the account does not hold, in first-seen order.
    func lacking(account: Int64, _ ids: [ChunkID]) throws -> [ChunkID] {
        var seen: Set<ChunkID> = []
        let unique = ids.filter { seen.insert($0).inserted }
        var held: Set<ChunkID> = []
        for batch in inStoredOrder(unique).batched(atMost: sqlBatchSize) {
            for row in try sql.rows(
                "SELECT id FROM account_chunks WHERE account_id = ? AND id IN (\(sqlPlaceholders(batch.count)))",
                [.int(account)] + batch.map(\.sqlValue))
            {
                if let id = try row.chunkID(0) { held.insert(id) }
            }
        }
        return unique.filter { !held.contains($0) }
    }

    /// The stored length of each of `ids` the account holds, the rows locked until the end of
    /// the transaction: a commit that found a chunk held must still find it when it adds its
    /// reference, so no release in another container (or lease expiry) may delete the row in
    /// between. Locks are taken in id order, as ``adjustReferences(account:manifest:by:)``
    /// takes them, so two transactions never deadlock.
    func heldLengths(account: Int64, _ ids: [ChunkID]) throws -> [ChunkID: Int64] {
        var held: [ChunkID: Int64] = [:]
        for batch in inStoredOrder(ids).batched(atMost: sqlBatchSize) {
            for row in try sql.rows(
                """
                SELECT id, length FROM account_chunks WHERE account_id = ? AND id IN (\(sqlPlaceholders(batch.count)))
                ORDER BY id\(dialect.forUpdate)
                """, [.int(account)] + batch.map(\.sqlValue))
            {
                if let id = try row.chunkID(0) { held[id] = try row.int(1) }
            }
        }
        return held
    }

    /// Adds a reference to each of `ids` (distinct) that the account holds and returns their
    /// lengths: ``heldLengths(account:_:)`` and ``adjustReferences(account:manifest:by:)``
    /// by 1 in one pass over the rows, for a database that locks no rows one by one (SQLite).
    /// The caller throws, and so rolls the references back, if any is missing.
    func referenceHeld(account: Int64, _ ids: [ChunkID]) throws -> [ChunkID: Int64] {
        precondition(!dialect.locksRows, "rows are locked in id order before they are written")
        var held: [ChunkID: Int64] = [:]
        held.reserveCapacity(ids.count)
        for batch in inStoredOrder(ids).batched(atMost: sqlBatchSize) {
            for row in try sql.rows(
                """
                UPDATE account_chunks SET refs = refs + 1 WHERE account_id = ? AND id IN (\(sqlPlaceholders(batch.count)))
                RETURNING id, length
                """, [.int(account)] + batch.map(\.sqlValue))
            {
                if let id = try row.chunkID(0) { held[id] = try row.int(1) }
            }
        }
        return held
    }

    /// The distinct `ids` in the order both databases sort what they keep for them (bytewise;
    /// a sealed store keeps ids enciphered, so that is the enciphered bytes' order, not the
    /// ids'). Row locks are then taken in one order by every transaction, batch after batch and
    /// within each (`ORDER BY id`), so two never deadlock; and a batch's rows are neighbours in
    /// the index.
    func inStoredOrder(_ ids: [ChunkID]) -> [ChunkID] {
        inStoredOrder(Array(Set(ids))) { $0 }
    }

    /// `items` in the order of their ids as ``inStoredOrder(_:)`` gives it: rows inserted in
    /// the order the index keeps them fill its pages one after another instead of splitting
    /// pages all over it.
    func inStoredOrder<T>(_ items: [T], id: (T) -> ChunkID) -> [T] {
        // ChunkID's `<` is its bytes' order, compared as four words.
        guard let storedIDs else { return items.sorted { id($0) < id($1) } }
        return zip(storedIDs.storedForms(items.map(id)), items).sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// The document's row, locked (unless `locking` is false: a read that changes nothing and
    /// must not hold rows, as a batch of manifests read in one transaction would); created
    /// first if `create` and it does not exist.
    func documentRow(container: Int64, path: DocumentPath, create: Bool, locking: Bool = true) throws -> DocumentRow? {
        if create {
            try sql.rows(
                """
                INSERT INTO documents (container_id, path, name_folded) VALUES (?, ?, ?) ON CONFLICT (container_id, path) DO NOTHING
                """, container, path.value, DocumentQuery.folded(DocumentQuery.name(of: path)))
        }
        guard
            let row = try sql.one(
                """
                SELECT id, current_version, latest_version FROM documents WHERE container_id = ? AND path = ?\(locking ? dialect.forUpdate : "")
                """, container, path.value)
        else { return nil }
        return DocumentRow(
            id: try row.int("id"), current: try row.optionalInt("current_version"),
            latest: try row.int("latest_version"))
    }

    /// Throws `conflict` if a live document of the container is an ancestor of `path` (a
    /// directory document aside) or lies below it (unless `kind` is a directory): the namespace
    /// is a tree (docs/PROTOCOL.md, "Names"). Run under the container's lock, inside the
    /// transaction that creates or commits the version, so the rule holds atomically.
    func checkNamespace(container: Int64, path: DocumentPath, kind: DocumentKind) throws {
        // Two lookups, each a search of the (container_id, path) index: SQLite plans the two
        // conditions joined by OR as a scan of the whole container.
        func live(_ condition: String, _ values: [SQLValue]) throws -> String? {
            try sql.rows(
                """
                SELECT d.path FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = ? AND \(condition) AND v.state != 'deleted'
                LIMIT 1
                """, [.int(container)] + values
            ).first?.text(0)
        }
        let ancestors = path.ancestors
        if !ancestors.isEmpty,
            let other = try live(
                "d.path IN (\(sqlPlaceholders(ancestors.count))) AND v.kind != ?",
                ancestors.map(\.sqlValue) + [.text(DocumentKind.directory.rawValue)])
        {
            throw path.namespaceConflict(with: other)
        }
        let range = path.descendantRange
        if !kind.holdsDocuments,
            let other = try live(
                "d.path\(dialect.bytewise) >= ? AND d.path\(dialect.bytewise) < ?",
                [.text(range.low), .text(range.high)])
        {
            throw path.namespaceConflict(with: other)
        }
    }

    /// Changes a version's state as one change on the feed.
    func setState(_ state: VersionState, document: Int64, version: Int64, container: Int64) throws {
        let sequence = try nextSequence(container: container)
        // When a version left the current or conflict state: retention counts from then (a
        // conflict kept for months and then superseded is not pruned at once).
        try sql.rows(
            "UPDATE versions SET state = ?, sequence = ?, superseded_at = ? WHERE document_id = ? AND version = ?",
            state.rawValue, sequence, state == .superseded ? Optional(Self.now()) : nil, document, version)
    }

    /// Counts a committed manifest's distinct chunks as referenced once more (`by: 1`) or once
    /// less (`by: -1`); chunks no version references any more leave the account and its quota.
    func adjustReferences(account: Int64, manifest: Manifest, by delta: Int64) throws {
        var released: Int64 = 0
        for batch in inStoredOrder(manifest.allChunks.map(\.id)).batched(atMost: sqlBatchSize) {
            let ids = batch.map(\.sqlValue)
            let list = "account_id = ? AND id IN (\(sqlPlaceholders(batch.count)))"
            if delta < 0 {
                // A release locks in id order too (a commit locked its rows in heldLengths).
                try sql.rows(
                    "SELECT 1 FROM account_chunks WHERE \(list) ORDER BY id\(dialect.forUpdate)", [.int(account)] + ids)
            }
            try sql.rows("UPDATE account_chunks SET refs = refs + ? WHERE \(list)", [.int(delta), .int(account)] + ids)
            if delta < 0 {
                for row in try sql.rows(
                    "DELETE FROM account_chunks WHERE \(list) AND refs <= 0 RETURNING length", [.int(account)] + ids)
                {
                    released += try row.int(0)
                }
            }
        }
        try release(released, account: account)
    }

    /// Removes a version and gives back what only it referenced.
    func removeVersion(account: Int64, document: Int64, version: Int64) throws {
        guard
            let row = try sql.one(
                "SELECT state, manifest FROM versions WHERE document_id = ? AND version = ?", document, version)
        else { return }
        let blob = try row.optionalBlob("manifest")
        releaseVersion(account: account, state: try row.text("state"), manifestBytes: blob?.count ?? 0)
        // A manifest that no longer opens or decodes gives nothing back: its chunks stay
        // held (gc keeps them), and the version still goes.
        if let blob, let manifest = try? Manifest(decoding: openedManifest(blob, document: document, version: version))
        {
            try adjustReferences(account: account, manifest: manifest, by: -1)
        }
        try sql.rows("DELETE FROM versions WHERE document_id = ? AND version = ?", document, version)
    }

    /// Removes superseded versions past the policy: beyond the newest `keepVersions` and older
    /// than `keepDays`. Current, conflict, uploading and deletion versions are never pruned.
    func prune(account: Int64, document: Int64) throws {
        let cutoff = Self.now() - Int64(policy.keepDays) * 86_400
        let old = try sql.rows(
            """
            SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' AND COALESCE(superseded_at, created_at) <= ?
            AND version NOT IN (SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' ORDER BY version DESC LIMIT ?)
            """, document, cutoff, document, Int64(policy.keepVersions))
        for row in old { try removeVersion(account: account, document: document, version: try row.int(0)) }
    }

    /// The columns ``info(row:)`` reads, for a query over `versions v` that names the path.
    var infoColumns: String {
        """
        v.*, (SELECT \(dialect.joinedIntegers("c.version")) FROM versions c
              WHERE c.document_id = v.document_id AND c.state = 'conflict') AS conflicts
        """
    }

    func info(document: Int64, path: DocumentPath, version: Int64) throws -> DocumentInfo? {
        try sql.one(
            "SELECT CAST(? AS TEXT) AS path, \(infoColumns) FROM versions v WHERE v.document_id = ? AND v.version = ?",
            path.value, document, version
        ).map(Self.info(row:))
    }

    static func info(row: SQLRow) throws -> DocumentInfo {
        let conflicts = try row.optionalText("conflicts")?.split(separator: ",").compactMap { Int64($0) }.sorted()
        return DocumentInfo(
            path: try DocumentPath(try row.text("path")), version: try row.int("version"),
            state: try Stored.state(try row.text("state")), kind: try Stored.kind(try row.text("kind")),
            size: try row.int("size"), mtimeNs: try row.int("mtime_ns"),
            mode: UInt32(truncatingIfNeeded: try row.int("mode")),
            baseVersion: try row.optionalInt("base_version"),
            manifestDigest: try row.optionalBlob("manifest_digest").flatMap { ChunkID(bytes: $0)?.hex },
            files: try row.optionalInt("files").map(Int.init), chunks: try row.optionalInt("chunks").map(Int.init),
            device: try row.optionalText("device"), sequence: try row.int("sequence"),
            conflicts: conflicts?.isEmpty == false ? conflicts : nil)
    }
}
