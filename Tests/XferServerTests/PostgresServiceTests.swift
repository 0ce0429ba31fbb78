import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// `PostgresMetadataStore` as `xfer serve` runs it: a service in a `ServiceGroup`, migrated by
/// a sibling once its connections run, its LISTEN woken by another store's commit, and the
/// whole group ended by the sibling finishing. Needs XFER_POSTGRES_URL (tools/ops/pg-up.sh).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["XFER_POSTGRES_URL"] != nil))
struct PostgresServiceTests {
    struct Body: Service {
        let body: @Sendable () async throws -> Void
        func run() async throws { try await body() }
    }

    @Test func aStoreRunsAsAServiceAndEndsWithItsGroup() async throws {
        let url = try #require(ProcessInfo.processInfo.environment["XFER_POSTGRES_URL"])
        let schema = "svc_\(UUID().uuidString.prefix(8).lowercased())"
        let store = try PostgresMetadataStore(configuring: url, schema: schema)
        let other = try await PostgresMetadataStore(url: url, schema: schema)
        defer { other.shutdown() }
        let info = try await other.createAccount(
            name: try AccountName("alice"), quota: 1 << 20, tokenHash: TokenHash.hash("t"))
        let account = try #require(try await other.accounts().first { $0.name == info.name }).id
        let woken = Mutex(0)
        let checked = Mutex(false)
        let work = Body {
            try await store.prepare()
            store.watchRemoteChanges { woken.withLock { $0 += 1 } }
            // Another server's key-value writes reach this store's LISTEN (the first may come
            // before the LISTEN does, so it writes until one is heard).
            let deadline = ContinuousClock.now + .seconds(20)
            var count: Int64 = 0
            while woken.withLock({ $0 }) == 0 && ContinuousClock.now < deadline {
                count += 1
                let write = KeyValueWrite(key: "k", value: .string("v\(count)"), timestampNs: count, device: "d")
                _ = try await other.setValue(account: account, container: try ContainerName("box"), write)
                try await Task.sleep(for: .milliseconds(100))
            }
            // This store reads what the other wrote.
            let value = try await store.value(account: account, container: try ContainerName("box"), key: "k")
            checked.withLock { $0 = woken.withLock { $0 } > 0 && value.value == .string("v\(count)") }
        }
        let group = ServiceGroup(
            configuration: .init(
                services: [
                    .init(service: store), .init(service: work, successTerminationBehavior: .gracefullyShutdownGroup)
                ],
                logger: Logger(label: "test")))
        // The group ends when `work` does: the store's connections and LISTEN shut down with it.
        try await group.run()
        #expect(checked.withLock { $0 })
    }
}
