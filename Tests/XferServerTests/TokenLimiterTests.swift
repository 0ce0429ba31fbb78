import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Per-token limits: the bucket's burst and refill, uploads at once, the table's bound, and
/// the 429 with `Retry-After` the /v1 routes and WebDAV answer.
@Suite struct TokenLimiterTests {
    static func limits(rate: Double, burst: Double, uploads: Int = 2) -> TokenLimits {
        var limits = TokenLimits()
        limits.requestsPerSecond = rate
        limits.burst = burst
        limits.uploadsAtOnce = uploads
        return limits
    }

    @Test func aBucketGivesItsBurstThenRefillsAtTheRate() throws {
        let limiter = TokenLimiter(Self.limits(rate: 2, burst: 3))
        let start = ContinuousClock.now
        let key: [UInt8] = [1]
        for _ in 0..<3 { try limiter.admit(key, now: start) }
        do {
            try limiter.admit(key, now: start)
            Issue.record("the fourth request at once was let through")
        } catch let error as XferError {
            #expect(error.code == .rateLimited && (error.cause as? RetryAfter)?.seconds == 1)
        }
        try limiter.admit([2], now: start)  // another token has its own bucket
        try limiter.admit(key, now: start + .milliseconds(500))  // one more after half a second at 2 a second
        #expect(throws: XferError.self) { try limiter.admit(key, now: start + .milliseconds(500)) }
        #expect(throws: Never.self) { try TokenLimiter(Self.limits(rate: 0, burst: 1)).admit(key, now: start) }
    }

    @Test func uploadsAtOnceAreCountedAndGivenBack() async throws {
        let limiter = TokenLimiter(Self.limits(rate: 100, burst: 100, uploads: 1))
        let key: [UInt8] = [7]
        try await limiter.upload(key) {
            await #expect(throws: XferError.self) { try await limiter.upload(key) {} }
            try await limiter.upload([8]) {}  // another token's
        }
        try await limiter.upload(key) {}  // given back when the first ended
        await #expect(throws: XferError.self) {
            try await limiter.upload(key) { throw XferError(.io, "failed") }
        }
        try await limiter.upload(key) {}  // given back when it failed too
    }

    @Test func theTableForgetsQuietTokensPastItsBound() throws {
        let limiter = TokenLimiter(Self.limits(rate: 1000, burst: 2))
        let start = ContinuousClock.now
        for index in 0..<TokenLimiter.maximumTracked {
            try limiter.admit(withUnsafeBytes(of: index) { Array($0) }, now: start)
        }
        #expect(limiter.tracked == TokenLimiter.maximumTracked)
        try limiter.admit([255, 255], now: start + .seconds(1))  // by now every bucket is full again
        #expect(limiter.tracked == 1)
    }

    @Test func aRouteAndWebDAVAnswer429WithRetryAfter() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        var limits = ServerLimits()
        // One request in 1,000 s: however slowly the machine runs the test, the bucket stays empty.
        limits.tokens = Self.limits(rate: 0.001, burst: 2)
        let application = Application(router: XferServer.router(data: fixture.data, limits: limits))
        try await application.test(.router) { client in
            for _ in 0..<2 {
                try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers()) {
                    #expect($0.status == .ok)
                }
            }
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers()) { response in
                #expect(response.status == .tooManyRequests)
                #expect(
                    response.headers[.retryAfter].flatMap { Int($0) }.map { (900...1000).contains($0) } == true,
                    "what one more request waits for at this rate")
                #expect(String(buffer: response.body).contains("rate_limited"))
            }
            let basic = "Basic " + Data("anyone:\(fixture.token)".utf8).base64EncodedString()
            try await client.execute(
                uri: "/dav/box/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic, HTTPField.Name("Depth")!: "0"]
            ) { response in
                #expect(
                    response.status == .tooManyRequests && response.headers[.retryAfter] != nil,
                    "the same token's bucket")
            }
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers("xfer_unknown")) {
                response in
                #expect(response.status == .unauthorized, "an unknown token is refused before it is counted")
            }
        }
    }
}

/// The admin's account routes: list, show, set a quota; an account's token may not.
@Suite struct AccountRouteTests {
    @Test func theAdminListsShowsAndSetsQuotas() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/admin/accounts", method: .get, headers: fixture.headers(fixture.adminToken)
            ) { response in
                #expect(response.status == .ok)
                let list = try decode(AccountList.self, response)
                #expect(list.accounts.map(\.name) == ["alice"] && list.accounts[0].tokens == 1)
            }
            try await client.execute(
                uri: "/v1/admin/accounts/alice/quota", method: .put, headers: fixture.headers(fixture.adminToken),
                body: json(SetQuotaRequest(quota: 12345))
            ) { response in
                let account = try decode(AccountSummary.self, response)
                #expect(account.quota == 12345)
            }
            try await client.execute(
                uri: "/v1/admin/accounts/alice", method: .get, headers: fixture.headers(fixture.adminToken)
            ) { response in
                let account = try decode(AccountSummary.self, response)
                #expect(account.quota == 12345)
            }
            try await client.execute(
                uri: "/v1/admin/accounts/alice/quota", method: .put, headers: fixture.headers(fixture.adminToken),
                body: json(SetQuotaRequest(quota: -1))
            ) { #expect($0.status == .badRequest) }
            try await client.execute(
                uri: "/v1/admin/accounts/nobody", method: .get, headers: fixture.headers(fixture.adminToken)
            ) {
                #expect($0.status == .notFound)
            }
            try await client.execute(uri: "/v1/admin/accounts", method: .get, headers: fixture.headers()) {
                #expect($0.status == .forbidden)
            }
            try await client.execute(
                uri: "/v1/admin/accounts/alice/quota", method: .put, headers: fixture.headers(),
                body: json(SetQuotaRequest(quota: 1 << 40))
            ) { #expect($0.status == .forbidden, "not its own quota either") }
        }
    }
}
