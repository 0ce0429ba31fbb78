import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import XferCore
import XferProtocol

// The index of a packed chunk store (S3): where each chunk lives.
extension PostgresMetadataStore {
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

    static func location(_ row: PostgresRandomAccessRow) throws -> ChunkLocation? {
        guard let id = ChunkID(bytes: try row[0].decode(Data.self)) else { return nil }
        return ChunkLocation(id: id, pack: try row[1].decode(String.self), offset: try row[2].decode(Int64.self),
                             length: Int(try row[3].decode(Int64.self)), recordedAt: try row[4].decode(Int64.self))
    }
}
