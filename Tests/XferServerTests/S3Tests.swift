import Foundation
import Testing
import XferCore
@testable import XferServer

/// SigV4 against AWS's published example, and the S3 chunk store against a real
/// S3-compatible endpoint (Ceph RGW from tools/ceph-up.sh) when XFER_S3_ENDPOINT is set.
@Suite struct S3Tests {
    @Test func sigV4MatchesAWSsGetObjectExample() {
        // docs.aws.amazon.com, "Signature Calculations for the Authorization Header", GET Object.
        let signer = SigV4Signer(accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", region: "us-east-1")
        let headers = signer.sign(method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
                                  headers: [("Range", "bytes=0-9")], payloadHash: SigV4Signer.payloadHash([]),
                                  date: Date(timeIntervalSince1970: 1_369_353_600))  // 2013-05-24T00:00:00Z
        let authorization = headers.first { $0.0 == "Authorization" }?.1
        #expect(authorization == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
        #expect(SigV4Signer.encode("a b/c~d", slash: false) == "a%20b/c~d")
        #expect(SigV4Signer.encode("a/b=c", slash: true) == "a%2Fb%3Dc")
    }

    @Test func locationsAreParsedAndBadOnesExplained() throws {
        let environment = ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]
        let location = try S3Location(url: "s3://bucket/some/prefix/", endpoint: "http://127.0.0.1:7480/", environment: environment)
        #expect(location.bucket == "bucket" && location.prefix == "some/prefix/" && location.endpoint == "http://127.0.0.1:7480")
        #expect(try S3Location(url: "s3://b", endpoint: "http://x", environment: environment).prefix == "")
        #expect(throws: XferError.self) { try S3Location(url: "b/p", endpoint: "http://x", environment: environment) }
        #expect(throws: XferError.self) { try S3Location(url: "s3://b", endpoint: "http://x", environment: [:]) }
        #expect(throws: XferError.self) { try S3Location(url: "s3://b", endpoint: "ftp://x", environment: environment) }
    }

    static let endpoint = ProcessInfo.processInfo.environment["XFER_S3_ENDPOINT"]

    /// A store over a fresh bucket on the test endpoint.
    /// A store over a fresh bucket on the test endpoint, its index in a fresh SQLite store.
    static func withStore<T>(_ body: (S3ChunkStore) async throws -> T) async throws -> T {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let client = S3Client(location: try S3Location(url: "s3://xfer-test-\(unique)/chunks", endpoint: endpoint ?? ""))
        try await client.createBucketIfNeeded()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-s3-\(unique)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let index = try SQLiteMetadataStore(path: directory + "/metadata.sqlite", policy: StorePolicy())
        return try await body(S3ChunkStore(client: client, index: index))
    }

    static func packs(_ store: S3ChunkStore) async throws -> [S3Object] {
        try await store.client.list(prefix: store.packPrefix)
    }

    static func chunk(_ seed: UInt64, size: Int = 40_000) throws -> EncodedChunk {
        var generator = SplitMix64(seed: seed)
        let bytes = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next() % 7) }
        return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes), policy: .default) }
    }

    @Test(.enabled(if: endpoint != nil)) func chunksRoundTripThroughS3() async throws {
        try await Self.withStore { store in
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
            let future = Int64(Date().timeIntervalSince1970 + 5) * 1_000_000_000
            let kept = Set(chunks.prefix(10).map(\.id))
            let ended = Locked<[ChunkID]>([])
            let swept = try await store.sweep(chunks.prefix(20).map(\.id), modifiedBefore: future,
                                              begin: { ids in ids.filter { !kept.contains($0) } },
                                              end: { ids in ended.withLock { $0 += ids } })
            #expect(Set(ended.value) == Set(chunks[10..<20].map(\.id)))
            #expect(swept.count == 10)
            await #expect(throws: XferError.self) { _ = try await store.load(chunks[15].id) }
            #expect(try await store.load(chunks[5].id) == chunks[5])
            let none = try await store.sweep(chunks.suffix(10).map(\.id), modifiedBefore: 0, begin: { $0 }, end: { _ in })
            #expect(none.count == 0, "young objects stay")
        }
    }

    /// One upload batch is one pack; a download batch reads neighbours in one ranged GET; a
    /// repeat within a batch is packed once; a chunk stored again is packed again (the same
    /// work whether or not it was there: no timing oracle) but keeps its first location.
    @Test(.enabled(if: endpoint != nil)) func aBatchIsOnePackAndRepeatsKeepTheirLocation() async throws {
        try await Self.withStore { store in
            let chunks = try (0..<30).map { try Self.chunk(UInt64(100 + $0)) }
            #expect(try await store.store(chunks + chunks.prefix(3)).allSatisfy { $0 == nil })
            #expect(try await Self.packs(store).count == 1)
            let first = try await store.index.locations(chunks.map(\.id))
            #expect(try await store.store(Array(chunks[5..<10])).allSatisfy { $0 == nil })
            #expect(try await Self.packs(store).count == 2, "a chunk stored again costs a write, as a new one does")
            #expect(Set(try await store.index.locations(chunks.map(\.id))) == Set(first), "located chunks keep their location")
            let order = chunks.shuffled()
            #expect(try await store.load(order.map(\.id)) == order)
        }
    }

    /// Sweeping leaves a mostly dead pack that compaction rewrites; a pack with nothing live
    /// is deleted by the sweep; one no location names (a crashed upload's) waits an hour.
    @Test(.enabled(if: endpoint != nil)) func compactionRewritesMostlyDeadPacksAndDropsOrphans() async throws {
        try await Self.withStore { store in
            let chunks = try (0..<40).map { try Self.chunk(UInt64(200 + $0)) }
            #expect(try await store.store(chunks).allSatisfy { $0 == nil })
            let future = Int64(Date().timeIntervalSince1970 + 5) * 1_000_000_000
            let swept = try await store.sweep(chunks.prefix(30).map(\.id), modifiedBefore: future, begin: { $0 }, end: { _ in })
            #expect(swept.count == 30)
            let before = try await Self.packs(store)
            #expect(before.count == 1)
            let compacted = try await store.compact(modifiedBefore: future)
            #expect(compacted.packsRewritten == 1 && compacted.packsRemoved == 1)
            let after = try await Self.packs(store)
            #expect(after.count == 1 && after[0].key != before[0].key && after[0].size < before[0].size / 2)
            #expect(try await store.load(chunks.suffix(10).map(\.id)) == Array(chunks.suffix(10)))
            #expect(try await store.compact(modifiedBefore: future).packsRewritten == 0, "a fully live pack stays")

            // The last live chunks swept: their pack goes with them.
            #expect(try await store.sweep(chunks.suffix(10).map(\.id), modifiedBefore: future, begin: { $0 }, end: { _ in }).count == 10)
            #expect(try await Self.packs(store).isEmpty)

            // A pack no location names is kept while young (its upload may be recording it).
            try await store.client.put(store.key(pack: S3ChunkStore.newPackName()), [1, 2, 3])
            #expect(try await store.compact(modifiedBefore: future).packsRemoved == 0)
            var impatient = store
            impatient.orphanAge = -10
            #expect(try await impatient.compact(modifiedBefore: future).packsRemoved == 1)
            #expect(try await Self.packs(store).isEmpty)
        }
    }
}
