import Foundation
import GRDB
import XferCore
import XferProtocol

// The index of a packed chunk store (S3): where each chunk lives.
extension SQLiteMetadataStore {
    public func recordLocations(_ locations: [ChunkLocation]) async throws {
        guard !locations.isEmpty else { return }
        let now = try await clock()
        try await write { db in
            let insert = try db.cachedStatement(sql: """
                INSERT OR IGNORE INTO chunk_locations (id, pack, "offset", length, recorded_at) VALUES (?, ?, ?, ?, ?)
                """)
            for location in locations {
                try insert.execute(arguments: [Data(location.id.bytes), location.pack, location.offset, location.length, now])
            }
        }
    }

    public func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation] {
        try await read { db in
            let select = try db.cachedStatement(sql: #"SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id = ?"#)
            return try ids.compactMap { id in try Row.fetchOne(select, arguments: [Data(id.bytes)]).flatMap(Self.location) }
        }
    }

    public func locations(shard: UInt8) async throws -> [ChunkLocation] {
        try await read { db in
            let (low, high) = ChunkLocation.shardBounds(shard)
            return try Row.fetchAll(db, sql: """
                SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE id >= ? AND id < ? ORDER BY id
                """, arguments: [Data(low), Data(high)]).compactMap(Self.location)
        }
    }

    public func locations(pack: String) async throws -> [ChunkLocation] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT id, pack, "offset", length, recorded_at FROM chunk_locations WHERE pack = ? ORDER BY "offset"
                """, arguments: [pack]).compactMap(Self.location)
        }
    }

    public func removeLocations(_ ids: [ChunkID]) async throws -> Set<String> {
        try await write { db in
            let pack = try db.cachedStatement(sql: "SELECT pack FROM chunk_locations WHERE id = ?")
            let remove = try db.cachedStatement(sql: "DELETE FROM chunk_locations WHERE id = ?")
            var packs: Set<String> = []
            for id in ids {
                if let name = try String.fetchOne(pack, arguments: [Data(id.bytes)]) { packs.insert(name) }
                try remove.execute(arguments: [Data(id.bytes)])
            }
            let live = try db.cachedStatement(sql: "SELECT 1 FROM chunk_locations WHERE pack = ? LIMIT 1")
            return try packs.filter { try Row.fetchOne(live, arguments: [$0]) == nil }
        }
    }

    public func packUsage() async throws -> [String: Int64] {
        try await read { db in
            var usage: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT pack, SUM(length) AS bytes FROM chunk_locations GROUP BY pack") {
                usage[row["pack"]] = row["bytes"]
            }
            return usage
        }
    }

    public func moveLocations(_ moved: [ChunkLocation], from pack: String) async throws -> Int {
        try await write { db in
            let move = try db.cachedStatement(sql: #"UPDATE chunk_locations SET pack = ?, "offset" = ?, length = ? WHERE id = ? AND pack = ?"#)
            var count = 0
            for location in moved {
                try move.execute(arguments: [location.pack, location.offset, location.length, Data(location.id.bytes), pack])
                count += db.changesCount
            }
            return count
        }
    }

    static func location(_ row: Row) -> ChunkLocation? {
        guard let id = ChunkID(bytes: row["id"] as Data) else { return nil }
        return ChunkLocation(id: id, pack: row["pack"], offset: row["offset"], length: row["length"], recordedAt: row["recorded_at"])
    }
}
