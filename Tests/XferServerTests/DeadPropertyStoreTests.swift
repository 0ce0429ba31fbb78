import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// WebDAV's dead properties on every backend: set and removed in order, all or none; copied and
/// moved with a folder's paths (and only those: `a/b` is below `a`, `a-b` is not); bounded.
@Suite struct DeadPropertyStoreTests {
    static let container = try! ContainerName("c")

    static func property(_ name: String, _ value: String, namespace: String = "urn:x") -> DeadProperty {
        DeadProperty(namespace: namespace, name: name, xml: "<p:\(name) xmlns:p=\"\(namespace)\">\(value)</p:\(name)>")
    }

    @Test(arguments: MetadataStoreTests.backends) func propertiesAreSetRemovedCopiedAndMovedWithTheirPaths(
        _ kind: String
    ) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let c = Self.container
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/a",
                [
                    .set(Self.property("color", "red")), .set(Self.property("size", "1")),
                    .remove(namespace: "urn:x", name: "size"),
                    .set(Self.property("color", "blue")), .set(Self.property("", "null namespace", namespace: ""))
                ])
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/a/b.txt", [.set(Self.property("tag", "inner"))])
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/a-b", [.set(Self.property("tag", "beside"))])
            var found = try await store.deadProperties(
                account: account, container: c, paths: ["Documents/a", "Documents/a/b.txt", "Documents/none"])
            #expect(
                found["Documents/a"]?.map(\.name) == ["", "color"],
                "size was set then removed; the later set of color wins")
            #expect(found["Documents/a"]?.first(where: { $0.name == "color" })?.xml.contains("blue") == true)
            #expect(found["Documents/none"] == nil)

            try await store.copyDeadProperties(
                account: account, container: c, from: "Documents/a", to: "Documents/copy", move: false)
            try await store.copyDeadProperties(
                account: account, container: c, from: "Documents/a", to: "Documents/moved", move: true)
            found = try await store.deadProperties(
                account: account, container: c,
                paths: [
                    "Documents/a", "Documents/a/b.txt", "Documents/a-b", "Documents/copy", "Documents/copy/b.txt",
                    "Documents/moved/b.txt", "Documents/moved-b"
                ])
            #expect(found["Documents/a"] == nil && found["Documents/a/b.txt"] == nil, "moved away")
            #expect(found["Documents/a-b"]?.first?.xml.contains("beside") == true, "a-b is not below a")
            #expect(found["Documents/copy"]?.count == 2 && found["Documents/copy/b.txt"]?.count == 1)
            #expect(
                found["Documents/moved/b.txt"]?.first?.xml.contains("inner") == true
                    && found["Documents/moved-b"] == nil)

            try await store.removeDeadProperties(account: account, container: c, path: "Documents/copy")
            found = try await store.deadProperties(
                account: account, container: c, paths: ["Documents/copy", "Documents/copy/b.txt", "Documents/moved"])
            #expect(
                found["Documents/copy"] == nil && found["Documents/copy/b.txt"] == nil
                    && found["Documents/moved"]?.count == 2)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func aDocumentDeletedByAnyoneTakesItsPropertiesWithIt(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let c = Self.container
            let chunk = MetadataStoreTests.chunk(3)
            _ = try await store.addChunks(account: account, [chunk])
            _ = try await MetadataStoreTests.put(store, account, "Documents/notes.txt", [chunk], base: nil)
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/notes.txt", [.set(Self.property("color", "red"))])
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/notes.txt-other",
                [.set(Self.property("tag", "beside"))])
            // A device deletes it (the /v1 route, as a sync pass does): a file made later at the
            // same path is another one, and starts with no properties.
            _ = try await store.delete(
                account: account, container: c, path: try DocumentPath("Documents/notes.txt"), baseVersion: nil)
            let found = try await store.deadProperties(
                account: account, container: c, paths: ["Documents/notes.txt", "Documents/notes.txt-other"])
            #expect(found["Documents/notes.txt"] == nil)
            #expect(found["Documents/notes.txt-other"]?.count == 1)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func pastItsBoundsAPatchChangesNothing(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let c = Self.container
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/f", [.set(Self.property("kept", "1"))])
            let many = (0..<DeadProperty.maximumPerPath).map { DeadPropertyChange.set(Self.property("p\($0)", "v")) }
            await #expect(throws: XferError.self) {
                try await store.patchDeadProperties(account: account, container: c, path: "Documents/f", many)
            }
            let huge = Self.property("huge", String(repeating: "x", count: DeadProperty.maximumBytes + 1))
            await #expect(throws: XferError.self) {
                try await store.patchDeadProperties(account: account, container: c, path: "Documents/f", [.set(huge)])
            }
            let found = try await store.deadProperties(account: account, container: c, paths: ["Documents/f"])
            #expect(found["Documents/f"]?.map(\.name) == ["kept"], "nothing of the refused patches stayed")
        }
    }
}
