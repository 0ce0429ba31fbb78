import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import XferCore
import XferProtocol

// Garbage collection and verification: the deletion protocol, expiry, and walks of every manifest and chunk record.
extension PostgresMetadataStore {
    /// The advisory lock that orders deletion marks against uploads recording chunks.
    static let deletionLock: Int64 = 7304

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
}
