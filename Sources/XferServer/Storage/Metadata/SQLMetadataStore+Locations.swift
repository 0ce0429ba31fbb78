import Foundation
import XferCore
import XferProtocol

// The index of the packed chunk store: where each chunk lives.
extension SQLMetadataStore {
    public func recordLocations(_ locations: [ChunkLocation], sealedWith key: SealingKeyID?) async throws {
        guard !locations.isEmpty else { return }
        try await write { tx in
            try tx.noteSealing(with: key)
            let now = try tx.clock()
            for batch in locations.batched(atMost: sqlBatchSize) {
                try tx.sql.rows("""
                    INSERT INTO chunk_locations (id, pack, "offset", length, recorded_at)
                    VALUES \(sqlRows("?, ?, ?, ?, ?", count: batch.count))
                    ON CONFLICT (id) DO NOTHING
                    """, batch.flatMap { [$0.id.sqlValue, .text($0.pack), .int($0.offset), .int(Int64($0.length)), .int(now)] })
            }
        }
    }

    public func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation] {
        guard !ids.isEmpty else { return [] }
        return try await read { tx in
            var found: [ChunkLocation] = []
            for batch in ids.batched(atMost: sqlBatchSize) {
                found += try tx.sql.rows(#"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id IN (\#(sqlPlaceholders(batch.count)))"#,
                                         batch.map(\.sqlValue)).compactMap(MetadataTransaction.location)
            }
            return found
        }
    }

    public func locations(shard: UInt8) async throws -> [ChunkLocation] {
        let (low, high) = ChunkLocation.shardBounds(shard)
        return try await read { tx in
            try tx.sql.rows(#"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id >= ? AND id < ? ORDER BY id"#,
                            low, high).compactMap(MetadataTransaction.location)
        }
    }

    public func locations(pack: String) async throws -> [ChunkLocation] {
        try await read { tx in
            try tx.sql.rows(#"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE pack = ? ORDER BY "offset""#, pack)
                .compactMap(MetadataTransaction.location)
        }
    }

    public func removeLocations(_ ids: [ChunkID]) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        return try await write { tx in
            var packs: Set<String> = []
            for batch in ids.batched(atMost: sqlBatchSize) {
                for row in try tx.sql.rows("DELETE FROM chunk_locations WHERE id IN (\(sqlPlaceholders(batch.count))) RETURNING pack",
                                           batch.map(\.sqlValue)) {
                    packs.insert(try row.text(0))
                }
            }
            // One look per pack, stopping at its first remaining chunk (a DISTINCT over all
            // of them would read every location of every pack named).
            let live = try packs.filter { try tx.sql.one("SELECT 1 FROM chunk_locations WHERE pack = ? LIMIT 1", $0) != nil }
            return packs.subtracting(live)
        }
    }

    public func packUsage() async throws -> [String: Int64] {
        try await read { tx in
            var usage: [String: Int64] = [:]
            for row in try tx.sql.rows("SELECT pack, CAST(SUM(length) AS BIGINT) AS bytes FROM chunk_locations GROUP BY pack") {
                usage[try row.text("pack")] = try row.int("bytes")
            }
            return usage
        }
    }

    public func moveLocations(_ moved: [ChunkLocation], from pack: String, sealedWith key: SealingKeyID?) async throws -> Int {
        guard !moved.isEmpty else { return 0 }
        return try await write { tx in
            try tx.noteSealing(with: key)
            var count = 0
            for location in moved {
                count += try tx.sql.rows(#"UPDATE chunk_locations SET pack = ?, "offset" = ?, length = ? WHERE id = ? AND pack = ? RETURNING id"#,
                                         location.pack, location.offset, location.length, location.id, pack).count
            }
            return count
        }
    }
}

extension MetadataTransaction {
    static func location(_ row: SQLRow) throws -> ChunkLocation? {
        guard let id = try row.chunkID(0) else { return nil }
        return ChunkLocation(id: id, pack: try row.text(1), offset: try row.int(2), length: Int(try row.int(3)), recordedAt: try row.int(4))
    }
}
