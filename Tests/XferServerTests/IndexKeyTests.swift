import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// A store given encryption keys for the first time enciphers the chunk ids it holds (in
/// `account_chunks`, `chunk_locations` and `chunk_deletions`), a page at a time, on every
/// backend this run can reach; every id is found again through the index key, and a process
/// without keys on it stops.
@Suite struct IndexKeyTests {
    /// Opens the store of `kind` at `place` (a directory for SQLite, a schema for PostgreSQL),
    /// migrated up to `last` if named.
    static func open(_ kind: String, _ place: String, sealing: SealingKeys? = nil, migratingUpTo last: String? = nil)
        async throws -> any MetadataStore
    {
        if kind == "postgres", let url = MetadataStoreTests.postgres {
            return try await PostgresMetadataStore(url: url, schema: place, sealing: sealing, migratingUpTo: last)
        }
        return try SQLiteMetadataStore(path: place + "/metadata.sqlite", sealing: sealing, migratingUpTo: last)
    }

    /// Runs `body` with a new place for a store of `kind` (a schema name for PostgreSQL, a
    /// directory for SQLite, removed afterwards), named after `prefix`.
    static func withPlace<T>(_ kind: String, _ prefix: String, _ body: (String) async throws -> T) async throws -> T {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let place =
            kind == "postgres"
            ? "\(prefix)_\(unique)"
            : FileManager.default.temporaryDirectory.appendingPathComponent("xfer-\(prefix)-\(unique)").path
        if kind != "postgres" {
            try FileManager.default.createDirectory(atPath: place, withIntermediateDirectories: true)
        }
        defer { if kind != "postgres" { try? FileManager.default.removeItem(atPath: place) } }
        return try await body(place)
    }

    /// Every chunk record, paged through `page` at a time.
    static func allRecords(_ store: any MetadataStore, page size: Int) async throws -> [ChunkRecordRow] {
        var records: [ChunkRecordRow] = []
        var cursor: ChunkRecordKey? = nil
        while true {
            let page = try await store.chunkRecords(after: cursor, limit: size)
            guard let last = page.last else { return records }
            records += page
            cursor = ChunkRecordKey(account: last.account, id: last.id)
        }
    }

    @Test(arguments: MetadataStoreTests.backends)
    func everyIDIsEncipheredAndFoundAgainAcrossPages(_ kind: String) async throws {
        try await IndexKeyTests.withPlace(kind, "ix") { place in
            let plain = try await Self.open(kind, place)
            // More ids than one page of the encipherment (333), over two accounts, some shared.
            var accounts: [Int64] = []
            for name in ["alice", "bob"] {
                _ = try await plain.createAccount(
                    name: try AccountName(name), quota: 1 << 40, tokenHash: TokenHash.hash("t-\(name)-\(place)"))
                accounts.append(try await MetadataStoreTests.accountID(plain, name))
            }
            let chunks = (0..<900).map { OwnedChunk(id: ChunkID.of(Array("chunk \($0)".utf8)), length: 100 + $0) }
            _ = try await plain.addChunks(account: accounts[0], Array(chunks.prefix(600)), uploadStartedAt: nil)
            _ = try await plain.addChunks(account: accounts[1], Array(chunks.suffix(500)), uploadStartedAt: nil)
            try await plain.recordLocations(
                chunks.enumerated().map {
                    ChunkLocation(id: $1.id, pack: "p\($0 / 100)", offset: Int64($0 * 10), length: $1.length)
                },
                sealedWith: nil)
            let orphan = ChunkID.of(Array("orphan".utf8))
            #expect(try await plain.beginDeletion([orphan]) == [orphan])
            if let postgres = plain as? PostgresMetadataStore { postgres.shutdown() }

            let key = SealingKey.generate()
            let sealed = try await Self.open(kind, place, sealing: try SealingKeys([key]))
            defer { (sealed as? PostgresMetadataStore)?.shutdown() }
            let ids = chunks.map(\.id)
            #expect(try await sealed.heldChunks(ids) == Set(ids))
            let located = try await sealed.locations(ids)
            #expect(located.count == 900 && Set(located.map(\.id)) == Set(ids))
            #expect(Set(located.map(\.pack)) == Set((0..<9).map { "p\($0)" }))
            var listed: [ChunkID] = []
            for shard in UInt8.min...UInt8.max { listed += try await sealed.locations(shard: shard).map(\.id) }
            #expect(listed.count == 900 && Set(listed) == Set(ids), "each location listed once")
            let records = try await Self.allRecords(sealed, page: 97)
            #expect(records.count == 1100, "600 + 500 account rows, each once")
            #expect(Set(records.filter { $0.account == accounts[1] }.map(\.id)) == Set(chunks.suffix(500).map(\.id)))
            // The deletion mark was enciphered too: stored as other bytes, read back as the id.
            let marks = try await (sealed as! any SQLMetadataStore).read { tx in
                try tx.sql.rows("SELECT id FROM chunk_deletions", []).map { (try $0.blob(0), try $0.chunkID(0)) }
            }
            #expect(marks.count == 1 && marks[0].0 != orphan.bytes && marks[0].1 == orphan)
            let stored = try await (sealed as! any SQLMetadataStore).read { tx in
                try tx.sql.rows("SELECT id FROM account_chunks", []).map { try $0.blob(0) }
            }
            #expect(stored.count == 1100 && Set(stored).isDisjoint(with: Set(ids.map(\.bytes))), "no plain id left")
            // Batches and row locks go in the order the database sorts what it keeps (the
            // enciphered bytes), not the ids' own order: every transaction locks in one order.
            let first = accounts[0]
            let (ordered, databaseOrder) = try await (sealed as! any SQLMetadataStore).read { tx in
                (
                    tx.inStoredOrder(ids.reversed() + ids.prefix(5)),
                    try tx.sql.rows("SELECT id FROM account_chunks WHERE account_id = ? ORDER BY id", [.int(first)])
                        .compactMap { try $0.chunkID(0) }
                )
            }
            #expect(databaseOrder.count == 600)
            #expect(ordered.count == 900 && ordered.filter(Set(databaseOrder).contains) == databaseOrder)
            #expect(ordered != ids.sorted())

            // A keyless process on the store stops rather than miss its ids.
            let keyless = try await Self.open(kind, place)
            defer { (keyless as? PostgresMetadataStore)?.shutdown() }
            await #expect(throws: XferError.self) { _ = try await keyless.heldChunks(ids) }
            // A key the store never had makes no new index key over the recorded one.
            await #expect(throws: XferError.self) {
                _ = try await Self.open(kind, place, sealing: try SealingKeys([SealingKey.generate()]))
            }
            let reopened = try await Self.open(kind, place, sealing: try SealingKeys([key]))
            defer { (reopened as? PostgresMetadataStore)?.shutdown() }
            #expect(try await reopened.heldChunks(ids) == Set(ids))
        }
    }
}
