import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Synchronization
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Subscription webhooks (docs/RECORDS.md, "Webhooks"): the rules on their own, then delivery
/// from a store to a real HTTP receiver on loopback.
@Suite struct WebhookTests {
    @Test func onlyPublicAddressesPassThePublicPolicy() {
        let refused: [[UInt8]] = [
            [127, 0, 0, 1], [10, 1, 2, 3], [172, 16, 0, 1], [172, 31, 255, 255], [192, 168, 1, 1], [169, 254, 169, 254],
            [100, 64, 0, 1], [0, 0, 0, 0], [224, 0, 0, 1], [255, 255, 255, 255], [198, 18, 0, 1],
            Array(repeating: 0, count: 15) + [1],  // ::1
            Array(repeating: 0, count: 16),  // ::
            [0xFE, 0x80] + Array(repeating: 0, count: 14),  // link-local
            [0xFD, 0x12] + Array(repeating: 0, count: 14),  // unique local
            Array(repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 1],  // ::ffff:127.0.0.1
            [0x20, 0x02, 10, 0, 0, 1] + Array(repeating: 0, count: 10),  // 6to4 of 10.0.0.1
            [0x20, 0x01, 0x0D, 0xB8] + Array(repeating: 0, count: 12),  // documentation
            [1, 2, 3]
        ]
        for address in refused { #expect(!WebhookRules.isPublic(address), "\(address)") }
        let allowed: [[UInt8]] = [
            [93, 184, 216, 34], [8, 8, 8, 8], [172, 32, 0, 1], [100, 128, 0, 1],
            [0x26, 0x06, 0x47, 0x00] + Array(repeating: 0, count: 11) + [1],
            Array(repeating: 0, count: 10) + [0xFF, 0xFF, 8, 8, 8, 8]
        ]
        for address in allowed { #expect(WebhookRules.isPublic(address), "\(address)") }
    }

    @Test func urlsSecretsSignaturesAndRetries() throws {
        for bad in ["ftp://example.com/", "file:///etc/passwd", "http://user:pw@example.com/", "https:///x", "nonsense"]
        {
            #expect(throws: XferError.self, "\(bad)") { try WebhookRules.check(url: bad) }
        }
        #expect(try WebhookRules.check(url: "https://hooks.example.com:8443/x?y=1").host == "hooks.example.com")
        #expect(throws: XferError.self) { try WebhookRules.secret("short") }
        #expect(try WebhookRules.secret(nil).count >= 32 && WebhookRules.secret(nil) != WebhookRules.secret(nil))
        // Python: hmac.new(b"0123456789abcdef", b'1700000000.{"a":1}', hashlib.sha256).hexdigest()
        #expect(
            WebhookRules.signature(secret: "0123456789abcdef", seconds: 1_700_000_000, body: Array(#"{"a":1}"#.utf8))
                == "t=1700000000,v1=9eb18f493f8ec135d9eb2dad817c369bb4e9cbfa818657897a7437c1cd8c3a23")
        #expect((1...4).map(WebhookRules.retryDelay) == [1_000, 2_000, 4_000, 8_000])
        #expect(WebhookRules.retryDelay(failures: 100) == 3_600_000)
    }

    @Test func resolvingAHostJudgesEveryAddress() async throws {
        let loopback = try #require(URLComponents(string: "http://localhost:9/hook"))
        await #expect(throws: XferError.self) { try await WebhookAddresses.check(loopback, .public) }
        await #expect(throws: XferError.self) {
            try await WebhookAddresses.check(try #require(URLComponents(string: "http://[::1]/")), .public)
        }
        await #expect(throws: XferError.self) { try await WebhookAddresses.check(loopback, .off) }
        try await WebhookAddresses.check(loopback, .any)
    }

    /// What a receiver got: each body with its signature, and how many requests it refused.
    final class Received: Sendable {
        let state = Mutex<(bodies: [(signature: String, body: [UInt8])], refusals: Int)>(([], 0))
    }

    /// A receiver on a loopback port that answers 503 to its first `refuse` requests.
    static func withReceiver(refuse: Int, _ body: @escaping @Sendable (Int, Received) async throws -> Void)
        async throws
    {
        let received = Received()
        let router = Router()
        router.post("hook") { request, _ -> HTTPResponse.Status in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            return received.state.withLock { state in
                if state.refusals < refuse {
                    state.refusals += 1
                    return .serviceUnavailable
                }
                state.bodies.append((request.headers[.init("X-Xfer-Signature")!] ?? "", Array(buffer: bytes)))
                return .noContent
            }
        }
        try await Application(router: router).test(.live) { client in
            try await body(try #require(client.port), received)
        }
    }

    static func save(_ store: any MetadataStore, _ account: Int64, _ names: [String]) async throws {
        _ = try await store.modifyRecords(
            account: account, container: RecordStoreTests.notes,
            RecordModifyRequest(
                operations: names.map { RecordOperation(.forceReplace, RecordStoreTests.note($0, $0, 1)) }),
            writer: RecordStoreTests.writer)
    }

    /// Runs deliverers (servers) over `store` until `done`, or two minutes (the full suite in
    /// parallel on two cores can take requests seconds each).
    static func delivering(
        _ store: any MetadataStore, servers: Int = 1, destinations: WebhookDestinations = .any,
        until done: @escaping @Sendable () async throws -> Bool
    ) async throws {
        let deliverer = WebhookDeliverer(
            metadata: store, destinations: destinations, logger: Logger(label: "test"), idle: .milliseconds(200))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<servers { group.addTask { try await deliverer.run() } }
            let deadline = ContinuousClock.now + .seconds(120)
            while try await !done(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(200)) }
            group.cancelAll()
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func notificationsReachTheReceiverInOrderAfterFailures(
        _ kind: String
    ) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            try await Self.withReceiver(refuse: 2) { port, received in
                let hook = RecordWebhook(url: "http://127.0.0.1:\(port)/hook", secret: "0123456789abcdef")
                let made = try await store.modifySubscriptions(
                    account: alice, container: RecordStoreTests.notes,
                    SubscriptionModifyRequest(operations: [
                        SubscriptionOperation(
                            .create, RecordSubscription(subscriptionID: "all", subscriptionType: .zone, webhook: hook))
                    ]))
                #expect(made.subscriptions[0].subscription?.webhook?.secret == "0123456789abcdef")
                try await Self.save(store, alice, ["a", "b"])
                try await Self.save(store, alice, ["c"])
                try await Self.delivering(store) {
                    // Until the receiver has all three and the store has the outcome.
                    let got = received.state.withLock { $0.bodies.flatMap { WebhookTests.cursors($0.body) } }
                    let listed = try await store.subscriptions(account: alice, container: RecordStoreTests.notes)
                    let status = listed.subscriptions.first?.subscription?.webhook
                    return got.count >= 3 && status?.deliveredCursor == got.max()
                }
                let bodies = received.state.withLock { $0.bodies }
                let cursors = bodies.flatMap { Self.cursors($0.body) }
                #expect(cursors.count == 3 && cursors == cursors.sorted(), "each once, in order: \(cursors)")
                #expect(received.state.withLock { $0.refusals } == 2, "delivered after two 503s")
                for (signature, body) in bodies {
                    let seconds = try #require(signature.split(separator: ",").first?.dropFirst(2))
                    let mac = Digest.hmacSHA256(key: Array("0123456789abcdef".utf8), Array("\(seconds).".utf8) + body)
                    #expect(signature.hasSuffix("v1=" + mac.map(ChunkID.hexDigits).joined()))
                }
                let first = try #require(bodies.first, "nothing was delivered")
                let delivery = try RecordJSON.decode(WebhookDelivery.self, from: first.body)
                #expect(delivery.container == "alice/notes" && delivery.subscriptionID == "all")
                let listed = try await store.subscriptions(account: alice, container: RecordStoreTests.notes)
                let status = try #require(listed.subscriptions.first?.subscription?.webhook)
                #expect(status.secret == nil, "a list does not show the secret")
                #expect(status.deliveredCursor == cursors.last && status.failures == 0)
            }
        }
    }

    static func cursors(_ body: [UInt8]) -> [Int64] {
        ((try? RecordJSON.decode(WebhookDelivery.self, from: body))?.notifications ?? []).map(\.cursor)
    }

    @Test func twoServersDeliverEachNotificationOnceAndARetiredHookGoes() async throws {
        try await MetadataStoreTests.withStore("sqlite") { store, alice in
            try await Self.withReceiver(refuse: 0) { port, received in
                let hook = RecordWebhook(url: "http://127.0.0.1:\(port)/hook")
                _ = try await store.modifySubscriptions(
                    account: alice, container: RecordStoreTests.notes,
                    SubscriptionModifyRequest(operations: [
                        SubscriptionOperation(
                            .create, RecordSubscription(subscriptionID: "all", subscriptionType: .zone, webhook: hook)),
                        SubscriptionOperation(
                            .create,
                            RecordSubscription(
                                subscriptionID: "once", subscriptionType: .zone, firesOnce: true, webhook: hook))
                    ]))
                for round in 0..<20 { try await Self.save(store, alice, ["r\(round)"]) }
                let sql = store as! any SQLMetadataStore
                try await Self.delivering(store, servers: 2) {
                    let got = received.state.withLock { $0.bodies.flatMap { WebhookTests.cursors($0.body) }.count }
                    let hooks = try await sql.read { try $0.sql.int("SELECT COUNT(*) FROM record_webhooks") }
                    return got >= 21 && hooks == 1
                }
                let all = received.state.withLock { $0.bodies }.flatMap { Self.cursors($0.body) }
                #expect(all.count == 21, "20 for one subscription, 1 for the one that fired once: \(all.count)")
                let hooks = try await sql.read { try $0.sql.int("SELECT COUNT(*) FROM record_webhooks") }
                #expect(hooks == 1, "the retired webhook went once it had delivered")
            }
        }
    }

    @Test func aRefusedDestinationIsReportedAndNothingIsSent() async throws {
        try await MetadataStoreTests.withStore("sqlite") { store, alice in
            try await Self.withReceiver(refuse: 0) { port, received in
                _ = try await store.modifySubscriptions(
                    account: alice, container: RecordStoreTests.notes,
                    SubscriptionModifyRequest(operations: [
                        SubscriptionOperation(
                            .create,
                            RecordSubscription(
                                subscriptionID: "all", subscriptionType: .zone,
                                webhook: RecordWebhook(url: "http://localhost:\(port)/hook")))
                    ]))
                try await Self.save(store, alice, ["a"])
                try await Self.delivering(store, destinations: .public) {
                    let listed = try await store.subscriptions(account: alice, container: RecordStoreTests.notes)
                    return listed.subscriptions.first?.subscription?.webhook?.failures ?? 0 >= 1
                }
                let listed = try await store.subscriptions(account: alice, container: RecordStoreTests.notes)
                let status = try #require(listed.subscriptions.first?.subscription?.webhook)
                #expect(status.lastError?.contains("not a public address") == true, "\(status)")
                #expect(status.nextAttempt != nil && status.deliveredCursor == 0)
                #expect(received.state.withLock { $0.bodies.isEmpty })
            }
        }
    }
}
