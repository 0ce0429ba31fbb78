import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// A store laid out as the release before the compact chunk index left it (a location names
/// its pack by name and keeps its own time; holdings are keyed by account first, with a second
/// index by chunk) opens migrated, on every backend this run can reach: every holding and
/// location is found again with its lengths, references and times, and the index's rules work
/// on the moved rows.
@Suite struct ChunkIndexMigrationTests {
    /// The last migration of the layout before, per backend.
    static let before = [
        "sqlite": "v9: end-to-end encrypted containers", "postgres": "v7: end-to-end encrypted containers"
    ]

    @Test(arguments: MetadataStoreTests.backends)
    func holdingsAndLocationsSurviveTheMigration(_ kind: String) async throws {
        try await IndexKeyTests.withPlace(kind, "cm") { place in
            let (a, b, c, absent) = (ChunkID.of([1]), ChunkID.of([2]), ChunkID.of([3]), ChunkID.of([4]))
            let last: String = try #require(Self.before[kind])  // a version before the migration
            do {
                let old =
                    try await IndexKeyTests.open(kind, place, migratingUpTo: last)
                    as! any SQLMetadataStore
                defer { (old as? PostgresMetadataStore)?.shutdown() }
                _ = try await old.createAccount(
                    name: try AccountName("alice"), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(place)"))
                // Not by `accounts()`, which reads columns of later migrations.
                let account = try #require(
                    try await old.read { try $0.sql.int("SELECT id FROM accounts WHERE name = 'alice'") })
                for (id, length, refs) in [(a, 100, 1), (b, 200, 0), (c, 300, 2)] {
                    try await old.execute(
                        "INSERT INTO account_chunks (account_id, id, length, refs, added_at) VALUES (?, ?, ?, ?, ?)",
                        [.int(account), .blob(id.bytes), .int(Int64(length)), .int(Int64(refs)), .int(7)])
                }
                try await old.execute("UPDATE accounts SET used = 600 WHERE id = ?", [.int(account)])
                for (id, pack, offset, length, at) in [
                    (a, "p1", 0, 140, 100), (b, "p1", 140, 240, 200), (c, "p2", 0, 340, 300)
                ] {
                    try await old.execute(
                        #"INSERT INTO chunk_locations (id, pack, "offset", length, recorded_at) VALUES (?, ?, ?, ?, ?)"#,
                        [.blob(id.bytes), .text(pack), .int(Int64(offset)), .int(Int64(length)), .int(Int64(at))])
                }
            }

            let store = try await IndexKeyTests.open(kind, place)
            defer { (store as? PostgresMetadataStore)?.shutdown() }
            let account = try await MetadataStoreTests.accountID(store, "alice")
            let located = Dictionary(
                uniqueKeysWithValues: try await store.locations([a, b, c, absent]).map { ($0.id, $0) })
            #expect(located.count == 3)
            #expect(
                located[a] == ChunkLocation(id: a, pack: "p1", offset: 0, length: 140, recordedAt: 200),
                "a pack's time is its latest location's")
            #expect(located[b] == ChunkLocation(id: b, pack: "p1", offset: 140, length: 240, recordedAt: 200))
            #expect(located[c] == ChunkLocation(id: c, pack: "p2", offset: 0, length: 340, recordedAt: 300))
            #expect(try await store.locations(pack: "p1").map(\.id) == [a, b], "by offset")
            #expect(try await store.packUsage() == ["p1": 380, "p2": 340])
            #expect(try await store.missingChunks(account: account, ids: [a, b, c, absent]) == [absent])
            #expect(try await store.heldChunks([a, c, absent]) == [a, c])
            let records = try await IndexKeyTests.allRecords(store, page: 2)
            #expect(
                Set(records) == [
                    ChunkRecordRow(account: account, id: a, length: 100, refs: 1),
                    ChunkRecordRow(account: account, id: b, length: 200, refs: 0),
                    ChunkRecordRow(account: account, id: c, length: 300, refs: 2)
                ])
            #expect(records.count == 3, "each record listed once")
            let usage = try #require(try await store.accounts().first { $0.id == account })
            #expect(usage.used == 600 && usage.held == 600)

            // The index's rules on the migrated rows: a chunk moved by a compaction, a pack emptied,
            // a pack whose chunks were all located already (named by nothing, so not kept).
            #expect(
                try await store.moveLocations(
                    [ChunkLocation(id: a, pack: "p3", offset: 0, length: 140)], from: "p1", sealedWith: nil) == 1)
            let moved = try #require(try await store.locations([a]).first)
            #expect(moved.pack == "p3" && moved.recordedAt > 200)
            #expect(try await store.removeLocations([c]) == ["p2"])
            #expect(try await store.removeLocations([b]) == ["p1"], "p1's last chunk")
            try await store.recordLocations(
                [
                    ChunkLocation(id: a, pack: "p4", offset: 0, length: 140),
                    ChunkLocation(id: absent, pack: "p5", offset: 0, length: 50)
                ], sealedWith: nil)
            #expect(try await store.packUsage() == ["p3": 140, "p5": 50])
            let packs = try await (store as! any SQLMetadataStore).read { tx in
                try tx.sql.rows("SELECT name FROM packs ORDER BY name", []).map { try $0.text(0) }
            }
            #expect(packs == ["p3", "p5"], "a pack no location names has no row")
        }
    }

    /// Two transactions that each remove part of one pack, at once: one of them reports the
    /// pack emptied (its file is then deleted) and its row goes with its last location.
    @Test(arguments: MetadataStoreTests.backends)
    func aPackRowGoesWithItsLastLocationUnderConcurrentRemovals(_ kind: String) async throws {
        try await IndexKeyTests.withPlace(kind, "cr") { place in
            let store = try await IndexKeyTests.open(kind, place)
            defer { (store as? PostgresMetadataStore)?.shutdown() }
            let packs = (0..<20).map { "pack\($0)" }
            let halves = packs.map { pack in (0..<2).map { ChunkID.of(Array("\(pack) \($0)".utf8)) } }
            for (pack, ids) in zip(packs, halves) {
                try await store.recordLocations(
                    ids.enumerated().map { ChunkLocation(id: $1, pack: pack, offset: Int64($0 * 100), length: 100) },
                    sealedWith: nil)
            }
            let emptied = try await withThrowingTaskGroup(of: Set<String>.self) { group in
                for half in 0..<2 { group.addTask { try await store.removeLocations(halves.map { $0[half] }) } }
                return try await group.reduce(into: [String: Int]()) { counts, names in
                    for name in names { counts[name, default: 0] += 1 }
                }
            }
            #expect(
                emptied == Dictionary(uniqueKeysWithValues: packs.map { ($0, 1) }), "each pack reported emptied once")
            let rows = try await (store as! any SQLMetadataStore).read { tx in
                try tx.sql.rows("SELECT name FROM packs", []).count
            }
            #expect(rows == 0)
        }
    }
}
