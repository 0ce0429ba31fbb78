import Foundation
import XferCore
import XferProtocol

// Garbage collection and verification: the deletion protocol, expiry, and walks of every manifest and chunk record.
extension SQLMetadataStore {
    public func heldChunks(_ ids: [ChunkID]) async throws -> Set<ChunkID> {
        try await read { tx in
            var held: Set<ChunkID> = []
            for batch in Array(Set(ids)).batched(atMost: sqlBatchSize) {
                held.formUnion(try tx.heldByAnyAccount(batch))
            }
            return held
        }
    }

    public func clock() async throws -> Int64 {
        try await read { tx in try tx.clock() }
    }

    public func beginDeletion(_ ids: [ChunkID]) async throws -> [ChunkID] {
        guard !ids.isEmpty else { return [] }
        return try await write { tx in
            // Exclusive with uploads' shared hold (addChunks): either an upload recorded its
            // chunk before this looks, or it will see the mark.
            try tx.sql.lockDeletions(exclusive: true)
            let now = try tx.clock()
            var marked: [ChunkID] = []
            for batch in Array(Set(ids)).batched(atMost: sqlBatchSize) {
                let held = try tx.heldByAnyAccount(batch)
                let unheld = batch.filter { !held.contains($0) }
                guard !unheld.isEmpty else { continue }
                try tx.sql.rows(
                    """
                    INSERT INTO chunk_deletions (id, started_at, finished_at) VALUES \(sqlRows("?, ?, NULL", count: unheld.count))
                    ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at, finished_at = NULL
                    """, unheld.flatMap { [$0.sqlValue, .int(now)] })
                marked += unheld
            }
            return marked
        }
    }

    public func endDeletion(_ ids: [ChunkID]) async throws {
        guard !ids.isEmpty else { return }
        try await write { tx in
            let now = try tx.clock()
            for batch in ids.batched(atMost: sqlBatchSize) {
                try tx.sql.rows(
                    "UPDATE chunk_deletions SET finished_at = ? WHERE id IN (\(sqlPlaceholders(batch.count)))",
                    [.int(now)] + batch.map(\.sqlValue))
            }
        }
    }

    public func forgetDeletions(before cutoff: Int64) async throws {
        _ = try await write { tx in try tx.sql.rows("DELETE FROM chunk_deletions WHERE finished_at < ?", cutoff) }
    }

    public func expireLeases(olderThan cutoff: Int64) async throws -> (chunks: Int, bytes: Int64) {
        try await write { tx in
            let rows = try tx.sql.rows(
                "DELETE FROM account_chunks WHERE refs <= 0 AND added_at <= ? RETURNING account_id, length", cutoff)
            var perAccount: [Int64: Int64] = [:]
            for row in rows { perAccount[try row.int("account_id"), default: 0] += try row.int("length") }
            for (account, bytes) in perAccount { try tx.release(bytes, account: account) }
            return (rows.count, perAccount.values.reduce(0, +))
        }
    }

    public func expireUploads(olderThan cutoff: Int64) async throws -> Int {
        try await write { tx in
            let rows = try tx.sql.rows(
                "SELECT document_id, version, container_id FROM versions WHERE state = 'uploading' AND created_at <= ?",
                cutoff)
            var expired = 0
            for row in rows {
                // The removal is a change on the feed, like any other (a waiting client re-reads the document).
                _ = try tx.nextSequence(container: try row.int("container_id"))
                // Asked again under the container's lock: on PostgreSQL a commit may have made it
                // current since the SELECT, and a committed version stays.
                expired += try tx.sql.rows(
                    """
                    DELETE FROM versions WHERE document_id = ? AND version = ? AND state = 'uploading' AND created_at <= ? RETURNING version
                    """, try row.int("document_id"), try row.int("version"), cutoff
                ).count
            }
            return expired
        }
    }

    static func openedForMaintenance(_ tx: MetadataTransaction, _ stored: [UInt8], document: Int64, version: Int64)
        throws -> [UInt8]
    {
        do {
            return try tx.openedManifest(stored, document: document, version: version)
        } catch let error as XferError where error.code == .corruptChunk {
            return stored
        }
    }

    public func storedManifests(after: StoredVersionKey?, limit: Int) async throws -> [StoredManifest] {
        try await read { tx in
            let after = after ?? StoredVersionKey(document: 0, version: 0)
            return try tx.sql.rows(
                """
                SELECT c.account_id, c.name AS container, d.path, v.document_id, v.version, v.state, v.manifest, v.manifest_digest
                FROM versions v JOIN documents d ON d.id = v.document_id JOIN containers c ON c.id = v.container_id
                WHERE v.manifest IS NOT NULL AND (v.document_id, v.version) > (?, ?)
                ORDER BY v.document_id, v.version LIMIT ?
                """, after.document, after.version, limit
            ).map { row in
                StoredManifest(
                    key: StoredVersionKey(document: try row.int("document_id"), version: try row.int("version")),
                    account: try row.int("account_id"), container: try row.text("container"),
                    path: try row.text("path"),
                    state: try row.text("state"),
                    // One that does not open is passed on as it is stored: verify reports it (it does not decode).
                    encoded: try Self.openedForMaintenance(
                        tx, try row.blob("manifest"), document: try row.int("document_id"),
                        version: try row.int("version")),
                    digest: try row.optionalBlob("manifest_digest"))
            }
        }
    }

    public func chunkRecords(after: ChunkRecordKey?, limit: Int) async throws -> [ChunkRecordRow] {
        try await read { tx in
            try tx.sql.rows(
                """
                SELECT account_id, id, length, refs FROM account_chunks WHERE (id, account_id) > (?, ?)
                ORDER BY id, account_id LIMIT ?
                """, after.map { $0.id as any SQLBindable } ?? [UInt8](), after?.account ?? -1, limit
            ).compactMap { row in
                guard let id = try row.chunkID("id") else { return nil }
                return ChunkRecordRow(
                    account: try row.int("account_id"), id: id, length: try row.int("length"), refs: try row.int("refs")
                )
            }
        }
    }
}
