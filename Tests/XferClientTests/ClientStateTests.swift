import Foundation
import Testing
import XferCore
import XferProtocol
@testable import XferClient

/// What the client state keeps of a synced document, read back as it was written.
@Suite struct ClientStateTests {
    static func manifest(files: Int, seed: Int) throws -> Manifest {
        try Manifest(kind: .package, chunker: .default, entries: (0..<files).map { index in
            Manifest.Entry(path: "file-\(String(index + 1_000_000))", kind: .file, mode: 0o644, mtimeNanoseconds: 1,
                           chunks: [Manifest.ChunkReference(id: ChunkID.of(Array("\(seed)-\(index)".utf8)), length: 100)])
        })
    }

    @Test func aLargeManifestIsStoredInPartsAndGoesWithItsDocument() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-state-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let state = try ClientState(root: "/somewhere/tree", stateDirectory: directory)
        let name = try DocumentPath("tree")
        // 40,000 distinct chunk ids: over a megabyte even compressed.
        let large = try Self.manifest(files: 40_000, seed: 1)
        #expect(large.compressedDelta(against: nil).count > ClientState.manifestPart)
        try state.recordSynced(server: "s", container: try ContainerName("c"), path: name, document: SyncedDocument(version: 3, manifest: large), files: [])
        let parts = { try state.database.run { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM root_manifest_parts") ?? 0 } }
        #expect(try parts() >= 2)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.manifest == large)
        // Replaced by a small one: the parts go, the small one is in its row.
        let small = try Self.manifest(files: 10, seed: 2)
        try state.recordSynced(server: "s", container: try ContainerName("c"), path: name, document: SyncedDocument(version: 4, manifest: small), files: [])
        #expect(try parts() == 0)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.manifest == small)
        // Large again, then forgotten: nothing is left behind.
        try state.recordSynced(server: "s", container: try ContainerName("c"), path: name, document: SyncedDocument(version: 5, manifest: large), files: [])
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.version == 5)
        try state.forget()
        #expect(try parts() == 0)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name) == nil)
    }
}
