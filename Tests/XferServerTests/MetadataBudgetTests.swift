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

    @Test(arguments: MetadataStoreTests.backends) func anAccountsMetadataIsBoundedAcrossItsContainers(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind, policy: Self.small()) { store, account in
            let one = try ContainerName("one")
            let two = try ContainerName("two")
            let three = try ContainerName("three")
            let write = KeyValueWrite(key: "k", value: Self.value(1500), timestampNs: 1, device: "d")
            #expect(try await store.setValue(account: account, container: one, write).applied)
            let property = DeadProperty(
                namespace: "urn:x", name: "p",
                xml: "<X:p xmlns:X=\"urn:x\">" + String(repeating: "p", count: 1500) + "</X:p>")
            try await store.patchDeadProperties(account: account, container: two, path: "Documents/a", [.set(property)])

            // A lock whose owner takes the account past its budget is not taken.
            let owner = "<D:owner xmlns:D=\"DAV:\">" + String(repeating: "o", count: 1200) + "</D:owner>"
            let lock = DavLock(
                token: "urn:uuid:1", path: "Documents", exclusive: true, infinite: false, owner: owner, timeout: 60)
            await #expect { _ = try await store.takeDavLock(account: account, container: three, lock) } throws: {
                ($0 as? XferError)?.code == .quotaExceeded
            }
            #expect(try await store.davLocks(account: account, container: three).locks.isEmpty)
            // Nor a larger value, which leaves the old one as it was.
            var larger = write
            larger.value = Self.value(3000)
            larger.timestampNs = 2
            await #expect { _ = try await store.setValue(account: account, container: one, larger) } throws: {
                ($0 as? XferError)?.code == .quotaExceeded
            }
            #expect(try await store.value(account: account, container: one, key: "k").value == Self.value(1500))
            // Room made, the lock is taken.
            try await store.patchDeadProperties(
                account: account, container: two, path: "Documents/a", [.remove(namespace: "urn:x", name: "p")])
            #expect(try await store.takeDavLock(account: account, container: three, lock).isEmpty)
        }
    }
}

/// Every version an account keeps costs its quota (``QuotaRules/versionCost(manifestBytes:)``):
/// documents without bytes of their own (empty files, copies sharing chunks) are bounded like
/// any data, on every backend, and the tally always matches the versions kept.
@Suite struct VersionBytesTests {
    static let container = try! ContainerName("c")

    static func usage(_ store: any MetadataStore, _ account: Int64) async throws -> AccountUsage {
        let usage = try #require(try await store.accounts().first { $0.id == account })
        #expect(usage.versionBytes == usage.versionBytesKept, "the recorded tally is what the versions cost")
        return usage
    }

    static func emptyItem(_ path: String) throws -> DirectCommitItem {
        let (manifest, encoded) = try MetadataStoreTests.manifest([])
        return DirectCommitItem(
            announce: AnnounceRequest(
                path: try DocumentPath(path), kind: .file, size: 0, mtimeNs: 1, mode: 0o644,
                baseVersion: nil, device: "d"),
            manifest: manifest, encoded: encoded)
    }

    @Test(arguments: MetadataStoreTests.backends) func emptyDocumentsCostTheQuota(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let cost = QuotaRules.versionCost(manifestBytes: try MetadataStoreTests.manifest([]).1.count)
            _ = try await store.setQuota(account: try AccountName("alice"), quota: 3 * cost)
            for index in 0..<3 {
                _ = try await MetadataStoreTests.put(store, account, "Documents/e\(index)", [], base: nil)
            }
            #expect(try await Self.usage(store, account).versionBytes == 3 * cost)
            // The fourth does not fit: refused, and nothing of it is current.
            await #expect {
                _ = try await MetadataStoreTests.put(store, account, "Documents/e3", [], base: nil)
            } throws: { ($0 as? XferError)?.code == .quotaExceeded }
            await #expect {
                _ = try await store.manifest(
                    account: account, container: Self.container, path: try DocumentPath("Documents/e3"), version: nil)
            } throws: { ($0 as? XferError)?.code == .notFound }
            // A batch: each item alone, the refused ones charging nothing.
            _ = try await store.setQuota(account: try AccountName("alice"), quota: 5 * cost)
            let results = try await store.commitDirect(
                account: account, container: Self.container,
                try (4..<8).map { try Self.emptyItem("Documents/e\($0)") })
            #expect(results.map { (try? $0.get()) != nil } == [true, true, false, false])
            #expect(try await Self.usage(store, account).versionBytes == 5 * cost)
            // An account at its quota can still delete; the deletion is a record too.
            _ = try await store.delete(
                account: account, container: Self.container, path: try DocumentPath("Documents/e0"), baseVersion: 1)
            #expect(try await Self.usage(store, account).versionBytes == 5 * cost + QuotaRules.versionRecordBytes)
            // Resolving by removing versions gives their cost back.
            _ = try await store.setQuota(account: try AccountName("alice"), quota: 1 << 30)
            let stale = try await MetadataStoreTests.put(store, account, "Documents/e1", [], base: nil, mtime: 2)
            #expect(stale.state == .conflict || stale.conflicts?.isEmpty == false)
            let before = try await Self.usage(store, account).versionBytes
            _ = try await store.resolve(
                account: account, container: Self.container,
                ResolveRequest(path: try DocumentPath("Documents/e1"), keep: 1))
            #expect(try await Self.usage(store, account).versionBytes == before - cost)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func anAccountWithoutQuotaKeepsNoDocument(_ kind: String) async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            _ = try await store.setQuota(account: try AccountName("alice"), quota: 0)
            await #expect {
                _ = try await MetadataStoreTests.put(store, account, "Documents/empty", [], base: nil)
            } throws: { ($0 as? XferError)?.code == .quotaExceeded }
            let results = try await store.commitDirect(
                account: account, container: Self.container, [try Self.emptyItem("Documents/b")])
            #expect((try? results[0].get()) == nil)
            #expect(try await Self.usage(store, account).versionBytes == 0)
        }
    }
}
