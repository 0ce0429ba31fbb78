import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Tokens with a device, a scope and an expiry: the one rule (``Principal/check(_:container:)``)
/// and every route that applies it.
@Suite struct TokenScopeTests {
    @Test func theRuleOfAScope() throws {
        let readOnly = Principal(
            accountID: 1, name: "alice", isAdmin: false, authenticatedAt: 10, device: "phone",
            scope: TokenScope(readOnly: true))
        #expect(throws: Never.self) { try readOnly.check(.read, container: try ContainerName("any")) }
        #expect(throws: Never.self) { try readOnly.check(.read, container: nil) }
        #expect(throws: XferError.self) { try readOnly.check(.write, container: nil) }
        let notes = Principal(
            accountID: 1, name: "alice", isAdmin: false, authenticatedAt: 10, scope: TokenScope(container: "notes"))
        #expect(throws: Never.self) { try notes.check(.write, container: try ContainerName("notes")) }
        #expect(throws: Never.self) { try notes.check(.write, container: nil) }
        #expect(throws: XferError.self) { try notes.check(.read, container: try ContainerName("photos")) }
        // The device a token was issued to is what its writes record.
        #expect(readOnly.device(claimed: "someone-else") == "phone" && notes.device(claimed: "laptop") == "laptop")
        // Expired once the store's clock reaches its expiry.
        #expect(Principal(accountID: 1, name: "a", isAdmin: false, authenticatedAt: 10, expiresAt: 10).isExpired)
        #expect(!Principal(accountID: 1, name: "a", isAdmin: false, authenticatedAt: 10, expiresAt: 11).isExpired)
        #expect(TokenScope.full.isFull && !TokenScope(readOnly: true).isFull && !TokenScope(container: "x").isFull)
    }

    @Test func termsAreChecked() throws {
        for bad in [
            TokenTerms(device: ""), TokenTerms(device: "a\u{7}b"),
            TokenTerms(device: String(repeating: "d", count: 129)),
            TokenTerms(container: "../x"), TokenTerms(expiresInSeconds: 0),
            TokenTerms(expiresInSeconds: TokenTerms.maximumLifetimeSeconds + 1)
        ] {
            #expect(throws: XferError.self) { try bad.validate() }
        }
        #expect(throws: Never.self) {
            try TokenTerms(device: "Anna's phone ☎", readOnly: true, container: "notes", expiresInSeconds: 86_400)
                .validate()
        }
        #expect(throws: XferError.self) { _ = try TokenHash.publicID("xyz") }
        #expect(try TokenHash.publicID("00FF00ff00ff00ff") == "00ff00ff00ff00ff")
        #expect(Sealing.hexBytes("00ff10ab00ff00ff") == [0, 0xFF, 0x10, 0xAB, 0, 0xFF, 0, 0xFF])
        #expect(TokenHash.publicID(ofHash: [0, 0xFF, 0x10, 0xAB, 0, 0xFF, 0, 0xFF, 9]) == "00ff10ab00ff00ff")
    }

    /// Issues a token of alice's through `POST /v1/tokens` with her full token.
    static func issue(_ client: some TestClientProtocol, _ fixture: RouteFixture, _ terms: TokenTerms) async throws
        -> TokenInfo
    {
        try await client.execute(uri: "/v1/tokens", method: .post, headers: fixture.headers(), body: json(terms)) {
            response in
            #expect(response.status == .created)
            return try decode(TokenInfo.self, response)
        }
    }

    @Test func aReadOnlyTokenReadsAndChangesNothing() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce("a.txt")
            ) {
                #expect($0.status == .created)
            }
            let phone = try await Self.issue(client, fixture, TokenTerms(device: "phone", readOnly: true))
            #expect(phone.readOnly == true && phone.device == "phone" && phone.id?.count == 16)
            try await client.execute(
                uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers(phone.token)
            ) {
                #expect($0.status == .ok)
            }
            try await client.execute(
                uri: "/v1/chunks/missing", method: .post, headers: fixture.headers(phone.token),
                body: json(ChunkIDList(ids: []))
            ) {
                #expect($0.status == .ok)
            }
            // Every route that changes something refuses it, before reading a body.
            let writes: [(String, HTTPRequest.Method, ByteBuffer)] = [
                ("/v1/containers/default/announce", .post, announce("b.txt")),
                ("/v1/chunks", .post, ByteBuffer()),
                ("/v1/containers/default/commits", .post, ByteBuffer(string: #"{"documents":[]}"#)),
                ("/v1/containers/default/document?path=a.txt", .delete, ByteBuffer()),
                ("/v1/containers/default/resolve", .post, ByteBuffer(string: "{}")),
                (
                    "/v1/containers/default/kv", .put,
                    ByteBuffer(string: #"{"key":"k","value":1,"timestamp_ns":1,"device":"d"}"#)
                ),
                ("/v1/containers/default/key", .put, ByteBuffer(string: "{}"))
            ]
            for (uri, method, body) in writes {
                try await client.execute(uri: uri, method: method, headers: fixture.headers(phone.token), body: body) {
                    response in
                    #expect(response.status == .forbidden, "\(method) \(uri)")
                    #expect(errorCode(response) == "forbidden")
                    #expect(String(buffer: response.body).contains("read-only"))
                }
            }
            // Nothing it may not: no tokens listed or issued (a narrower token cannot widen itself).
            try await client.execute(uri: "/v1/tokens", method: .get, headers: fixture.headers(phone.token)) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(
                uri: "/v1/tokens", method: .post, headers: fixture.headers(phone.token), body: json(TokenTerms())
            ) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(
                uri: "/v1/containers/default/document?path=b.txt", method: .get, headers: fixture.headers()
            ) {
                #expect($0.status == .notFound, "the refused announce made nothing")
            }
        }
    }

    @Test func aContainerTokenNamesNoOtherContainer() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            let ci = try await Self.issue(client, fixture, TokenTerms(device: "ci", container: "builds"))
            try await client.execute(
                uri: "/v1/containers/builds/announce", method: .post, headers: fixture.headers(ci.token),
                body: announce("a.txt")
            ) {
                #expect($0.status == .created)
            }
            for uri in [
                "/v1/containers/default/documents", "/v1/containers/other/kv", "/v1/containers/default/changes?after=0"
            ] {
                try await client.execute(uri: uri, method: .get, headers: fixture.headers(ci.token)) { response in
                    #expect(response.status == .forbidden, "\(uri)")
                    #expect(String(buffer: response.body).contains("container builds only"))
                }
            }
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(ci.token),
                body: announce("a.txt")
            ) {
                #expect($0.status == .forbidden)
            }
            // Over WebDAV too (Basic, the token as the password).
            let basic = "Basic " + Data("x:\(ci.token)".utf8).base64EncodedString()
            try await client.execute(
                uri: "/dav/default/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic, HTTPField.Name("Depth")!: "0"]
            ) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(
                uri: "/dav/builds/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic, HTTPField.Name("Depth")!: "0"]
            ) {
                #expect($0.status.code == 207)
            }
        }
    }

    @Test func aDevicesTokenNamesTheWriterOfItsVersions() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            let laptop = try await Self.issue(client, fixture, TokenTerms(device: "laptop"))
            let claimed = ByteBuffer(
                string: #"{"path":"a.txt","kind":"file","size":5,"mtime_ns":0,"mode":420,"device":"not-the-laptop"}"#)
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(laptop.token),
                body: claimed
            ) {
                #expect($0.status == .created)
                let decoded = try decode(DocumentInfo.self, $0)
                #expect(decoded.device == "laptop")
            }
            // A key-value write keeps the device it names: in an end-to-end encrypted container that
            // name is sealed inside the value too, and the two must agree.
            let write = KeyValueWrite(key: "k", value: .string("v"), timestampNs: 1, device: "laptop-client")
            try await client.execute(
                uri: "/v1/containers/default/kv", method: .put, headers: fixture.headers(laptop.token),
                body: json(write)
            ) { response in
                #expect(response.status == .ok)
                let result = try decode(KeyValueWriteResult.self, response)
                #expect(result.entry.device == "laptop-client")
            }
            // A token with no device records what the client says.
            let other = ByteBuffer(
                string: #"{"path":"b.txt","kind":"file","size":5,"mtime_ns":0,"mode":420,"device":"desk"}"#)
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(), body: other
            ) {
                let decoded = try decode(DocumentInfo.self, $0)
                #expect(decoded.device == "desk")
            }
        }
    }

    @Test func anAccountManagesItsOwnTokens() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            let phone = try await Self.issue(client, fixture, TokenTerms(device: "phone", readOnly: true))
            let tablet = try await Self.issue(client, fixture, TokenTerms(device: "tablet", expiresInSeconds: 3600))
            #expect(tablet.expiresAt != nil)
            // A token issued by an expiring one expires no later.
            let child = try await client.execute(
                uri: "/v1/tokens", method: .post, headers: fixture.headers(tablet.token),
                body: json(TokenTerms(device: "child"))
            ) { try decode(TokenInfo.self, $0) }
            #expect(try #require(child.expiresAt) <= tablet.expiresAt! + 1)
            let list = try await client.execute(uri: "/v1/tokens", method: .get, headers: fixture.headers()) {
                try decode(TokenList.self, $0).tokens
            }
            #expect(Set(list.compactMap(\.device)) == ["phone", "tablet", "child"] && list.count == 4)
            #expect(list.filter { $0.current == true }.count == 1 && list.first { $0.current == true }?.device == nil)
            #expect(
                !String(decoding: WireJSON.encode(TokenList(tokens: list)), as: UTF8.self).contains(phone.token),
                "a list never shows a token")
            // Any token may revoke itself; another one only by a full token, and only the account's own.
            try await client.execute(
                uri: "/v1/tokens/revoke", method: .post, headers: fixture.headers(phone.token),
                body: json(RevokeTokenRequest(token: nil, account: nil, id: tablet.id))
            ) { #expect($0.status == .forbidden) }
            try await client.execute(
                uri: "/v1/tokens/revoke", method: .post, headers: fixture.headers(phone.token),
                body: json(RevokeTokenRequest(token: phone.token, account: nil))
            ) {
                let decoded = try decode(RevokeTokenResult.self, $0)
                #expect(decoded.revoked == 1)
            }
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers(phone.token)) {
                #expect($0.status == .unauthorized)
            }
            try await client.execute(
                uri: "/v1/tokens/revoke", method: .post, headers: fixture.headers(),
                body: json(RevokeTokenRequest(token: nil, account: nil, id: tablet.id))
            ) {
                let decoded = try decode(RevokeTokenResult.self, $0)
                #expect(decoded.revoked == 1)
            }
            try await client.execute(
                uri: "/v1/tokens/revoke", method: .post, headers: fixture.headers(),
                body: json(RevokeTokenRequest(token: fixture.adminToken, account: nil))
            ) {
                let decoded = try decode(RevokeTokenResult.self, $0)
                #expect(decoded.revoked == 0, "not the admin's")
            }
            try await client.execute(
                uri: "/v1/tokens/revoke", method: .post, headers: fixture.headers(),
                body: json(RevokeTokenRequest(token: nil, account: "alice"))
            ) { #expect($0.status == .badRequest) }
            // The admin sees them too, and revokes by id.
            let left = try await client.execute(
                uri: "/v1/admin/accounts/alice/tokens", method: .get, headers: fixture.headers(fixture.adminToken)
            ) {
                try decode(TokenList.self, $0).tokens
            }
            #expect(left.count == 2 && left.allSatisfy { $0.current == nil })
            let childID = try #require(child.id)
            try await client.execute(
                uri: "/v1/admin/tokens/revoke", method: .post, headers: fixture.headers(fixture.adminToken),
                body: json(RevokeTokenRequest(token: nil, account: nil, id: childID.uppercased()))
            ) {
                let decoded = try decode(RevokeTokenResult.self, $0)
                #expect(decoded.revoked == 1)
            }
            try await client.execute(uri: "/v1/admin/accounts/alice/tokens", method: .get, headers: fixture.headers()) {
                #expect($0.status == .forbidden)
            }
        }
    }

    @Test func anExpiredTokenIsRefusedSayingSo() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let metadata = fixture.data.metadata
        let brief = try await metadata.issueToken(
            account: "alice", terms: TokenTerms(device: "kiosk", expiresInSeconds: 3600))
        try await fixture.application.test(.router) { client in
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers(brief.token)) {
                #expect($0.status == .ok)
            }
            // Its hour passes.
            try await (metadata as! any SQLMetadataStore).setTokenExpiry(
                hash: TokenHash.hash(brief.token), at: try await metadata.clock() - 1)
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers(brief.token)) {
                response in
                #expect(response.status == .unauthorized)
                #expect(String(buffer: response.body).contains("expired"))
            }
            let listed = try await client.execute(uri: "/v1/tokens", method: .get, headers: fixture.headers()) {
                try decode(TokenList.self, $0).tokens
            }
            #expect(listed.first { $0.id == brief.id }?.expired == true)
        }
        // gc removes it once it expired before the grace began.
        let report = try await Maintenance(metadata: metadata, chunks: fixture.data.chunks).collectGarbage(
            grace: 0, now: Date().addingTimeInterval(5))
        #expect(report.tokensExpired == 1)
        #expect(try await metadata.tokens(account: try AccountName("alice")).count == 1)
    }
}
