import Foundation
import Testing
import XferCore

@testable import XferServer

/// The packed chunk store over each pack storage: files in a directory always, and a real
/// S3-compatible endpoint (Ceph RGW from tools/ops/ceph-up.sh) when XFER_S3_ENDPOINT is set. One
/// suite for both, so the two cannot drift apart. Also the move of an older data directory's
/// chunk files into packs.
@Suite struct PackedChunkStoreTests {
    static let endpoint = ProcessInfo.processInfo.environment["XFER_S3_ENDPOINT"]
    /// The storages this run can reach.
    static let storages = ["files"] + (endpoint == nil ? [] : ["s3"])

    /// A store over fresh storage of that kind, its index in a fresh SQLite store.
    static func withStore<T>(_ kind: String, _ body: (PackedChunkStore) async throws -> T) async throws -> T {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-packs-\(unique)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let index = try SQLiteMetadataStore(path: directory + "/metadata.sqlite", policy: StorePolicy())
        let storage: any PackStorage
        if kind == "s3" {
            let client = S3Client(
                location: try S3Location(url: "s3://xfer-test-\(unique)/chunks", endpoint: endpoint ?? ""))
            try await client.createBucketIfNeeded()
            storage = S3PackStorage(client: client)
        } else {
            storage = try FilePackStorage(root: directory + "/packs")
        }
        return try await body(PackedChunkStore(storage: storage, index: index))
    }

    /// A moment safely after everything stored so far (computed when asked: a loaded machine
    /// may take seconds between steps).
    static func future() -> Int64 { Int64(Date().timeIntervalSince1970 + 5) * 1_000_000_000 }

    static func chunk(_ seed: UInt64, size: Int = 40_000) throws -> EncodedChunk {
        var generator = SplitMix64(seed: seed)
        let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next() % 7) }
        return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes), policy: .default) }
    }

    @Test(arguments: storages) func chunksRoundTrip(_ kind: String) async throws {
        try await Self.withStore(kind) { store in
            let chunks = try (0..<40).map { try Self.chunk(UInt64($0)) }
            var bad = try Self.chunk(99)
            bad.payload[bad.payload.count / 2] ^= 0xff
            let results = try await store.store(chunks + [bad])
            #expect(results.prefix(40).allSatisfy { $0 == nil })
            #expect(results.last??.code == .corruptChunk || results.last??.code == .compression)
            for chunk in chunks.prefix(5) {
                #expect(try await store.load(chunk.id) == chunk)
                #expect(try await store.verify(chunk.id) == 40_000)
            }
            await #expect(throws: XferError.self) { _ = try await store.load(bad.id) }
            var listed: Set<ChunkID> = []
            for shard in UInt8.min...UInt8.max { listed.formUnion(try await store.list(shard: shard).map(\.id)) }
            #expect(listed == Set(chunks.map(\.id)))
            // The sweep deletes only what is old and unheld at its last look.
            let kept = Set(chunks.prefix(10).map(\.id))
            let ended = Locked<[ChunkID]>([])
            let swept = try await store.sweep(
                chunks.prefix(20).map(\.id), modifiedBefore: Self.future(),
                begin: { ids in ids.filter { !kept.contains($0) } },
                end: { ids in ended.withLock { $0 += ids } })
            #expect(Set(ended.value) == Set(chunks[10..<20].map(\.id)))
            #expect(swept.count == 10)
            await #expect(throws: XferError.self) { _ = try await store.load(chunks[15].id) }
            #expect(try await store.load(chunks[5].id) == chunks[5])
            let none = try await store.sweep(
                chunks.suffix(10).map(\.id), modifiedBefore: 0, begin: { $0 }, end: { _ in })
            #expect(none.count == 0, "young chunks stay")
        }
    }

    /// One upload batch is one pack; a download batch reads neighbours in one request; a
    /// repeat within a batch is packed once; a chunk stored again is packed again (the same
    /// work whether or not it was there: no timing oracle) but keeps its first location.
    @Test(arguments: storages) func aBatchIsOnePackAndRepeatsKeepTheirLocation(_ kind: String) async throws {
        try await Self.withStore(kind) { store in
            let chunks = try (0..<30).map { try Self.chunk(UInt64(100 + $0)) }
            #expect(try await store.store(chunks + chunks.prefix(3)).allSatisfy { $0 == nil })
            #expect(try await store.storage.list().count == 1)
            let first = try await store.index.locations(chunks.map(\.id))
            #expect(try await store.store(Array(chunks[5..<10])).allSatisfy { $0 == nil })
            #expect(try await store.storage.list().count == 2, "a chunk stored again costs a write, as a new one does")
            #expect(
                Set(try await store.index.locations(chunks.map(\.id))) == Set(first),
                "located chunks keep their location")
            let order = chunks.shuffled()
            #expect(try await store.load(order.map(\.id)) == order)
        }
    }

    /// Sweeping leaves a mostly dead pack that compaction rewrites; a pack with nothing live
    /// is deleted by the sweep; one no location names (a crashed upload's) waits an hour.
    @Test(arguments: storages) func compactionRewritesMostlyDeadPacksAndDropsOrphans(_ kind: String) async throws {
        try await Self.withStore(kind) { store in
            let chunks = try (0..<40).map { try Self.chunk(UInt64(200 + $0)) }
            #expect(try await store.store(chunks).allSatisfy { $0 == nil })
            let swept = try await store.sweep(
                chunks.prefix(30).map(\.id), modifiedBefore: Self.future(), begin: { $0 }, end: { _ in })
            #expect(swept.count == 30)
            let before = try await store.storage.list()
            #expect(before.count == 1)
            let compacted = try await store.compact(modifiedBefore: Self.future())
            #expect(compacted.packsRewritten == 1 && compacted.packsRemoved == 1)
            let after = try await store.storage.list()
            #expect(after.count == 1 && after[0].name != before[0].name && after[0].size < before[0].size / 2)
            #expect(try await store.load(chunks.suffix(10).map(\.id)) == Array(chunks.suffix(10)))
            #expect(
                try await store.compact(modifiedBefore: Self.future()).packsRewritten == 0, "a fully live pack stays")

            // The last live chunks swept: their pack goes with them.
            #expect(
                try await store.sweep(
                    chunks.suffix(10).map(\.id), modifiedBefore: Self.future(), begin: { $0 }, end: { _ in }
                ).count == 10)
            #expect(try await store.storage.list().isEmpty)

            // A pack no location names is kept while young (its upload may be recording it).
            try await store.storage.put(PackedChunkStore.newPackName(), [1, 2, 3])
            #expect(try await store.compact(modifiedBefore: Self.future()).packsRemoved == 0)
            var impatient = store
            impatient.orphanAge = -10
            #expect(try await impatient.compact(modifiedBefore: Self.future()).packsRemoved == 1)
            #expect(try await store.storage.list().isEmpty)
        }
    }

    /// A pack on disk is never seen half-written: a failed write, fdatasync or rename leaves no
    /// pack and no temporary file, and what was stored before still loads.
    @Test func aFailedPackWriteLeavesNothing() async throws {
        try await Self.withStore("files") { store in
            let storage = store.storage as! FilePackStorage
            let kept = try Self.chunk(300)
            #expect(try await store.store([kept]).allSatisfy { $0 == nil })
            for operation in [StorageFaults.Operation.write, .fsync, .rename] {
                StorageFaults.arm(.init(operation, .fail(EIO), pathContains: storage.root + "/"))
                await #expect(throws: XferError.self) { _ = try await store.store([try Self.chunk(301)]) }
                StorageFaults.disarm(pathContains: storage.root + "/")
                #expect(try await storage.list().count == 1, "\(operation)")
            }
            var hidden = 0
            for fan in 0...255 {
                hidden += try FileSystem.list("\(storage.root)/\(ChunkID.hexDigits(UInt8(fan)))").filter {
                    $0.hasPrefix(".")
                }.count
            }
            #expect(hidden == 0)
            #expect(try await store.load(kept.id) == kept)
        }
    }

    /// An older data directory's chunk files move into packs when it is opened: the damaged one
    /// stays and is reported, a file a crashed sweep set aside comes back first, and a failure
    /// midway (here a pack write) leaves every file in place for the next open.
    @Test func chunkFilesOfAnOlderDataDirectoryMoveIntoPacks() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-migrate-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await ServerData.open(directory)
        #expect(first.migratedChunkFiles == 0)
        let legacy = try LocalChunkStore(root: directory + "/chunks")
        let chunks = try (0..<25).map { try Self.chunk(UInt64(400 + $0), size: 30_000 + $0) }
        for chunk in chunks { try legacy.put(chunk) }
        // One set aside by a sweep that never finished, one damaged.
        try FileManager.default.moveItem(
            atPath: legacy.path(for: chunks[0].id),
            toPath: legacy.path(for: chunks[0].id).replacingOccurrences(
                of: chunks[0].id.hex, with: ".gc-" + chunks[0].id.hex))
        var bytes = try #require(FileManager.default.contents(atPath: legacy.path(for: chunks[1].id)))
        bytes[bytes.count - 1] ^= 0x10
        try bytes.write(to: URL(fileURLWithPath: legacy.path(for: chunks[1].id)))

        StorageFaults.arm(.init(.fsync, .fail(EIO), pathContains: directory + "/packs/"))
        await #expect(throws: XferError.self) { _ = try await ServerData.open(directory) }
        StorageFaults.disarm(pathContains: directory + "/packs/")
        #expect(try legacy.allIDs().count == 25, "nothing removed before it is packed")

        let data = try await ServerData.open(directory)
        #expect(data.migratedChunkFiles == 24)
        #expect(data.damagedChunkFiles == [legacy.path(for: chunks[1].id)])
        let good = chunks.filter { $0.id != chunks[1].id }
        #expect(try await data.chunks.load(good.map(\.id)) == good)
        #expect(try legacy.allIDs() == [chunks[1].id], "only the damaged file is left")
        let again = try await ServerData.open(directory)
        #expect(again.migratedChunkFiles == 0 && again.damagedChunkFiles.count == 1)
    }
}
