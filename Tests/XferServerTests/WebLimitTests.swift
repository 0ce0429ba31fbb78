import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// A session of the fixture's account opened with its token, as signing in opens one: the
/// cookie a browser then sends and the CSRF token its forms carry.
struct WebSessionFixture {
    let cookie: String
    let csrf: String

    static func open(_ fixture: RouteFixture) async throws -> WebSessionFixture {
        let secret = WebSecurity.secret()
        _ = try #require(
            try await fixture.data.metadata.openWebSession(
                tokenHash: TokenHash.hash(fixture.token), sessionHash: WebSecurity.hash(secret),
                lifetime: 3600 * 1_000_000_000))
        return WebSessionFixture(cookie: "\(WebSecurity.sessionCookie)=\(secret)", csrf: WebSecurity.csrf(secret))
    }

    /// A page's request.
    var page: HTTPFields { [.cookie: cookie] }

    /// A form's request from one of this server's pages.
    var form: HTTPFields {
        [
            .cookie: cookie, .contentType: "application/x-www-form-urlencoded",
            HTTPField.Name("Sec-Fetch-Site")!: "same-origin"
        ]
    }

    /// An upload of one file named `name` into `Documents/` (the token first, as the page sends it).
    func upload(_ name: String, _ text: String) -> (headers: HTTPFields, body: ByteBuffer) {
        let boundary = "xferTestBoundary"
        let body =
            "--\(boundary)\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n\(csrf)\r\n"
            + "--\(boundary)\r\nContent-Disposition: form-data; name=\"folder\"\r\n\r\nDocuments/\r\n"
            + "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(name)\"\r\n"
            + "Content-Type: application/octet-stream\r\n\r\n\(text)\r\n--\(boundary)--\r\n"
        let headers: HTTPFields = [
            .cookie: cookie, .contentType: "multipart/form-data; boundary=\(boundary)",
            HTTPField.Name("Sec-Fetch-Site")!: "same-origin"
        ]
        return (headers, ByteBuffer(string: body))
    }
}

/// The web view's requests under the limits of the token a session was opened with (its rate
/// and its uploads at once, as its /v1 and WebDAV requests), and scrypt for share links'
/// passwords bounded per account and run only for a link that is then made.
@Suite struct WebLimitTests {
    /// The web routes alone over the fixture, with `limiter` (tests watch it and its gate).
    static func webRoutes(_ fixture: RouteFixture, limiter: TokenLimiter = TokenLimiter(TokenLimits())) -> (
        WebRoutes, some ApplicationProtocol
    ) {
        let routes = WebRoutes(
            metadata: fixture.data.metadata, chunks: fixture.data.chunks, limits: ServerLimits(),
            changes: ChangeNotifier(),
            quota: QuotaGate(), limiter: limiter)
        let router = Router(context: XferRequestContext.self)
        router.add(middleware: ErrorMiddleware())
        routes.register(on: router)
        return (routes, Application(router: router))
    }

    @Test func aSessionsRequestsAreItsTokensInOneBucket() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        var limits = ServerLimits()
        // Three requests in 3,000 s: however slowly the machine runs the test, the bucket stays empty.
        limits.tokens = TokenLimiterTests.limits(rate: 0.001, burst: 3)
        let application = Application(router: XferServer.router(data: fixture.data, limits: limits))
        let session = try await WebSessionFixture.open(fixture)
        try await application.test(.router) { client in
            for _ in 0..<2 {
                try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers()) {
                    #expect($0.status == .ok)
                }
            }
            try await client.execute(uri: "/web/", method: .get, headers: session.page) {
                #expect($0.status == .ok, "the bucket's last request")
            }
            try await client.execute(uri: "/v1/account", method: .get, headers: fixture.headers()) { response in
                #expect(response.status == .tooManyRequests, "the page was taken from the token's own bucket")
            }
            let form = ByteBuffer(string: "csrf=\(session.csrf)&folder=Documents%2F&name=made")
            try await client.execute(uri: "/web/c/default/mkdir", method: .post, headers: session.form, body: form) {
                response in
                #expect(response.status == .tooManyRequests)
                #expect(response.headers[.retryAfter].flatMap { Int($0) }.map { $0 > 1 } == true)
            }
        }
        let account = try #require(try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token)))
            .accountID
        await #expect(throws: XferError.self, "a refused write changes nothing") {
            _ = try await fixture.data.metadata.document(
                account: account, container: try ContainerName("default"),
                path: try DocumentPath("Documents/made"), version: nil)
        }
    }

    @Test func aWebUploadIsOneOfItsTokensUploadsAtOnce() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let limiter = TokenLimiter(TokenLimiterTests.limits(rate: 1000, burst: 1000, uploads: 1))
        let (_, application) = Self.webRoutes(fixture, limiter: limiter)
        let session = try await WebSessionFixture.open(fixture)
        let upload = session.upload("up.txt", "hello")
        try await application.test(.router) { client in
            // The token's one upload runs (a device's chunk upload, say): the page's is refused.
            try await limiter.upload(TokenHash.hash(fixture.token)) {
                try await client.execute(
                    uri: "/web/c/default/upload", method: .post, headers: upload.headers, body: upload.body
                ) { response in
                    #expect(response.status == .tooManyRequests && response.headers[.retryAfter] == "1")
                }
            }
            try await client.execute(
                uri: "/web/c/default/upload", method: .post, headers: upload.headers, body: upload.body
            ) { response in
                #expect(response.status == .seeOther, "once the other ended, the page's upload runs")
            }
        }
    }

    @Test func aRefusedShareLinkRunsNoScrypt() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let (routes, application) = Self.webRoutes(fixture)
        let session = try await WebSessionFixture.open(fixture)
        let store = fixture.data.metadata
        let account = try #require(try await store.principal(tokenHash: TokenHash.hash(fixture.token))).accountID
        let chunk = MetadataStoreTests.chunk(1)
        _ = try await store.addChunks(account: account, [chunk])
        let document = try await MetadataStoreTests.put(store, account, "Documents/f", [chunk], base: nil)
        @Sendable func share(_ fields: String, expect status: HTTPResponse.Status, _ client: any TestClientProtocol)
            async throws
        {
            let body = ByteBuffer(string: "csrf=\(session.csrf)&path=Documents%2Ff&days=1&password=secret" + fields)
            try await client.execute(uri: "/web/c/c/share", method: .post, headers: session.form, body: body) {
                response in
                #expect(response.status == status)
            }
        }
        try await application.test(.router) { client in
            try await share("&pin=1&base=\(document.version + 5)", expect: .notFound, client)
            #expect(routes.passwords.started == 0, "no such version: refused before the password is hashed")
            // The account's links at the limit: the next is refused before its password is hashed.
            try await (store as! any SQLMetadataStore).execute(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < \(ShareLink.maximumPerAccount))
                INSERT INTO share_links (hash, account_id, container, path, created_at) SELECT randomblob(32), ?, 'c', 'Documents/f', 0 FROM n
                """, [.int(account)])
            try await share("", expect: .contentTooLarge, client)
            #expect(routes.passwords.started == 0)
            #expect(try await store.shares(account: account).count == ShareLink.maximumPerAccount)
        }
    }

    @Test func passwordHashesRunOneAtATimePerAccountAndAreNeverQueued() async throws {
        let gate = PasswordGate()
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        func refused(_ account: Int64) async -> Bool {
            do {
                _ = try await gate.run(account: account) { 0 }
                return false
            } catch let error as XferError {
                return error.code == .unavailable && (error.cause as? RetryAfter)?.seconds == 1
            } catch {
                return false
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                _ = try await gate.run(account: 1) {
                    started.signal()
                    release.wait()
                    return 1
                }
            }
            try await blocking { started.wait() }
            // Account 1 has one running: its next is answered at once, never queued behind it.
            #expect(await refused(1))
            // Another account's runs meanwhile.
            #expect(try await gate.run(account: 2) { 2 } == 2)
            group.addTask {
                _ = try await gate.run(account: 2) {
                    started.signal()
                    release.wait()
                    return 2
                }
            }
            try await blocking { started.wait() }
            // Two running in all: a third account is answered at once too.
            #expect(await refused(3))
            release.signal()
            release.signal()
            try await group.waitForAll()
        }
        #expect(try await gate.run(account: 1) { 3 } == 3, "each slot given back when its run ended")
        #expect(gate.started == 4, "refused runs never started")
    }
}

/// A connection's client going away, seen at once: the wait of a long response ends, without I/O.
@Suite(.timeLimit(.minutes(1))) struct ClientPresenceTests {
    @Test func aWaitEndsWhenTheClientLeavesOrAtOnceIfItHasLeft() async {
        let presence = ClientPresence()
        async let present = ClientPresence.run(until: presence) {
            // A wait far past the time limit: only the client's leaving ends it.
            try? await Task.sleep(for: .seconds(3600))
        }
        try? await Task.sleep(for: .milliseconds(50))
        presence.leave()
        #expect(await present == false)
        #expect(
            await ClientPresence.run(until: presence) { try? await Task.sleep(for: .seconds(3600)) } == false,
            "gone stays gone")
    }

    @Test func aWaitThatEndsFirstLeavesThePresenceAsItWas() async {
        let presence = ClientPresence()
        #expect(await ClientPresence.run(until: presence) {} == true)
        #expect(
            await ClientPresence.run(until: nil) {} == true, "a connection without the handler waits its whole wait")
        #expect(!presence.isGone)
    }
}

/// A live server with one account and a session of it: the port, the account's token and the
/// session's cookie.
func withLiveWebServer(
    _ limits: ServerLimits,
    _ body: @escaping @Sendable (_ port: Int, _ token: String, _ cookie: String) async throws -> Void
)
    async throws
{
    let fixture = try await RouteFixture.make()
    defer { fixture.remove() }
    let session = try await WebSessionFixture.open(fixture)
    var logger = Logger(label: "xfer.test")
    logger.logLevel = .critical
    let app = try XferServer.application(data: fixture.data, host: "127.0.0.1", port: 0, limits: limits, logger: logger)
    let token = fixture.token
    try await app.test(.live) { client in try await body(client.port!, token, session.cookie) }
}

/// A stream or long poll whose client closed its connection gives its slot among the account's
/// polls back at once (it was held until a later write failed: 20-40 s for a stream, up to 60 s
/// for a poll). Over loopback with raw sockets; every read gives up within seconds.
@Suite(.serialized, .timeLimit(.minutes(4))) struct ClientGoneTests {
    static func twoPolls() -> ServerLimits {
        var limits = ServerLimits()
        limits.maximumWaitingPollsPerAccount = 2
        return limits
    }

    /// Asks `request` on new connections until one is admitted (`admitted` says so of what it
    /// read), for at most `seconds`.
    static func admittedWithin(
        _ seconds: Double, port: Int, readTimeout: Int = 2, _ request: String, admitted: (RawConnection) -> Bool
    ) throws -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            let socket = try RawConnection(port: port, readTimeout: readTimeout)
            socket.send(request)
            if admitted(socket) { return true }
            socket.shut()
            usleep(100_000)
        }
        return false
    }

    @Test func aClosedEventStreamGivesItsSlotBackAtOnce() async throws {
        var limits = Self.twoPolls()
        limits.eventStreamKeepAlive = .seconds(600)
        try await withLiveWebServer(limits) { port, _, cookie in
            let request = "GET /web/c/default/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: \(cookie)\r\n\r\n"
            // The first message of a stream: `: xfer` when admitted, the limit's note when not.
            let (opened, third, reopened) = try await blocking { () -> ([String], String, Bool) in
                // A loaded machine (the whole suite at once) may take its time to answer.
                let streams = try (0..<2).map { _ in try RawConnection(port: port, readTimeout: 45) }
                var opened: [String] = []
                for stream in streams {
                    stream.send(request)
                    opened.append(stream.read(until: "\n\n"))
                }
                let extra = try RawConnection(port: port)
                extra.send(request)
                let third = extra.read(until: "\n\n")
                // Both browsers leave; the server has nothing to write to them for ten minutes (a slot
                // held until a write failed would come back only then), so a minute tells the two
                // apart even on a loaded machine (the whole suite at once answers in seconds).
                for stream in streams { stream.shut() }
                let reopened = try Self.admittedWithin(60, port: port, readTimeout: 10, request) {
                    $0.read(until: "\n\n").contains(": xfer")
                }
                return (opened, third, reopened)
            }
            #expect(opened.allSatisfy { $0.hasPrefix("HTTP/1.1 200") && $0.contains(": xfer") }, "\(opened)")
            #expect(third.contains("the server's limit"), "both slots were taken: \(third)")
            #expect(reopened, "a new stream was admitted within seconds of the others closing")
        }
    }

    @Test func aClosedLongPollGivesItsSlotBackAtOnce() async throws {
        try await withLiveWebServer(Self.twoPolls()) { port, token, _ in
            let request =
                "GET /v1/containers/default/changes?after=0&wait=60 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
            let (parked, third, reopened) = try await blocking { () -> (Bool, String, Bool) in
                // A parked poll answers nothing within its read timeout.
                let polls = try (0..<2).map { _ in try RawConnection(port: port, readTimeout: 1) }
                for poll in polls { poll.send(request) }
                let parked = polls.allSatisfy { $0.read() == .timedOut }
                let extra = try RawConnection(port: port)
                extra.send(request)
                let third = extra.read(until: "\r\n\r\n")
                for poll in polls { poll.shut() }
                let reopened = try Self.admittedWithin(10, port: port, request) { $0.read() == .timedOut }
                return (parked, third, reopened)
            }
            #expect(parked)
            #expect(third.hasPrefix("HTTP/1.1 503"), "both slots were taken: \(third)")
            #expect(reopened, "a new poll parked within seconds of the others closing")
        }
    }
}
