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
    static func withStore<T>(_ body: (S3ChunkStore) async throws -> T) async throws -> T {
        let bucket = "xfer-test-\(UUID().uuidString.prefix(8).lowercased())"
        let client = S3Client(location: try S3Location(url: "s3://\(bucket)/chunks", endpoint: endpoint ?? ""))
        try await client.createBucketIfNeeded()
        return try await body(S3ChunkStore(client: client))
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
}
