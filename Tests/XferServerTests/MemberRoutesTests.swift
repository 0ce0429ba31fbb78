import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Containers shared with other accounts: the one rule (``ContainerTarget``) on every /v1
/// route a member reaches, as its role allows, and nothing beyond.
@Suite struct MemberRoutesTests {
    /// Alice's container `c` holding `Documents/f` (one chunk), and a second account, bob.
    struct Shared {
        let fixture: RouteFixture
        let bob: String
        let chunk: OwnedChunk

        static func make() async throws -> Shared {
            let fixture = try await RouteFixture.make()
            _ = try await ShareRoutesTests.withDocument(fixture)
            _ = try await fixture.data.metadata.announce(
                account: try #require(
                    try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))
                )
                .accountID, container: try ContainerName("private"),
                AnnounceRequest(
                    path: try DocumentPath("secret"), kind: .file, size: 1, mtimeNs: 1, mode: 0o644, baseVersion: nil))
            let bob = try await fixture.data.createAccount(name: "bob", quota: nil).token!
            return Shared(fixture: fixture, bob: bob, chunk: MetadataStoreTests.chunk(1))
        }

        func share(
            _ client: some TestClientProtocol, _ account: String, role: ContainerRole, container: String = "c",
            token: String? = nil, expect status: HTTPResponse.Status = .ok
        ) async throws {
            try await client.execute(
                uri: "/v1/containers/\(container)/members/\(account)", method: .put, headers: fixture.headers(token),
                body: json(MemberWrite(role: role))
            ) { #expect($0.status == status, "\(String(buffer: $0.body))") }
        }

        func status(
            _ client: some TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, token: String? = nil,
            body: ByteBuffer? = nil
        ) async throws -> HTTPResponse.Status {
            try await client.execute(uri: uri, method: method, headers: fixture.headers(token ?? bob), body: body) {
                $0.status
            }
        }

        func keyValue(_ key: String) -> ByteBuffer {
            json(KeyValueWrite(key: key, value: .string("v"), timestampNs: 1, device: "phone"))
        }
    }

    @Test func aReaderReadsEverythingAndChangesNothing() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        try await shared.fixture.application.test(.router) { client in
            try await shared.share(client, "bob", role: .reader)
            let listed = try await client.execute(
                uri: "/v1/containers/alice:c/documents", method: .get, headers: shared.fixture.headers(shared.bob)
            ) { try decode(DocumentList.self, $0).documents.map(\.path.value) }
            #expect(listed == ["Documents/f"])
            let mine = try await client.execute(
                uri: "/v1/containers", method: .get, headers: shared.fixture.headers(shared.bob)
            ) { try decode(ContainerList.self, $0).containers }
            #expect(mine == [ContainerEntry(container: "alice/c", role: .reader, encrypted: false, members: 0)])
            // The chunk routes reach alice's chunks through the shared container, bob's without it.
            func missing(_ uri: String) async throws -> [ChunkID] {
                try await client.execute(
                    uri: uri, method: .post, headers: shared.fixture.headers(shared.bob),
                    body: json(ChunkIDList(ids: [shared.chunk.id]))
                ) { try decode(ChunkIDList.self, $0).parsed() }
            }
            #expect(try await missing("/v1/chunks/missing?container=alice:c").isEmpty)
            #expect(try await missing("/v1/chunks/missing") == [shared.chunk.id], "bob's own chunks are not alice's")
            for (method, uri, body) in [
                (HTTPRequest.Method.delete, "/v1/containers/alice:c/document?path=Documents/f", nil),
                (.post, "/v1/containers/alice:c/announce", announce("new")),
                (.put, "/v1/containers/alice:c/kv", shared.keyValue("k")),
                (.post, "/v1/chunks?container=alice:c", ByteBuffer(bytes: ChunkFrames.magic)),
                (.put, "/v1/containers/alice:c/members/bob", json(MemberWrite(role: .writer))),
                (.get, "/v1/containers/alice:c/shares", nil)
            ] as [(HTTPRequest.Method, String, ByteBuffer?)] {
                #expect(try await shared.status(client, method, uri, body: body) == .forbidden, "\(method) \(uri)")
            }
        }
    }

    @Test func aWriterWritesAsItselfIntoTheOwnersContainer() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        try await shared.fixture.application.test(.router) { client in
            try await shared.share(client, "bob", role: .writer)
            #expect(
                try await shared.status(client, .put, "/v1/containers/alice:c/kv", body: shared.keyValue("k")) == .ok)
            let info = try await client.execute(
                uri: "/v1/containers/alice:c/announce", method: .post, headers: shared.fixture.headers(shared.bob),
                body: ByteBuffer(
                    string: #"{"path":"from-bob","kind":"file","size":5,"mtime_ns":0,"mode":420,"device":"laptop"}"#)
            ) { try decode(DocumentInfo.self, $0) }
            #expect(info.device == "laptop (bob)", "the owner sees who wrote")
            let values = try await client.execute(
                uri: "/v1/containers/c/kv", method: .get, headers: shared.fixture.headers()
            ) { try decode(KeyValueList.self, $0).entries.map(\.key) }
            #expect(values == ["k"], "written into alice's container, not one of bob's")
            // Sharing, links and the key stay the owner's.
            #expect(
                try await shared.status(
                    client, .put, "/v1/containers/alice:c/members/carol", body: json(MemberWrite(role: .reader)))
                    == .forbidden)
            #expect(try await shared.status(client, .delete, "/v1/containers/alice:c/members/alice") == .forbidden)
        }
    }

    @Test func unsharingEndsAccessAtOnceAndAnswersAWaitingFeed() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        try await shared.fixture.application.test(.router) { client in
            try await shared.share(client, "bob", role: .reader)
            let head = try await client.execute(
                uri: "/v1/containers/alice:c/changes?after=0", method: .get, headers: shared.fixture.headers(shared.bob)
            ) { try decode(ChangeList.self, $0).cursor }
            let started = ContinuousClock.now
            async let waiting = shared.status(client, .get, "/v1/containers/alice:c/changes?after=\(head)&wait=60")
            try await Task.sleep(for: .milliseconds(300))
            #expect(
                try await shared.status(client, .delete, "/v1/containers/c/members/bob", token: shared.fixture.token)
                    == .noContent)
            #expect(try await waiting == .notFound)
            #expect(ContinuousClock.now - started < .seconds(45), "answered when unshared, not at the wait's end")
            #expect(try await shared.status(client, .get, "/v1/containers/alice:c/documents") == .notFound)
            #expect(
                try await shared.status(
                    client, .post, "/v1/chunks/download?container=alice:c",
                    body: json(ChunkIDList(ids: [shared.chunk.id]))) == .notFound)
            #expect(
                try await shared.status(client, .delete, "/v1/containers/c/members/bob", token: shared.fixture.token)
                    == .notFound)
        }
    }

    @Test func aMemberReachesNothingElseOfTheOwner() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        try await shared.fixture.application.test(.router) { client in
            try await shared.share(client, "bob", role: .writer)
            // Another of alice's containers, one that does not exist, a name with two owners.
            #expect(try await shared.status(client, .get, "/v1/containers/alice:private/documents") == .notFound)
            #expect(try await shared.status(client, .get, "/v1/containers/alice:nothing/documents") == .notFound)
            #expect(try await shared.status(client, .get, "/v1/containers/alice:bob:c/documents") == .badRequest)
            #expect(
                try await shared.status(
                    client, .post, "/v1/chunks/download?container=alice:private",
                    body: json(ChunkIDList(ids: [shared.chunk.id]))) == .notFound)
            // A token of one of bob's containers reaches no shared one.
            let narrow = try await shared.fixture.data.metadata.issueToken(
                account: "bob", terms: TokenTerms(container: "mine"), notAfter: nil
            ).token
            #expect(
                try await shared.status(client, .get, "/v1/containers/alice:c/documents", token: narrow) == .forbidden)
            // Shares offered to no account, or to the owner itself.
            try await shared.share(client, "nobody", role: .reader, expect: .notFound)
            try await shared.share(client, "alice", role: .reader, expect: .badRequest)
            try await shared.share(client, "bob", role: .owner, expect: .badRequest)
            // The owner naming its own container as alice/c reaches it as owner.
            #expect(
                try await shared.status(client, .get, "/v1/containers/alice:c/members", token: shared.fixture.token)
                    == .ok)
        }
    }

    @Test func webDAVReachesASharedContainerAsTheRoleAllows() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        let basic: HTTPFields = [
            .authorization: "Basic " + Data("bob:\(shared.bob)".utf8).base64EncodedString(),
            HTTPField.Name("Depth")!: "1"
        ]
        try await shared.fixture.application.test(.router) { client in
            try await client.execute(uri: "/dav/alice:c/", method: HTTPRequest.Method("PROPFIND")!, headers: basic) {
                #expect($0.status == .notFound, "not shared yet")
            }
            try await shared.share(client, "bob", role: .reader)
            try await client.execute(uri: "/dav/alice:c/", method: HTTPRequest.Method("PROPFIND")!, headers: basic) {
                #expect($0.status.code == 207)
                #expect(
                    String(buffer: $0.body).contains("<D:href>/dav/alice%3Ac/f</D:href>"), "\(String(buffer: $0.body))")
            }
            try await client.execute(
                uri: "/dav/alice:c/new.txt", method: .put, headers: basic, body: ByteBuffer(string: "x")
            ) { #expect($0.status == .forbidden) }
            try await shared.share(client, "bob", role: .writer)
            try await client.execute(
                uri: "/dav/alice:c/new.txt", method: .put, headers: basic, body: ByteBuffer(string: "x")
            ) { #expect($0.status == .created) }
            let owner = try #require(
                try await shared.fixture.data.metadata.principal(tokenHash: TokenHash.hash(shared.fixture.token)))
            let info = try await shared.fixture.data.metadata.document(
                account: owner.accountID, container: try ContainerName("c"),
                path: try DocumentPath("Documents/new.txt"),
                version: nil)
            #expect(info.device == "webdav (bob)")
            try await client.execute(
                uri: "/dav/alice:private/", method: HTTPRequest.Method("PROPFIND")!, headers: basic
            ) {
                #expect($0.status == .notFound)
            }
        }
    }

    @Test func deletingAnAccountEndsItsMemberships() async throws {
        let shared = try await Shared.make()
        defer { shared.fixture.remove() }
        try await shared.fixture.application.test(.router) { client in
            try await shared.share(client, "bob", role: .reader)
        }
        let store = shared.fixture.data.metadata
        _ = try await store.deleteAccount(try AccountName("bob"), dryRun: false)
        let alice = try #require(try await store.principal(tokenHash: TokenHash.hash(shared.fixture.token))).accountID
        #expect(try await store.members(owner: alice, container: try ContainerName("c")).isEmpty)
    }
}
