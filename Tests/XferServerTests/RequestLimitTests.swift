import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Body sizes, field lengths and parked long polls, refused at the edge with a clear error.
@Suite struct RequestLimitTests {

    func expectHealthy(_ client: some TestClientProtocol) async throws {
        try await client.execute(uri: "/v1/health", method: .get) { (response: TestResponse) async throws in
            #expect(response.status == .ok)
        }
    }

    @Test func aHugeJSONBodyIs413AndTheServerKeepsServing() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let huge = ByteBuffer(repeating: UInt8(ascii: " "), count: 65 << 20)
        try await fixture.application.test(.router) { client in
            // Refused by its Content-Length, then (no header) by the collect limit.
            var declared = fixture.headers()
            declared[.contentLength] = String(huge.readableBytes)
            for headers in [declared, fixture.headers()] {
                try await client.execute(
                    uri: "/v1/containers/default/announce", method: .post, headers: headers,
                    body: huge
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .contentTooLarge)
                    #expect(errorCode(response) == "too_large")
                    #expect(
                        String(buffer: response.body).contains("at most \(ProtocolLimits.maximumSmallJSONBody) bytes"))
                }
            }
            try await expectHealthy(client)
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announce("after.txt")
            ) { (response: TestResponse) async throws in
                #expect(response.status == .created)
            }
        }
    }

    @Test(arguments: ["/v1/chunks/missing", "/v1/chunks/download"])
    func aBigIDListIsRefusedBeforeParsing(route: String) async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let id = ChunkID.of([1, 2, 3]).hex
        let full =
            "{\"ids\":["
            + Array(repeating: "\"\(id)\"", count: ProtocolLimits.maximumIDsPerRequest).joined(separator: ",") + "]}"
        #expect(full.utf8.count <= ProtocolLimits.maximumIDListBody, "the most ids a request may carry fit")
        let big = ByteBuffer(repeating: UInt8(ascii: " "), count: 57 << 20)
        try await fixture.application.test(.router) { client in
            for body in [
                big,
                ByteBuffer(
                    string: "{\"ids\":[" + Array(repeating: "\"\(id)\"", count: 5000).joined(separator: ",") + "]}")
            ] {
                try await client.execute(uri: route, method: .post, headers: fixture.headers(), body: body) {
                    (response: TestResponse) async throws in
                    #expect(response.status == .contentTooLarge)
                    #expect(errorCode(response) == "too_large")
                }
            }
            if route.hasSuffix("missing") {
                try await client.execute(
                    uri: route, method: .post, headers: fixture.headers(), body: ByteBuffer(string: full)
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .ok)
                }
            }
            try await expectHealthy(client)
        }
    }

    @Test func overlongFieldsAreBadRequestsAndNotStored() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let long = String(repeating: "d", count: ProtocolLimits.maximumDeviceBytes + 1)
        @Sendable func announcement(device: String) -> ByteBuffer {
            ByteBuffer(
                string: #"{"path":"a.txt","kind":"file","size":5,"mtime_ns":0,"mode":420,"device":"\#(device)"}"#)
        }
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announcement(device: long)
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
                #expect(errorCode(response) == "bad_request")
                let message = String(buffer: response.body)
                #expect(
                    message.contains("device") && message.contains("at most \(ProtocolLimits.maximumDeviceBytes)"),
                    "\(message)")
            }
            // 10 MiB is past the body limit already.
            try await client.execute(
                uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                body: announcement(device: String(repeating: "d", count: 10 << 20))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .contentTooLarge)
            }
            try await client.execute(uri: "/v1/containers/default/documents", method: .get, headers: fixture.headers())
            { (response: TestResponse) async throws in
                #expect(try decode(DocumentList.self, response).documents.isEmpty, "nothing was announced")
            }
            try await client.execute(
                uri: "/v1/containers/default/kv", method: .put, headers: fixture.headers(),
                body: json(KeyValueWrite(key: "k", value: .int(1), timestampNs: 1, device: long))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("device"))
            }
            let admin = fixture.headers(fixture.adminToken)
            try await client.execute(
                uri: "/v1/admin/accounts", method: .post, headers: admin,
                body: json(CreateAccountRequest(name: String(repeating: "n", count: 1000), quota: nil))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("name is 1000 bytes"))
            }
            try await client.execute(
                uri: "/v1/admin/tokens/revoke", method: .post, headers: admin,
                body: json(RevokeTokenRequest(token: String(repeating: "t", count: 300), account: nil))
            ) { (response: TestResponse) async throws in
                #expect(response.status == .badRequest)
            }
        }
    }

    // The limit catches a hang, not slowness: in the whole suite on two cores this test can
    // wait its turn for a minute before its polls park (its polls returned 200, woken by the
    // announce, in a run that still crossed one minute).
    @Test(.timeLimit(.minutes(3))) func parkedLongPollsPerAccountAreCapped() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        var limits = ServerLimits()
        limits.maximumWaitingPollsPerAccount = 2
        let changes = ChangeNotifier()
        let app = Application(router: XferServer.router(data: fixture.data, limits: limits, changes: changes))
        try await app.test(.router) { client in
            let poll = "/v1/containers/default/changes?after=0&wait="
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        try await client.execute(uri: poll + "50", method: .get, headers: fixture.headers()) {
                            (response: TestResponse) async throws in
                            #expect(response.status == .ok, "\(String(buffer: response.body))")
                            #expect(try decode(ChangeList.self, response).changes.count == 1, "woken by the announce")
                        }
                    }
                }
                // Once both are parked, a third is answered at once: 503 `unavailable` (clients back off).
                await eventually { changes.parked == 2 }
                var refused = false
                try await client.execute(uri: poll + "1", method: .get, headers: fixture.headers()) {
                    (response: TestResponse) async throws in
                    refused = response.status == .serviceUnavailable
                    #expect(errorCode(response) == "unavailable")
                    #expect(String(buffer: response.body).contains("2 change-feed requests waiting"))
                }
                #expect(refused)
                try await client.execute(
                    uri: "/v1/containers/default/announce", method: .post, headers: fixture.headers(),
                    body: announce("wake.txt")
                ) { (response: TestResponse) async throws in
                    #expect(response.status == .created)
                }
                try await group.waitForAll()
            }
            // Their slots are free again.
            try await client.execute(
                uri: "/v1/containers/default/changes?after=1&wait=1", method: .get, headers: fixture.headers()
            ) { (response: TestResponse) async throws in
                #expect(response.status == .ok)
            }
        }
    }
}
