import Foundation
import GRDB
import XferCore
import XferProtocol

// Garbage collection and verification: the deletion protocol, expiry, and walks of every manifest and chunk record.
extension SQLiteMetadataStore {
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
}
