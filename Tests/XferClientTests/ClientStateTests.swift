import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// What the client state keeps of a synced document, read back as it was written.
@Suite struct ClientStateTests {
    static func manifest(files: Int, seed: Int) throws -> Manifest {
        try Manifest(
            kind: .package, chunker: .default,
            entries: (0..<files).map { index in
                Manifest.Entry(
                    path: "file-\(String(index + 1_000_000))", kind: .file, mode: 0o644, mtimeNanoseconds: 1,
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
        try state.recordSynced(
            server: "s", container: try ContainerName("c"), path: name,
            document: SyncedDocument(version: 3, manifest: large), files: [])
        let parts = {
            try state.database.run { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM root_manifest_parts") ?? 0 }
        }
        #expect(try parts() >= 2)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.manifest == large)
        // Replaced by a small one: the parts go, the small one is in its row.
        let small = try Self.manifest(files: 10, seed: 2)
        try state.recordSynced(
            server: "s", container: try ContainerName("c"), path: name,
            document: SyncedDocument(version: 4, manifest: small), files: [])
        #expect(try parts() == 0)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.manifest == small)
        // Large again, then forgotten: nothing is left behind.
        try state.recordSynced(
            server: "s", container: try ContainerName("c"), path: name,
            document: SyncedDocument(version: 5, manifest: large), files: [])
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name)?.version == 5)
        try state.forget()
        #expect(try parts() == 0)
        #expect(try state.document(server: "s", container: try ContainerName("c"), path: name) == nil)
    }

    /// A command that wrote the state does not wait on its way out for the log to be copied
    /// into the database: the log stays, and the next opening reads what was written from it.
    @Test func closingLeavesTheLogAndTheNextOpeningReadsFromIt() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-state-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let name = try DocumentPath("tree")
        let manifest = try Self.manifest(files: 50, seed: 3)
        var path = ""
        do {
            let state = try ClientState(root: "/somewhere/tree", stateDirectory: directory)
            path = state.database.path
            try state.recordSynced(
                server: "s", container: try ContainerName("c"), path: name,
                document: SyncedDocument(version: 7, manifest: manifest), files: [])
        }
        // Closed (the last reference went): its log is still there, with the pages written.
        let log = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int ?? 0
        #expect(log > 0)
        let again = try ClientState(root: "/somewhere/tree", stateDirectory: directory)
        #expect(try again.document(server: "s", container: try ContainerName("c"), path: name)?.manifest == manifest)
    }

    /// After a push the rows of the files it read are recorded already and the rest are as
    /// they were: only the rows of paths no longer files of the document go, and a file
    /// document keeps its stamp.
    @Test func aPushedVersionKeepsTheRowsOfItsFilesAndDropsTheRest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-state-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let container = try ContainerName("c")
        let state = try ClientState(root: "/somewhere/tree", stateDirectory: directory)
        let chunk = { (text: String) in
            [Manifest.ChunkReference(id: ChunkID.of(Array(text.utf8)), length: text.utf8.count)]
        }
        let stamp = { (size: Int64) in FileStamp(size: size, mtimeNanoseconds: 7, inode: 9, ctimeNanoseconds: 8) }
        // "a", "b/c", "b/d" and "e" were files; the new version has "a", "b/d" and "e" as a directory.
        try state.record(files: [
            KnownFile(path: "a", stamp: stamp(1), chunks: chunk("a")),
            KnownFile(path: "b/c", stamp: stamp(2), chunks: chunk("c")),
            KnownFile(path: "b/d", stamp: stamp(3), chunks: chunk("d")),
            KnownFile(path: "e", stamp: stamp(4), chunks: chunk("e"))
        ])
        let manifest = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                Manifest.Entry(path: "a", kind: .file, mode: 0o644, mtimeNanoseconds: 7, chunks: chunk("a")),
                Manifest.Entry(path: "b", kind: .directory, mode: 0o755, mtimeNanoseconds: 0),
                Manifest.Entry(path: "b/d", kind: .file, mode: 0o644, mtimeNanoseconds: 7, chunks: chunk("d")),
                Manifest.Entry(path: "e", kind: .directory, mode: 0o755, mtimeNanoseconds: 0)
            ])
        try state.recordPushed(
            server: "s", container: container, path: try DocumentPath("tree"),
            document: SyncedDocument(version: 2, manifest: manifest))
        var rows: [String: FileStamp] = [:]
        try state.forEachStamp { rows[$0] = $1 }
        #expect(rows == ["a": stamp(1), "b/d": stamp(3)])
        #expect(
            try state.document(server: "s", container: container, path: try DocumentPath("tree"))
                == SyncedDocument(version: 2, manifest: manifest))

        // A file document: its one row stays, and its stamp is the version's.
        let file = try ClientState(root: "/somewhere/file", stateDirectory: directory)
        try file.record(files: [KnownFile(path: "", stamp: stamp(5), chunks: chunk("f"))])
        let single = try Manifest(
            kind: .file, chunker: .default,
            entries: [Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 7, chunks: chunk("f"))])
        try file.recordPushed(
            server: "s", container: container, path: try DocumentPath("file"),
            document: SyncedDocument(version: 1, manifest: single))
        let stored = { (state: ClientState) in
            try state.database.run { db in
                try String.fetchOne(
                    db, sql: "SELECT COALESCE(file_stamp, 'none') FROM root_documents WHERE root = ?",
                    arguments: [state.root])
            }
        }
        #expect(try stored(file) == stamp(5).text)
        #expect(try stored(state) == "none")
    }
}
