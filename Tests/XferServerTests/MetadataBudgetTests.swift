import Foundation
import Testing
import XferCore
import XferProtocol
@testable import XferServer

/// What an account keeps beside its documents (key-value entries, WebDAV properties and lock
/// owners) is bounded for the account as a whole, across its containers, on every backend: a
/// write past the budget is refused and changes nothing.
@Suite struct MetadataBudgetTests {
    static func small() -> StorePolicy {
        var policy = StorePolicy()
        policy.accountMetadataBytes = 4096
        return policy
    }

    static func value(_ count: Int) -> JSONValue { .string(String(repeating: "v", count: count)) }

    @Test(arguments: MetadataStoreTests.backends) func anAccountsMetadataIsBoundedAcrossItsContainers(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind, policy: Self.small()) { store, account in
            let one = try ContainerName("one"), two = try ContainerName("two"), three = try ContainerName("three")
            let write = KeyValueWrite(key: "k", value: Self.value(1500), timestampNs: 1, device: "d")
            #expect(try await store.setValue(account: account, container: one, write).applied)
            let property = DeadProperty(namespace: "urn:x", name: "p", xml: "<X:p xmlns:X=\"urn:x\">" + String(repeating: "p", count: 1500) + "</X:p>")
            try await store.patchDeadProperties(account: account, container: two, path: "Documents/a", [.set(property)])

            // A lock whose owner takes the account past its budget is not taken.
            let owner = "<D:owner xmlns:D=\"DAV:\">" + String(repeating: "o", count: 1200) + "</D:owner>"
            let lock = DavLock(token: "urn:uuid:1", path: "Documents", exclusive: true, infinite: false, owner: owner, timeout: 60)
            await #expect { _ = try await store.takeDavLock(account: account, container: three, lock) }
                throws: { ($0 as? XferError)?.code == .quotaExceeded }
            #expect(try await store.davLocks(account: account, container: three).locks.isEmpty)
            // Nor a larger value, which leaves the old one as it was.
            var larger = write
            larger.value = Self.value(3000)
            larger.timestampNs = 2
            await #expect { _ = try await store.setValue(account: account, container: one, larger) }
                throws: { ($0 as? XferError)?.code == .quotaExceeded }
            #expect(try await store.value(account: account, container: one, key: "k").value == Self.value(1500))
            // Room made, the lock is taken.
            try await store.patchDeadProperties(account: account, container: two, path: "Documents/a", [.remove(namespace: "urn:x", name: "p")])
            #expect(try await store.takeDavLock(account: account, container: three, lock).isEmpty)
        }
    }
}
