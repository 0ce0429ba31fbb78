import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol
import XferServer

/// A server data directory in /tmp with one account, for in-process route tests.
struct RouteFixture {
    let directory: String
    let data: ServerData
    let token: String
    let adminToken: String

    static func make() async throws -> RouteFixture {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-routes-\(UUID().uuidString)"
        ).path
        let data = try await ServerData.open(directory)
        let admin = try String(contentsOfFile: data.adminTokenPath, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let account = try await data.createAccount(name: "alice", quota: nil)
        return RouteFixture(directory: directory, data: data, token: account.token!, adminToken: admin)
    }

    var application: some ApplicationProtocol { Application(router: XferServer.router(data: data)) }

    func headers(_ token: String? = nil) -> HTTPFields {
        [.authorization: "Bearer \(token ?? self.token)", .contentType: "application/json"]
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }
}

func json(_ value: some Encodable) -> ByteBuffer { ByteBuffer(bytes: WireJSON.encode(value)) }

func decode<T: Decodable>(_ type: T.Type, _ response: TestResponse) throws -> T {
    try WireJSON.decode(type, from: response.body.readableBytesView)
}

func errorCode(_ response: TestResponse) -> String? {
    (try? WireJSON.decode(ErrorBody.self, from: response.body.readableBytesView))?.error.code
}

func announce(_ path: String, base: Int64? = nil) -> ByteBuffer {
    ByteBuffer(
        string: #"{"path":"\#(path)","kind":"file","size":5,"mtime_ns":0,"mode":420"#
            + (base.map { #","base_version":\#($0)"# } ?? "") + "}")
}

@Suite struct RouteTests {
    @Test func healthNeedsNoToken() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(uri: "/v1/health", method: .get) { (response: TestResponse) async throws in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body).contains("\"status\":\"ok\""))
            }
        }
    }

    @Test func missingOrWrongTokenIs401AndChangesNothing() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            // The real token with its last digit changed (to one it is not).
            let wrong = fixture.token.dropLast() + (fixture.token.hasSuffix("0") ? "1" : "0")
            for headers: HTTPFields in [
                [:], [.authorization: "Bearer xfer_0000"], [.authorization: "Basic abc"],
                [.authorization: "Bearer " + wrong]
            ] {
                try await client.execute(
                    uri: "/v1/containers/default/announce", method: .post, headers: headers,
                    body: announce("a.txt")
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .unauthorized)
                    #expect(errorCode(response) == "unauthorized")
                }
            }
            try await client.execute(uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers())
            { (response: TestResponse) async throws in
                #expect(response.status == .ok)
                #expect(try decode(DocumentList.self, response).documents.isEmpty)
            }
        }
    }

    @Test(arguments: [
        "../escape", "/etc/passwd", "a/../b", "a\\u0000b", "", "a//b", "./a", String(repeating: "x", count: 300)
    ])
    func badPathsAreRefused(_ path: String) async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce(path)
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
                #expect(errorCode(response) == "invalid_path")
            }
            try await client.execute(uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers())
            { (response: TestResponse) async throws in
                #expect(try decode(DocumentList.self, response).documents.isEmpty)
            }
        }
    }

    @Test func malformedBodiesAreBadRequests() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            for body in ["{", "[]", #"{"path":"a"}"#, #"{"path":"a","kind":"dir","size":1,"mtime_ns":0,"mode":0}"#] {
                try await client.execute(
                    uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                    body: ByteBuffer(string: body)
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .badRequest, "\(body)")
                    #expect(errorCode(response) == "bad_request")
                }
            }
            try await client.execute(
                uri: "/v1/containers/bad%20name/announce", method: .post, headers: fixture.headers(),
                body: announce("a")
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
            }
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(),
                body: ByteBuffer(string: #"{"ids":["xyz"]}"#)
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
            }
        }
    }

    @Test func uploadVerifiesEveryChunk() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let good = try (0..<3).map { i in
            let plain = TestBytes.make(count: 10_000 + i, seed: UInt64(i))
            return try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
        }
        var corrupt = good[2]
        corrupt.payload[corrupt.payload.count / 2] ^= 0xFF
        var lyingChunk = good[1]
        lyingChunk.length += 1
        let bads = [corrupt, lyingChunk]
        try await fixture.application.test(.router) { client in
            // A corrupt chunk after a good one: the good one is stored, the corrupt one is not.
            for bad in bads {
                try await client.execute(
                    uri: "/v1/chunks", method: .post, headers: fixture.headers(),
                    body: ByteBuffer(bytes: ChunkFrames.encode([good[0], bad]))
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .unprocessableContent)
                    #expect(errorCode(response) == "corrupt_chunk")
                }
            }
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(),
                body: json(ChunkIDList(ids: good.map(\.id)))
            ) { (response: TestResponse) async throws in
                #expect(try decode(ChunkIDList.self, response).ids == [good[1].id.hex, good[2].id.hex])
            }
            try await client.execute(
                uri: "/v1/chunks", method: .post, headers: fixture.headers(),
                body: ByteBuffer(bytes: ChunkFrames.encode(good))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .ok)
                let result = try decode(UploadResult.self, response)
                #expect(result.received == 3 && result.stored == 2)
            }
            // A truncated body is refused.
            let body = ChunkFrames.encode([good[0]])
            try await client.execute(
                uri: "/v1/chunks", method: .post, headers: fixture.headers(),
                body: ByteBuffer(bytes: body.dropLast(5))
            ) { (response: TestResponse) async throws in
                #expect(response.status.code >= 400)
            }
        }
    }

    @Test func commitNeedsEveryChunkAndAMatchingDigest() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let plain = TestBytes.make(count: 5000, seed: 9)
        let chunk = try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
        let manifest = try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 1,
                    chunks: [.init(id: chunk.id, length: plain.count)])
            ])
        let path = try DocumentPath("Documents/a.bin")
        try await fixture.application.test(.router) { client in
            let announced = try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce(path.value)
            ) { try decode(DocumentInfo.self, $0) }
            #expect(announced.state == .uploading && announced.version == 1)
            let commit = CommitRequest(
                path: path, version: 1, baseVersion: nil, deltaBase: nil, manifestDelta: manifest.delta(against: nil),
                manifestDigest: manifest.digest)
            try await client.execute(
                uri: "/v1/containers/default/commit", method: .post, headers: fixture.headers(),
                body: json(commit)
            ) { (response: TestResponse) async throws in
                #expect(response.status == .conflict)
                #expect(errorCode(response) == "missing_chunks")
                let body = try WireJSON.decode(ErrorBody.self, from: response.body.readableBytesView)
                #expect(body.error.missing == [chunk.id.hex])
            }
            try await client.execute(
                uri: "/v1/chunks", method: .post, headers: fixture.headers(),
                body: ByteBuffer(bytes: ChunkFrames.encode([chunk]))
            ) { #expect($0.status == .ok) }
            // A digest that does not match the delta is refused.
            var lying = commit
            lying.manifestDigest = ChunkID.of([1]).hex
            try await client.execute(
                uri: "/v1/containers/default/commit", method: .post, headers: fixture.headers(),
                body: json(lying)
            ) { #expect(errorCode($0) == "invalid_manifest") }
            let committed = try await client.execute(
                uri: "/v1/containers/default/commit", method: .post,
                headers: fixture.headers(), body: json(commit)
            ) { try decode(DocumentInfo.self, $0) }
            #expect(committed.state == .current && committed.manifestDigest == manifest.digest.hex)
            // A second writer still on "no base" may announce (a stale base is settled at commit).
            let second = try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce(path.value)
            ) { try decode(DocumentInfo.self, $0) }
            #expect(second.state == .uploading && second.version == 2)
            // Deleting from a stale base is refused, and says which version is current.
            try await client.execute(
                uri: "/v1/containers/default/document?path=Documents/a.bin&base_version=7", method: .delete,
                headers: fixture.headers()
            ) { (response: TestResponse) async throws in
                #expect(response.status == .conflict)
                let body = try WireJSON.decode(ErrorBody.self, from: response.body.readableBytesView)
                #expect(body.error.code == "conflict" && body.error.currentVersion == 1)
            }
            // The manifest comes back whole, and as a delta against a version the reader has.
            try await client.execute(
                uri: "/v1/containers/default/manifest?path=Documents/a.bin", method: .get,
                headers: fixture.headers()
            ) { (response: TestResponse) async throws in
                #expect(response.status == .ok)
                let served = try Manifest(applying: Array(response.body.readableBytesView), to: nil)
                #expect(served == manifest)
                #expect(response.headers[HTTPField.Name(XferHeader.version)!] == "1")
            }
            // Deleting makes a new version; the document leaves the listing; the feed shows every step.
            try await client.execute(
                uri: "/v1/containers/default/document?path=Documents/a.bin", method: .delete,
                headers: fixture.headers()
            ) { (response: TestResponse) async throws in
                #expect(try decode(DocumentInfo.self, response).state == .deleted)
            }
            try await client.execute(uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers())
            { (response: TestResponse) async throws in
                #expect(try decode(DocumentList.self, response).documents.isEmpty)
            }
            try await client.execute(
                uri: "/v1/containers/default/changes?after=0", method: .get, headers: fixture.headers()
            ) { (response: TestResponse) async throws in
                let list = try decode(ChangeList.self, response)
                #expect(list.changes.map(\.state) == [.uploading, .superseded, .deleted])
                #expect(list.cursor == list.changes.last?.sequence)
            }
        }
    }

    @Test func accountsAreSeparateAndAdminOnly() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/admin/accounts", method: .post, headers: fixture.headers(),
                body: json(CreateAccountRequest(name: "mallory", quota: nil))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .forbidden)
            }
            let bob = try await client.execute(
                uri: "/v1/admin/accounts", method: .post, headers: fixture.headers(fixture.adminToken),
                body: json(CreateAccountRequest(name: "bob", quota: 1000))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .created)
                return try decode(AccountInfo.self, response)
            }
            #expect(bob.quota == 1000 && bob.token?.hasPrefix("xfer_") == true)
            try await client.execute(
                uri: "/v1/admin/accounts", method: .post, headers: fixture.headers(fixture.adminToken),
                body: json(CreateAccountRequest(name: "bob", quota: nil))
            ) { #expect(errorCode($0) == "already_exists") }
            // Alice's document is invisible to Bob.
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce("mine")
            ) { #expect($0.status == .created) }
            try await client.execute(
                uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers(bob.token)
            ) { (response: TestResponse) async throws in
                #expect(try decode(DocumentList.self, response).documents.isEmpty)
            }
            try await client.execute(
                uri: "/v1/containers/default/document?path=mine", method: .get,
                headers: fixture.headers(bob.token)
            ) { #expect($0.status == .notFound) }
            // Bob's quota of 1000 bytes refuses a bigger upload, and nothing is recorded.
            let plain = TestBytes.make(count: 5000, seed: 3)
            let chunk = try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
            try await client.execute(
                uri: "/v1/chunks", method: .post, headers: fixture.headers(bob.token),
                body: ByteBuffer(bytes: ChunkFrames.encode([chunk]))
            ) { (response: TestResponse) async throws in
                #expect(response.status.code == 507)
                #expect(errorCode(response) == "quota_exceeded")
            }
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers(bob.token)) {
                (response: TestResponse) async throws in
                #expect(try decode(AccountInfo.self, response).used == 0)
            }
        }
    }
}

enum TestBytes {
    /// Deterministic pseudo-random bytes.
    static func make(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count { withUnsafeBytes(of: generator.next()) { bytes.append(contentsOf: $0) } }
        return Array(bytes.prefix(count))
    }
}
