import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// End-to-end encrypted containers in the metadata store, on every backend this run can reach:
/// the wrapped key is kept and replaced only as the rules say, and a plain write never lands in
/// an encrypted container.
@Suite struct ContainerKeyStoreTests {
    static func wrapped(_ passphrase: String, _ key: ContainerKey) throws -> [UInt8] {
        try ContainerKeyWrap.wrap(
            key, passphrase: passphrase, container: "vault", parameters: ScryptParameters(logN: 10, r: 8, p: 1))
    }

    @Test(arguments: MetadataStoreTests.backends)
    func theWrappedKeyIsKeptAndReplacedOnlyAsTheRulesSay(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let vault = try ContainerName("vault")
            let key = ContainerKey.generate()
            let first = try Self.wrapped("one", key)
            #expect(try await store.containerKey(account: account, container: vault) == nil)
            // Replacing the key of a container that is not encrypted: nothing to replace.
            let plain = await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: vault, wrapped: first, previous: first, keyID: key.id)
            }
            #expect(plain?.code == .notFound)

            try await store.setContainerKey(
                account: account, container: vault, wrapped: first, previous: nil, keyID: key.id)
            let kept = try #require(try await store.containerKey(account: account, container: vault))
            #expect(kept.wrapped == first && kept.keyID == key.id)
            // Made encrypted again (by another device, with a key of its own): refused as taken.
            let otherKey = ContainerKey.generate()
            let again = await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: vault, wrapped: try Self.wrapped("x", otherKey), previous: nil,
                    keyID: otherKey.id)
            }
            #expect(again?.code == .alreadyExists)

            // A passphrase change replaces it only over the wrapped key it read, and keeps the key.
            let second = try Self.wrapped("two", key)
            try await store.setContainerKey(
                account: account, container: vault, wrapped: second, previous: first, keyID: key.id)
            let stale = await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: vault, wrapped: try Self.wrapped("three", key), previous: first,
                    keyID: key.id)
            }
            #expect(stale?.code == .conflict)
            let other = ContainerKey.generate()
            let swapped = await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: vault, wrapped: try Self.wrapped("two", other), previous: second,
                    keyID: other.id)
            }
            #expect(swapped?.code == .conflict)
            #expect(try await store.containerKey(account: account, container: vault)?.wrapped == second)
        }
    }

    @Test(arguments: MetadataStoreTests.backends)
    func anEncryptedContainerTakesNoPlainWriteAndAContainerWithDataCannotBecomeOne(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let vault = try ContainerName("vault")
            let key = ContainerKey.generate()
            try await store.setContainerKey(
                account: account, container: vault, wrapped: try Self.wrapped("pw", key), previous: nil, keyID: key.id)
            let announce = await #expect(throws: XferError.self) {
                _ = try await store.announce(
                    account: account, container: vault,
                    AnnounceRequest(
                        path: try DocumentPath("plain.txt"), kind: .file, size: 5, mtimeNs: 1, mode: 0o644,
                        baseVersion: nil, device: "d"))
            }
            #expect(announce?.code == .encryptedContainer)
            let value = await #expect(throws: XferError.self) {
                _ = try await store.setValue(
                    account: account, container: vault,
                    KeyValueWrite(key: "k", value: .string("plain"), timestampNs: 1, device: "d"))
            }
            #expect(value?.code == .encryptedContainer)
            #expect(
                try await store.list(account: account, container: vault, prefix: "", after: nil, limit: 10).documents
                    .isEmpty)
            #expect(try await store.values(account: account, container: vault).entries.isEmpty)

            // "c" holds a document: it stays plain.
            _ = try await store.addChunks(account: account, [MetadataStoreTests.chunk(1)], uploadStartedAt: nil)
            _ = try await MetadataStoreTests.put(store, account, "doc.txt", [MetadataStoreTests.chunk(1)], base: nil)
            let held = await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: try ContainerName("c"), wrapped: try Self.wrapped("pw", key),
                    previous: nil, keyID: key.id)
            }
            #expect(held?.code == .encryptedContainer)
            #expect(try await store.containerKey(account: account, container: try ContainerName("c")) == nil)
            // So does one holding only a key-value entry.
            let notes = try ContainerName("notes")
            _ = try await store.setValue(
                account: account, container: notes, KeyValueWrite(key: "k", value: .int(1), timestampNs: 1, device: "d")
            )
            await #expect(throws: XferError.self) {
                try await store.setContainerKey(
                    account: account, container: notes, wrapped: try Self.wrapped("pw", key), previous: nil,
                    keyID: key.id)
            }
        }
    }
}
