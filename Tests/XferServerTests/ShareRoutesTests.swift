import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Share links over /v1: made, listed and revoked with the account's token, by the web view's
/// rules, and opened at `/s/SECRET`.
@Suite struct ShareRoutesTests {
    /// A fixture whose `Documents/f` (in container `c`) holds one chunk; its version.
    static func withDocument(_ fixture: RouteFixture) async throws -> Int64 {
        let store = fixture.data.metadata
        let account = try #require(try await store.principal(tokenHash: TokenHash.hash(fixture.token))).accountID
        let chunk = MetadataStoreTests.chunk(1)
        _ = try await store.addChunks(account: account, [chunk])
        return try await MetadataStoreTests.put(store, account, "Documents/f", [chunk], base: nil).version
    }

    static func create(
        _ client: some TestClientProtocol, _ fixture: RouteFixture, _ request: ShareCreateRequest,
        container: String = "c", token: String? = nil, expect status: HTTPResponse.Status = .created
    ) async throws -> ShareInfo? {
        try await client.execute(
            uri: "/v1/containers/\(container)/shares", method: .post, headers: fixture.headers(token),
            body: json(request)
        ) { response in
            #expect(response.status == status, "\(String(buffer: response.body))")
            return response.status == .created ? try decode(ShareInfo.self, response) : nil
        }
    }

    @Test func aLinkMadeWithATokenOpensListsAndEndsWhenRevoked() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let version = try await Self.withDocument(fixture)
        try await fixture.application.test(.router) { client in
            let made = try #require(
                try await Self.create(
                    client, fixture, ShareCreateRequest(path: try DocumentPath("Documents/f"), version: version)))
            let url = try #require(made.url)
            #expect(url.contains("/s/") && made.version == version && !made.hasPassword)
            let week: Int64 = 7 * 86_400 * 1_000_000_000
            #expect((made.expiresAt ?? 0) - made.createdAt == week, "a week unless asked otherwise")
            let secret = String(url.split(separator: "/").last ?? "")
            try await client.execute(uri: "/s/\(secret)", method: .get) { #expect($0.status == .ok) }
            let listed = try await client.execute(
                uri: "/v1/containers/c/shares", method: .get, headers: fixture.headers()
            ) { try decode(ShareList.self, $0).shares }
            #expect(listed.map(\.id) == [made.id] && listed.first?.url == nil, "listed, never with its secret")
            let elsewhere = try await client.execute(
                uri: "/v1/containers/other/shares", method: .get, headers: fixture.headers()
            ) { try decode(ShareList.self, $0).shares }
            #expect(elsewhere.isEmpty, "a container lists its own links")
            try await client.execute(
                uri: "/v1/containers/other/shares/\(made.id)", method: .delete, headers: fixture.headers()
            ) { #expect($0.status == .notFound, "revoked only through its own container") }
            try await client.execute(
                uri: "/v1/containers/c/shares/\(made.id)", method: .delete, headers: fixture.headers()
            ) { #expect($0.status == .noContent) }
            try await client.execute(uri: "/s/\(secret)", method: .get) { #expect($0.status == .notFound) }
            try await client.execute(
                uri: "/v1/containers/c/shares/\(made.id)", method: .delete, headers: fixture.headers()
            ) { #expect($0.status == .notFound) }
        }
    }

    @Test func badRequestsAndNarrowTokensMakeNoLink() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        _ = try await Self.withDocument(fixture)
        let path = try DocumentPath("Documents/f")
        try await fixture.application.test(.router) { client in
            for bad in [
                ShareCreateRequest(path: path, expiresIn: ShareCreateRequest.maximumSeconds + 1),
                ShareCreateRequest(path: path, expiresIn: -1),
                ShareCreateRequest(path: path, password: String(repeating: "p", count: 1025)),
                ShareCreateRequest(path: path, version: 0)
            ] {
                _ = try await Self.create(client, fixture, bad, expect: .badRequest)
            }
            _ = try await Self.create(
                client, fixture, ShareCreateRequest(path: try DocumentPath("Documents/none")), expect: .notFound)
            _ = try await Self.create(client, fixture, ShareCreateRequest(path: path, version: 99), expect: .notFound)
            let reader = try await TokenScopeTests.issue(client, fixture, TokenTerms(readOnly: true))
            _ = try await Self.create(
                client, fixture, ShareCreateRequest(path: path), token: reader.token, expect: .forbidden)
            let notes = try await TokenScopeTests.issue(client, fixture, TokenTerms(container: "notes"))
            _ = try await Self.create(
                client, fixture, ShareCreateRequest(path: path), token: notes.token, expect: .forbidden)
            try await client.execute(
                uri: "/v1/containers/c/shares", method: .get, headers: fixture.headers(notes.token)
            ) { #expect($0.status == .forbidden, "a token of one container lists no other's links") }
            // A token that expires makes links that end with it.
            let hour = try await TokenScopeTests.issue(client, fixture, TokenTerms(expiresInSeconds: 3600))
            let made = try #require(
                try await Self.create(client, fixture, ShareCreateRequest(path: path, expiresIn: 0), token: hour.token))
            #expect(made.expiresAt.map { $0 - made.createdAt }.map { $0 <= 3600 * 1_000_000_000 } == true)
        }
        let account = try #require(
            try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))
        ).accountID
        #expect(try await fixture.data.metadata.shares(account: account).count == 1, "only the last was made")
    }

    @Test func aServerWithoutTheWebViewMakesNoLink() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        _ = try await Self.withDocument(fixture)
        var limits = ServerLimits()
        limits.features.remove(.web)
        let application = Application(router: XferServer.router(data: fixture.data, limits: limits))
        try await application.test(.router) { client in
            try await client.execute(
                uri: "/v1/containers/c/shares", method: .post, headers: fixture.headers(),
                body: json(ShareCreateRequest(path: try DocumentPath("Documents/f")))
            ) { response in
                #expect(response.status == .notFound && String(buffer: response.body).contains("web view"))
            }
        }
    }
}
