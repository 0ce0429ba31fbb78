import Foundation
import XferCore
import XferProtocol

// The index of the packed chunk store: where each chunk lives.
extension SQLMetadataStore {
    public func recordLocations(_ locations: [ChunkLocation], sealedWith key: SealingKeyID?) async throws {
        guard !locations.isEmpty else { return }
        try await write { tx in
            try tx.noteSealing(with: key)
            let packs = try tx.packIDs(Set(locations.map(\.pack)), recordedAt: try tx.clock())
            var seen: Set<ChunkID> = []
            let distinct = locations.filter { seen.insert($0.id).inserted }
            for batch in tx.inStoredOrder(distinct, id: \.id).batched(atMost: sqlBatchSize) {
                try tx.sql.rows(
                    """
                    INSERT INTO chunk_locations (id, pack_id, "offset", length)
                    VALUES \(sqlRows("?, ?, ?, ?", count: batch.count))
                    ON CONFLICT (id) DO NOTHING
                    """,
                    batch.flatMap { [$0.id.sqlValue, .int(packs[$0.pack]!), .int($0.offset), .int(Int64($0.length))] })
            }
            // A pack all of whose chunks were located already is named by nothing.
            _ = try tx.forgetEmptyPacks(Array(packs.values))
        }
    }

    public func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation] {
        guard !ids.isEmpty else { return [] }
        return try await read { tx in
            var found: [ChunkLocation] = []
            for batch in ids.batched(atMost: sqlBatchSize) {
                found += try tx.sql.rows(
                    "\(MetadataTransaction.locationColumns) WHERE l.id IN (\(sqlPlaceholders(batch.count)))",
                    batch.map(\.sqlValue)
                ).compactMap(MetadataTransaction.location)
            }
            return found
        }
    }

    public func locations(shard: UInt8) async throws -> [ChunkLocation] {
        let (low, high) = ChunkLocation.shardBounds(shard)
        return try await read { tx in
            try tx.sql.rows(
                "\(MetadataTransaction.locationColumns) WHERE l.id >= ? AND l.id < ? ORDER BY l.id", low, high
            )
            .compactMap(MetadataTransaction.location)
        }
    }

    public func locations(pack: String) async throws -> [ChunkLocation] {
        try await read { tx in
            try tx.sql.rows(#"\#(MetadataTransaction.locationColumns) WHERE p.name = ? ORDER BY l."offset""#, pack)
                .compactMap(MetadataTransaction.location)
        }
    }

    public func removeLocations(_ ids: [ChunkID]) async throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        return try await write { tx in
            var packs: Set<Int64> = []
            // In the index's order, as a move updates them: the two never lock rows crosswise.
            for batch in tx.inStoredOrder(ids).batched(atMost: sqlBatchSize) {
                for row in try tx.sql.rows(
                    "DELETE FROM chunk_locations WHERE id IN (\(sqlPlaceholders(batch.count))) RETURNING pack_id",
                    batch.map(\.sqlValue))
                {
                    packs.insert(try row.int(0))
                }
            }
            return try tx.forgetEmptyPacks(Array(packs))
        }
    }

    public func packUsage() async throws -> [String: Int64] {
        try await read { tx in
            var usage: [String: Int64] = [:]
            for row in try tx.sql.rows(
                """
                SELECT p.name, CAST(SUM(l.length) AS BIGINT) AS bytes FROM chunk_locations l JOIN packs p ON p.id = l.pack_id GROUP BY p.name
                """)
            {
                usage[try row.text("name")] = try row.int("bytes")
            }
            return usage
        }
    }

    public func moveLocations(_ moved: [ChunkLocation], from pack: String, sealedWith key: SealingKeyID?) async throws
        -> Int
    {
        guard !moved.isEmpty else { return 0 }
        return try await write { tx in
            try tx.noteSealing(with: key)
            guard let source = try tx.sql.int("SELECT id FROM packs WHERE name = ?", pack) else { return 0 }
            let packs = try tx.packIDs(Set(moved.map(\.pack)), recordedAt: try tx.clock())
            var count = 0
            // In the index's order, as a removal deletes them: the two never lock rows crosswise.
            for location in tx.inStoredOrder(moved, id: \.id) {
                count += try tx.sql.rows(
                    #"UPDATE chunk_locations SET pack_id = ?, "offset" = ?, length = ? WHERE id = ? AND pack_id = ? RETURNING id"#,
                    packs[location.pack]!, location.offset, location.length, location.id, source
                ).count
            }
            _ = try tx.forgetEmptyPacks(Array(packs.values) + [source])
            return count
        }
    }
}

extension MetadataTransaction {
    /// A location's columns, in the order ``location(_:)`` reads them; a statement adds its `WHERE`.
    static let locationColumns =
        #"SELECT l.id, p.name, l."offset", l.length, p.recorded_at FROM chunk_locations l JOIN packs p ON p.id = l.pack_id"#

    static func location(_ row: SQLRow) throws -> ChunkLocation? {
        guard let id = try row.chunkID(0) else { return nil }
        return ChunkLocation(
            id: id, pack: try row.text(1), offset: try row.int(2), length: Int(try row.int(3)),
            recordedAt: try row.int(4))
    }

    /// The numbers of the packs `names`, each recorded (at `recordedAt`) if it is not yet.
    func packIDs(_ names: Set<String>, recordedAt: Int64) throws -> [String: Int64] {
        var ids: [String: Int64] = [:]
        for name in names.sorted() {
            try sql.rows(
                "INSERT INTO packs (name, recorded_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", name, recordedAt)
            guard let id = try sql.int("SELECT id FROM packs WHERE name = ?", name) else {
                throw XferError(.internal, "pack \(name) vanished inside the transaction that recorded it")
            }
            ids[name] = id
        }
        return ids
    }

    /// Forgets those of the packs `ids` that no location names any more.
    /// - Returns: Their names.
    func forgetEmptyPacks(_ ids: [Int64]) throws -> Set<String> {
        var names: Set<String> = []
        // Each pack's row locked first, in one order (on PostgreSQL; SQLite has one writer): two
        // transactions that each removed part of one pack look at it one after the other, so
        // the second sees the first's removals and the row does not outlive its last location.
        // Then one look per pack, stopping at its first remaining chunk (a DISTINCT over all of
        // them would read every location of every pack named).
        for id in Set(ids).sorted() {
            try sql.rows("SELECT id FROM packs WHERE id = ?\(dialect.forUpdate)", id)
            guard try sql.one("SELECT 1 FROM chunk_locations WHERE pack_id = ? LIMIT 1", id) == nil else { continue }
            for row in try sql.rows("DELETE FROM packs WHERE id = ? RETURNING name", id) {
                names.insert(try row.text(0))
            }
        }
        return names
    }
}
