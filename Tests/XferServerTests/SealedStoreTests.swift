import Foundation
import Testing
import XferCore

@testable import XferServer

/// Chunks and manifests sealed at rest (`xfer serve --encryption-key`): what the packs hold,
/// what a damaged pack gives, data from before the keys, and the keys a data directory
/// refuses to open with.
@Suite struct SealedStoreTests {
    /// Incompressible chunks (stored as they are), so a plain pack would show their bytes.
    static func rawChunks(_ count: Int, seed: UInt64) throws -> [EncodedChunk] {
        var generator = SplitMix64(seed: seed)
        return try (0..<count).map { _ in
            let bytes = (0..<20_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes), policy: .default) }
        }
    }

    /// Every pack's bytes, concatenated.
    static func packBytes(_ store: PackedChunkStore) async throws -> Data {
        var all = Data()
        for object in try await store.storage.list() {
            all.append(contentsOf: try #require(try await store.storage.get(object.name, limit: Int(object.size))))
        }
        return all
    }

    /// Which of the chunks' ids or leading 64 plain bytes appear in `bytes`.
    static func revealed(_ chunks: [EncodedChunk], in bytes: Data) -> Int {
        chunks.filter { chunk in
            bytes.range(of: Data(chunk.id.bytes)) != nil || bytes.range(of: Data(chunk.payload.prefix(64))) != nil
        }.count
    }

    @Test(arguments: PackedChunkStoreTests.storages)
    func sealedPacksShowNoPlainBytesOrIDsAndReadBack(_ kind: String) async throws {
        let chunks = try Self.rawChunks(12, seed: 1)
        #expect(chunks.allSatisfy { $0.encoding == .raw })
        // The check can fail: a plain store shows every id and every chunk's bytes.
        try await PackedChunkStoreTests.withStore(kind) { plain in
            _ = try await plain.store(chunks)
            #expect(Self.revealed(chunks, in: try await Self.packBytes(plain)) == chunks.count)
        }
        try await PackedChunkStoreTests.withStore(kind) { store in
            var store = store
            store.sealing = try SealingKeys([SealingKey.generate()])
            #expect(try await store.store(chunks).allSatisfy { $0 == nil })
            #expect(Self.revealed(chunks, in: try await Self.packBytes(store)) == 0)
            #expect(try await store.load(chunks.map(\.id)) == chunks)
            #expect(try await store.verify(chunks[3].id) == 20_000)

            // A flipped byte in a pack: the chunk it hits is refused, and says where it is.
            let object = try #require(try await store.storage.list().first)
            var bytes = try #require(try await store.storage.get(object.name, limit: Int(object.size)))
            bytes[bytes.count / 2] ^= 0x01
            try await store.storage.put(object.name, bytes)
            let located = try await store.index.locations(chunks.map(\.id))
            let hit = try #require(
                located.first {
                    $0.pack == object.name && $0.offset <= Int64(bytes.count / 2)
                        && Int64(bytes.count / 2) < $0.offset + Int64($0.length)
                })
            let error = await #expect(throws: XferError.self) { _ = try await store.load(hit.id) }
            #expect(error?.code == .corruptChunk)
            #expect(error?.message.contains(object.name) == true)
        }
    }

    @Test func chunksStoredBeforeTheKeysStayReadableAndSealedOnesNeedTheirKey() async throws {
        let before = try Self.rawChunks(3, seed: 2)
        let after = try Self.rawChunks(3, seed: 3)
        try await PackedChunkStoreTests.withStore("files") { plain in
            _ = try await plain.store(before)
            var sealed = plain
            let old = SealingKey.generate()
            sealed.sealing = try SealingKeys([old])
            _ = try await sealed.store(after)
            #expect(try await sealed.load((before + after).map(\.id)) == before + after)
            // Without keys the sealed chunks are refused by name of the key; the plain ones read.
            #expect(try await plain.load(before.map(\.id)) == before)
            let refused = await #expect(throws: XferError.self) { _ = try await plain.load(after[0].id) }
            #expect(refused?.code == .internal)
            #expect(refused?.message.contains(old.id.description) == true)
            // Rotated: the new key seals from now on, the old one still opens.
            var rotated = plain
            let new = SealingKey.generate()
            rotated.sealing = try SealingKeys([new, old])
            let later = try Self.rawChunks(2, seed: 4)
            _ = try await rotated.store(later)
            #expect(try await rotated.load((before + after + later).map(\.id)) == before + after + later)
            await #expect(throws: XferError.self) { _ = try await sealed.load(later[0].id) }
            // A compaction rewrites a sparse pack under the current key.
            _ = try await rotated.index.removeLocations([after[0].id, after[1].id])
            let report = try await rotated.compact(modifiedBefore: PackedChunkStoreTests.future())
            #expect(report.packsRewritten >= 1)
            var current = plain
            current.sealing = try SealingKeys([new])
            #expect(try await current.load(after[2].id) == after[2])
        }
    }

    /// Stores one sealed chunk through the data directory's store (which records its key).
    static func storeOne(_ data: ServerData, seed: UInt64) async throws -> EncodedChunk {
        let chunk = try rawChunks(1, seed: seed)[0]
        #expect(try await data.chunks.store([chunk]).allSatisfy { $0 == nil })
        return chunk
    }

    @Test func aDataDirectoryOpensOnlyWithEveryKeyItsDataNeeds() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-sealed-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = SealingKey.generate()
        let b = SealingKey.generate()
        // A command beside the server (--data) given keys for a store that has none seals
        // nothing and records nothing: the server may not have them.
        let plain = try await ServerData.open(directory, sealing: try SealingKeys([a]), use: .maintain)
        _ = try await Self.storeOne(plain, seed: 6)
        #expect(try await plain.metadata.sealingKeys() == [])
        _ = try await ServerData.open(directory)
        // The server given keys for the first time records the key its index key is sealed with.
        let first = try await ServerData.open(directory, sealing: try SealingKeys([a]))
        #expect(try await first.metadata.sealingKeys() == [a.id])
        let chunk = try await Self.storeOne(first, seed: 7)

        let none = await #expect(throws: XferError.self) { _ = try await ServerData.open(directory) }
        #expect(none?.code == .invalidConfiguration)
        #expect(none?.message.contains(a.id.description) == true)
        let other = await #expect(throws: XferError.self) {
            _ = try await ServerData.open(directory, sealing: try SealingKeys([b]))
        }
        #expect(other?.message.contains(a.id.description) == true)
        #expect(try await first.metadata.sealingKeys() == [a.id], "a refused open records nothing")

        // A command beside the server (--data) given a key the store does not use yet seals
        // nothing with it: it rewrites with a key the store uses.
        let beside = try await ServerData.open(directory, sealing: try SealingKeys([b, a]), use: .maintain)
        #expect(try await beside.chunks.load(chunk.id) == chunk)
        _ = try await Self.storeOne(beside, seed: 8)
        #expect(try await first.metadata.sealingKeys() == [a.id], "b is not brought in by a --data command")

        let rotated = try await ServerData.open(directory, sealing: try SealingKeys([b, a]))
        _ = try await Self.storeOne(rotated, seed: 9)
        #expect(try await rotated.metadata.sealingKeys() == [a.id, b.id], "in the order first used")
        // Now data is sealed with b: a alone is refused too; --data commands given both seal with b.
        let old = await #expect(throws: XferError.self) {
            _ = try await ServerData.open(directory, sealing: try SealingKeys([a]))
        }
        #expect(old?.message.contains(b.id.description) == true)
        let later = try await ServerData.open(directory, sealing: try SealingKeys([a, b]), use: .maintain)
        #expect(try await Self.storeOne(later, seed: 10).id != chunk.id)
        #expect(try await later.metadata.sealingKeys() == [a.id, b.id])
    }

    /// A store without keys in `directory` whose account holds `count` stored chunks.
    static func plainStoreHolding(_ count: Int, seed: UInt64, in directory: String) async throws -> (
        ServerData, [EncodedChunk]
    ) {
        let plain = try await ServerData.open(directory)
        let token = try #require(try await plain.createAccount(name: "owner", quota: nil).token)
        let account = try #require(try await plain.metadata.principal(tokenHash: TokenHash.hash(token))).accountID
        let chunks = try rawChunks(count, seed: seed)
        _ = try await plain.chunks.store(chunks)
        _ = try await plain.metadata.addChunks(
            account: account, chunks.map { OwnedChunk(id: $0.id, length: $0.length) }, uploadStartedAt: nil)
        return (plain, chunks)
    }

    @Test func aStoreGivenKeysLaterEnciphersItsIDsAndKeepsEverything() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-index-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (_, chunks) = try await Self.plainStoreHolding(5, seed: 30, in: directory)
        let ids = Set(chunks.map(\.id))

        let key = SealingKey.generate()
        let sealed = try await ServerData.open(directory, sealing: try SealingKeys([key]))
        #expect(try await sealed.metadata.sealingKeys() == [key.id])
        // Every id is found again through the index key: held, located, loaded, listed.
        #expect(try await sealed.metadata.heldChunks(Array(ids)) == ids)
        #expect(try await sealed.chunks.load(chunks.map(\.id)) == chunks)
        var listed: Set<ChunkID> = []
        for shard in UInt8.min...UInt8.max { listed.formUnion(try await sealed.chunks.list(shard: shard).map(\.id)) }
        #expect(listed == ids)
        var records: [ChunkID] = []
        var cursor: ChunkRecordKey? = nil
        while true {
            let page = try await sealed.metadata.chunkRecords(after: cursor, limit: 2)
            guard let last = page.last else { break }
            records += page.map(\.id)
            cursor = ChunkRecordKey(account: last.account, id: last.id)
        }
        #expect(records.count == 5 && Set(records) == ids, "paging by enciphered ids visits each once")
        // gc finds every chunk held (they are leases here, so a dry run, which expires none).
        let report = try await Maintenance(data: sealed).collectGarbage(grace: 0, dryRun: true)
        #expect(report.chunksScanned == 5 && report.chunksRemoved == 0)
        // A second open finds the same index key.
        let again = try await ServerData.open(directory, sealing: try SealingKeys([key]))
        #expect(try await again.chunks.load(chunks.map(\.id)) == chunks)
        let verified = try await Maintenance(data: again).verify()
        #expect(verified.chunksChecked == 5)
        // Without the key the store does not open; a wrong key alone neither.
        await #expect(throws: XferError.self) { _ = try await ServerData.open(directory) }
        await #expect(throws: XferError.self) {
            _ = try await ServerData.open(directory, sealing: try SealingKeys([SealingKey.generate()]))
        }
    }

    @Test func aProcessWithoutKeysOnAStoreWhoseIDsWereEncipheredStopsInsteadOfMissingThem() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-index-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (plain, chunks) = try await Self.plainStoreHolding(3, seed: 40, in: directory)
        #expect(try await plain.metadata.heldChunks(chunks.map(\.id)).count == 3)

        // Another server of the fleet starts with keys: the ids are enciphered under it.
        let a = SealingKey.generate()
        _ = try await ServerData.open(directory, sealing: try SealingKeys([a]))
        // The keyless one still running neither finds nothing nor writes plain ids beside them.
        let lookup = await #expect(throws: XferError.self) { _ = try await plain.metadata.heldChunks(chunks.map(\.id)) }
        #expect(lookup?.code == .internal && lookup?.message.contains("--encryption-key") == true)
        let more = try Self.rawChunks(1, seed: 41)
        await #expect(throws: XferError.self) { _ = try await plain.chunks.store(more) }

        // A new current key wraps the index key too, so it opens with the new key's data.
        let b = SealingKey.generate()
        let rotated = try await ServerData.open(directory, sealing: try SealingKeys([b, a]))
        #expect(try await rotated.metadata.heldChunks(chunks.map(\.id)).count == 3)
        let wrapped = try await (rotated.metadata as! SQLiteMetadataStore).read { tx in
            try tx.sql.rows("SELECT key_id FROM sealing_index ORDER BY key_id", []).map { try $0.text(0) }
        }
        #expect(Set(wrapped) == [a.id.description, b.id.description])
        #expect(
            try await ServerData.open(directory, sealing: try SealingKeys([b, a])).chunks.load(chunks.map(\.id))
                == chunks)
    }

    @Test func aDamagedEntryLeavesItsPackOutOfACompactionAndTheOthersGoOn() async throws {
        try await PackedChunkStoreTests.withStore("files") { store in
            var store = store
            store.sealing = try SealingKeys([SealingKey.generate()])
            let first = try Self.rawChunks(3, seed: 20)
            let second = try Self.rawChunks(3, seed: 21)
            _ = try await store.store(first)
            _ = try await store.store(second)
            let packs = Dictionary(grouping: try await store.index.locations((first + second).map(\.id)), by: \.pack)
            #expect(packs.count == 2)
            // Both packs mostly dead; one entry left in the first is damaged.
            _ = try await store.index.removeLocations([first[0].id, first[1].id, second[0].id, second[1].id])
            let damaged = try #require(try await store.index.locations([first[2].id]).first)
            var bytes = try #require(try await store.storage.get(damaged.pack, limit: 1 << 20))
            bytes[Int(damaged.offset) + damaged.length - 20] ^= 0x01
            try await store.storage.put(damaged.pack, bytes)
            let report = try await store.compact(modifiedBefore: PackedChunkStoreTests.future())
            #expect(report.packsDamaged == [damaged.pack])
            #expect(report.packsRewritten == 1)
            #expect(try await store.load(second[2].id) == second[2])
        }
    }
}
