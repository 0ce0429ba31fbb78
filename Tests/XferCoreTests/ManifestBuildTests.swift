import Testing
import XferCore

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct ManifestBuildTests {
    @Test func aDirectoryBecomesAPackageThatDescribesEveryEntry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let big = TestData.random(count: 300_000, seed: 71)
        dir.write("doc/big.bin", big)
        dir.write("doc/notes/a.txt", Array("hello".utf8))
        dir.write("doc/notes/empty", [])
        mkdir(dir.path + "/doc/emptydir", 0o755)
        symlink("notes/a.txt", dir.path + "/doc/link")
        chmod(dir.path + "/doc/notes/a.txt", 0o600)
        let manifest = try Manifest.build(from: dir.path + "/doc")
        #expect(manifest.kind == .package)
        #expect(manifest.entries.map(\.path) == ["big.bin", "emptydir", "link", "notes", "notes/a.txt", "notes/empty"])
        let entry = { (path: String) in manifest.entries.first { $0.path == path }! }
        #expect(entry("link").kind == .symlink && entry("link").symlinkTarget == "notes/a.txt")
        #expect(entry("emptydir").kind == .directory)
        #expect(entry("notes/a.txt").mode == 0o600)
        #expect(entry("notes/a.txt").chunks == [.init(id: ChunkID.of(Array("hello".utf8)), length: 5)])
        #expect(entry("notes/empty").chunks.isEmpty)
        let expected = try ChunkPipeline().records(for: [.bytes(name: "big", big)])[0]
        #expect(entry("big.bin").chunks == expected.map { .init(id: $0.id, length: $0.length) })
        #expect(manifest.totalSize == 300_000 + 5 + 11)
        // The same tree gives the same bytes; a one-byte change gives another digest.
        #expect(try Manifest.build(from: dir.path + "/doc").digest == manifest.digest)
        dir.write("doc/notes/a.txt", Array("hellO".utf8))
        #expect(try Manifest.build(from: dir.path + "/doc").digest != manifest.digest)
    }

    @Test func aFileBecomesASingleEntryDocument() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let data = TestData.text(count: 100_000, seed: 72)
        dir.write("file.txt", data)
        let manifest = try Manifest.build(from: dir.path + "/file.txt")
        #expect(manifest.kind == .file && manifest.entries.count == 1 && manifest.entries[0].path == "")
        #expect(manifest.totalSize == 100_000)
        #expect(try Manifest(decoding: manifest.encoded()) == manifest)
    }
}
