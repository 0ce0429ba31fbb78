import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol
import XferServer

/// Chunks sent against a reference (``ChunkEncoding/zstdAgainst``) on the upload and download routes.
@Suite struct ChunksAgainstRouteTests {
    static let reference = TestBytes.make(count: 30_000, seed: 41)

    /// `reference` with a few bytes changed at `at`.
    static func edited(at: Int, seed: UInt64) -> [UInt8] {
        var bytes = reference
        bytes.replaceSubrange(at..<(at + 8), with: TestBytes.make(count: 12, seed: seed))
        return bytes
    }

    static func whole(_ plain: [UInt8]) throws -> EncodedChunk {
        try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
    }

    static func against(_ plain: [UInt8]) throws -> EncodedChunk {
        try plain.withUnsafeBytes {
            try Zstd.encode($0, id: ChunkID.of(plain), against: (ChunkID.of(reference), reference))
        }
    }

    func upload(
        _ chunks: [EncodedChunk], token: String? = nil, _ client: some TestClientProtocol,
        _ fixture: RouteFixture
    ) async throws -> UploadResult {
        try await client.execute(
            uri: "/v1/chunks", method: .post, headers: fixture.headers(token),
            body: ByteBuffer(bytes: ChunkFrames.encode(chunks))
        ) { (response: TestResponse) async throws in
            #expect(response.status == .ok)
            return try decode(UploadResult.self, response)
        }
    }

    func download(
        _ list: ChunkIDList, token: String? = nil, _ client: some TestClientProtocol,
        _ fixture: RouteFixture
    ) async throws -> [EncodedChunk] {
        try await client.execute(
            uri: "/v1/chunks/download", method: .post, headers: fixture.headers(token),
            body: json(list)
        ) { (response: TestResponse) async throws in
            #expect(response.status == .ok)
            var decoder = ChunkFrameDecoder()
            let chunks = try decoder.feed(response.body.readableBytesView)
            try decoder.finish()
            return chunks
        }
    }

    @Test func anUploadAgainstAHeldChunkIsStoredWholeAndADownloadCanGoAgainstIt() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let edited = Self.edited(at: 1000, seed: 1)
        let sent = try Self.against(edited)
        #expect(sent.encoding == .zstdAgainst && sent.payload.count < 200)
        try await fixture.application.test(.router) { client in
            #expect(try await upload([Self.whole(Self.reference)], client, fixture).stored == 1)
            let result = try await upload([sent], client, fixture)
            #expect(result.stored == 1 && result.storedBytes == Int64(edited.count) && result.unresolved == nil)

            // Asked plainly, it comes as stored: whole.
            let plain = try await download(ChunkIDList(ids: [sent.id]), client, fixture)
            #expect(plain.count == 1 && plain[0].encoding != .zstdAgainst)
            #expect(try plain[0].decoded() == edited)

            // Offered the reference, it comes against it, small, and decodes with it.
            let small = try await download(
                ChunkIDList(ids: [sent.id], against: [sent.id: ChunkID.of(Self.reference)]), client, fixture)
            #expect(small.count == 1 && small[0].encoding == .zstdAgainst && small[0].payload.count < 200)
            #expect(try small[0].decoded(reference: (ChunkID.of(Self.reference), Self.reference)) == edited)
        }
    }

    @Test func aReferenceTheAccountDoesNotHoldIsNeverUsed() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let bob = try await fixture.data.createAccount(name: "bob", quota: nil).token!
        let edited = Self.edited(at: 2000, seed: 2)
        let other = TestBytes.make(count: 20_000, seed: 42)
        try await fixture.application.test(.router) { client in
            // Alice holds the reference; Bob does not, so his chunk against it is not stored.
            #expect(try await upload([Self.whole(Self.reference)], client, fixture).stored == 1)
            let result = try await upload([Self.against(edited), Self.whole(other)], token: bob, client, fixture)
            #expect(result.received == 2 && result.stored == 1)
            #expect(result.unresolved == [ChunkID.of(edited).hex])
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(bob),
                body: json(ChunkIDList(ids: [ChunkID.of(edited), ChunkID.of(other)]))
            ) { (response: TestResponse) async throws in
                #expect(try decode(ChunkIDList.self, response).ids == [ChunkID.of(edited).hex])
            }
            // Nor does a download for Bob go against Alice's chunk.
            let chunks = try await download(
                ChunkIDList(ids: [ChunkID.of(other)], against: [ChunkID.of(other): ChunkID.of(Self.reference)]),
                token: bob, client, fixture)
            #expect(chunks.count == 1 && chunks[0].encoding != .zstdAgainst)
            #expect(try chunks[0].decoded() == other)
        }
    }

    @Test func aDamagedChunkAgainstAReferenceIsNotStored() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let edited = Self.edited(at: 3000, seed: 3)
        var damaged = try Self.against(edited)
        damaged.payload[damaged.payload.count - 3] ^= 0x5A
        var lying = try Self.against(edited)
        lying.id = ChunkID.of(Self.reference)  // claims to be its own reference
        let (damagedChunk, lyingChunk) = (damaged, lying)
        try await fixture.application.test(.router) { client in
            #expect(try await upload([Self.whole(Self.reference)], client, fixture).stored == 1)
            let result = try await upload([damagedChunk], client, fixture)
            #expect(result.stored == 0 && result.unresolved == [ChunkID.of(edited).hex])
            let second = try await upload([lyingChunk], client, fixture)
            #expect(second.stored == 0 && second.unresolved == [ChunkID.of(Self.reference).hex])
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(),
                body: json(ChunkIDList(ids: [ChunkID.of(edited)]))
            ) { (response: TestResponse) async throws in
                #expect(try decode(ChunkIDList.self, response).ids == [ChunkID.of(edited).hex])
            }
            // The reference itself is as it was.
            let stored = try await download(ChunkIDList(ids: [ChunkID.of(Self.reference)]), client, fixture)
            #expect(try stored[0].decoded() == Self.reference)
        }
    }

    @Test func oneRequestRebuildsAtMostItsBudget() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        // 300 chunks of 256 KiB, each a byte away from one reference: 75 MiB to rebuild from a
        // body of a few kilobytes, past the 64 MiB one request may spend.
        let big = TestBytes.make(count: 256 << 10, seed: 43)
        let sent = try (0..<300).map { index in
            var plain = big
            plain[index * 800] ^= 0xFF
            return try plain.withUnsafeBytes {
                try Zstd.encode($0, id: ChunkID.of(plain), against: (ChunkID.of(big), big))
            }
        }
        #expect(sent.allSatisfy { $0.encoding == .zstdAgainst })
        #expect(ChunkFrames.encode(sent).count < 300 * 200)
        try await fixture.application.test(.router) { client in
            #expect(try await upload([Self.whole(big)], client, fixture).stored == 1)
            let result = try await upload(sent, client, fixture)
            let unresolved = result.unresolved ?? []
            #expect(result.stored > 200 && !unresolved.isEmpty && result.stored + unresolved.count == 300)
            // What was left is exactly what is still missing; sent whole, it is stored.
            let left = sent.filter { unresolved.contains($0.id.hex) }
            let whole = try left.map { chunk in
                try Self.whole(chunk.decoded(maximumLength: 256 << 10, reference: (ChunkID.of(big), big)))
            }
            #expect(try await upload(whole, client, fixture).stored == left.count)
        }
    }

    @Test func offeredReferencesAreChecked() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            let id = ChunkID.of(Self.reference)
            #expect(try await upload([Self.whole(Self.reference)], client, fixture).stored == 1)
            let unasked = ChunkID.of([1, 2, 3])
            for body in [
                #"{"ids":["\#(id.hex)"],"against":{"\#(unasked.hex)":"\#(id.hex)"}}"#,
                #"{"ids":["\#(id.hex)"],"against":{"\#(id.hex)":"zz"}}"#,
                #"{"ids":["\#(id.hex)"],"against":{"\#(id.hex)":"\#(id.hex)","\#(unasked.hex)":"\#(id.hex)"}}"#
            ] {
                try await client.execute(
                    uri: "/v1/chunks/download", method: .post, headers: fixture.headers(),
                    body: ByteBuffer(string: body)
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .badRequest)
                    #expect(errorCode(response) == "bad_request")
                }
            }
            // A chunk offered against itself comes as stored.
            let chunks = try await download(ChunkIDList(ids: [id], against: [id: id]), client, fixture)
            #expect(chunks.count == 1 && chunks[0].encoding != .zstdAgainst)
        }
    }
}
