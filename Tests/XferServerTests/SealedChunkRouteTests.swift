import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol
import XferServer

/// Chunks sealed end to end (``ChunkEncoding/sealed``) on the upload and download routes: the
/// server checks what it can without the key, stores them as they came and serves them back.
@Suite struct SealedChunkRouteTests {
    static let chunks = EndToEndChunks(key: ContainerKey.generate())
    static let marker = Array("the quarterly figures nobody outside may read".utf8)
    static let plain = Array((0..<400).flatMap { _ in marker })

    static func sealed(_ plain: [UInt8]) throws -> EncodedChunk {
        try plain.withUnsafeBytes { try chunks.seal($0) }
    }

    /// Uploads `chunks`; the status and the answer (`nil` unless 200).
    func upload(
        _ chunks: [EncodedChunk], token: String? = nil, _ client: some TestClientProtocol,
        _ fixture: RouteFixture
    ) async throws -> (status: HTTPResponse.Status, result: UploadResult?, code: String?) {
        try await client.execute(
            uri: "/v1/chunks", method: .post, headers: fixture.headers(token),
            body: ByteBuffer(bytes: ChunkFrames.encode(chunks))
        ) { (response: TestResponse) async throws in
            (
                response.status, response.status == .ok ? try decode(UploadResult.self, response) : nil,
                errorCode(response)
            )
        }
    }

    func download(
        _ list: ChunkIDList, token: String? = nil, _ client: some TestClientProtocol,
        _ fixture: RouteFixture
    ) async throws -> [EncodedChunk] {
        try await ChunksAgainstRouteTests().download(list, token: token, client, fixture)
    }

    /// Every file under `directory`, read whole.
    static func files(under directory: String) -> [(path: String, bytes: [UInt8])] {
        guard let walker = FileManager.default.enumerator(atPath: directory) else { return [] }
        return walker.compactMap { $0 as? String }.compactMap { relative in
            let path = directory + "/" + relative
            return FileManager.default.contents(atPath: path).map { (path, [UInt8]($0)) }
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        Data(haystack).range(of: Data(needle)) != nil
    }

    @Test func aSealedChunkIsStoredAsItCameServedBackAndOpensOnlyWithTheKey() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let chunk = try Self.sealed(Self.plain)
        try await fixture.application.test(.router) { client in
            let answer = try await upload([chunk], client, fixture)
            #expect(answer.status == .ok && answer.result?.stored == 1)
            // Counted as what is stored: the sealed payload, not the plain bytes.
            #expect(answer.result?.storedBytes == Int64(chunk.payload.count))
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(),
                body: json(ChunkIDList(ids: [chunk.id]))
            ) { (response: TestResponse) async throws in
                #expect(try decode(ChunkIDList.self, response).ids.isEmpty)
            }
            let back = try await download(ChunkIDList(ids: [chunk.id]), client, fixture)
            #expect(back.count == 1 && back[0].encoding == .sealed && back[0].payload == chunk.payload)
            #expect(try Self.chunks.open(back[0]) == Self.plain)
        }
        // Nothing the server wrote holds the plain text or the plain bytes' SHA-256.
        let written = Self.files(under: fixture.directory)
        #expect(!written.isEmpty)
        for file in written {
            #expect(!Self.contains(file.bytes, Array(Self.marker.prefix(20))), "\(file.path) holds plain text")
            #expect(!Self.contains(file.bytes, ChunkID.of(Self.plain).bytes), "\(file.path) holds the plain bytes' id")
        }
    }

    @Test func aSealedChunkUnderAnotherChunksIdIsRefusedAndTheRealOneStaysStorable() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let bob = try await fixture.data.createAccount(name: "bob", quota: nil).token!
        let other = TestBytes.make(count: 20_000, seed: 51)
        // Garbage sealed under the id of a plain chunk someone else will upload.
        var forged = try Self.sealed(TestBytes.make(count: 1_000, seed: 52))
        forged.id = ChunkID.of(other)
        let forgedChunk = forged
        try await fixture.application.test(.router) { client in
            let refused = try await upload([forgedChunk], client, fixture)
            #expect(refused.status != .ok && refused.code == "corrupt_chunk")
            let whole = try other.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(other)) }
            #expect(try await upload([whole], token: bob, client, fixture).result?.stored == 1)
            let back = try await download(ChunkIDList(ids: [ChunkID.of(other)]), token: bob, client, fixture)
            #expect(try back[0].decoded() == other)
        }
    }

    @Test func aSealedChunkIsNeitherSentAgainstAnotherNorTakenAsAReference() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let chunk = try Self.sealed(Self.plain)
        let reference = TestBytes.make(count: 30_000, seed: 53)
        // Bytes close to the sealed payload, sent against it as if it were a plain chunk's bytes.
        let edited = {
            var bytes = chunk.payload
            bytes[100] ^= 0xFF
            return bytes
        }()
        let againstSealed = try edited.withUnsafeBytes {
            try Zstd.encode($0, id: ChunkID.of(edited), against: (chunk.id, chunk.payload))
        }
        #expect(againstSealed.encoding == .zstdAgainst)
        try await fixture.application.test(.router) { client in
            let whole = try reference.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(reference)) }
            #expect(try await upload([chunk, whole], client, fixture).result?.stored == 2)
            // Offered a reference the account holds, the sealed chunk still goes as stored.
            let back = try await download(
                ChunkIDList(ids: [chunk.id], against: [chunk.id: ChunkID.of(reference)]), client, fixture)
            #expect(back.count == 1 && back[0].encoding == .sealed && back[0].payload == chunk.payload)
            let result = try await upload([againstSealed], client, fixture).result
            #expect(result?.stored == 0 && result?.unresolved == [ChunkID.of(edited).hex])
        }
    }

    @Test func anotherAccountsUploadOfASealedIdAtAnotherLengthIsRefused() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let bob = try await fixture.data.createAccount(name: "bob", quota: nil).token!
        let chunk = try Self.sealed(TestBytes.make(count: 200_000, seed: 54))
        // The same keyed id (whoever knows it) with a short payload: it binds, but is not the stored one.
        var short = chunk
        short.payload = Array(chunk.payload.prefix(EndToEndChunks.minimumPayload + 10))
        short.length = short.payload.count
        let (whole, small) = (chunk, short)
        try await fixture.application.test(.router) { client in
            #expect(try await upload([whole], client, fixture).result?.stored == 1)
            let refused = try await upload([small], token: bob, client, fixture)
            #expect(refused.status != .ok && refused.code == "corrupt_chunk")
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers(bob)) {
                (response: TestResponse) async throws in
                #expect(try decode(AccountInfo.self, response).used == 0, "nothing charged, nothing held")
            }
            // The same bytes are refused too: the server cannot tell them from others.
            let same = try await upload([whole], token: bob, client, fixture)
            #expect(same.status != .ok && same.code == "corrupt_chunk")
        }
    }

    /// Whoever knows a keyed id (a device that once held the key, the operator, a thief of the
    /// disk) uploads other bytes under it from an account of its own before the owner does: the
    /// owner's upload is refused, not taken as held, so no version of the owner's ever
    /// references the squatter's bytes; the owner's push fails, and the owner's files stay.
    @Test func aSealedIDTakenFirstByAnotherAccountIsNotHeldForTheOwner() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let mallory = try await fixture.data.createAccount(name: "mallory", quota: nil).token!
        let real = try Self.sealed(TestBytes.make(count: 100_000, seed: 55))
        var forged = real
        forged.payload[forged.payload.count - 40] ^= 0xff  // past the keyed id: the id still binds
        let (owner, squat) = (real, forged)
        try await fixture.application.test(.router) { client in
            #expect(try await upload([squat], token: mallory, client, fixture).result?.stored == 1)
            let refused = try await upload([owner], client, fixture)
            #expect(refused.status != .ok && refused.code == "corrupt_chunk")
            // Not held for the owner: a commit referencing it would be told it is missing, and
            // a download of it is refused rather than served the squatter's bytes.
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(),
                body: json(ChunkIDList(ids: [owner.id]))
            ) { (response: TestResponse) async throws in
                #expect(try decode(ChunkIDList.self, response).ids == [owner.id.hex])
            }
            try await client.execute(
                uri: "/v1/chunks/download", method: .post, headers: fixture.headers(),
                body: json(ChunkIDList(ids: [owner.id]))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .notFound)
            }
        }
    }
}
