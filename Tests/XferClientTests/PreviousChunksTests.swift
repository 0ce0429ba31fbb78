import Testing
import XferCore

@testable import XferClient

/// Which previous chunk a new chunk is sent against, decided without a disk or a server.
@Suite struct PreviousChunksTests {
    static func chunk(_ seed: UInt8, _ length: Int) -> Manifest.ChunkReference {
        Manifest.ChunkReference(id: ChunkID.of([seed]), length: length)
    }

    static let base = try! Manifest(
        kind: .package, chunker: .default,
        entries: [
            .init(path: "a", kind: .file, mode: 0o644, mtimeNanoseconds: 1, chunks: [chunk(1, 100)]),
            .init(
                path: "big", kind: .file, mode: 0o644, mtimeNanoseconds: 1,
                chunks: [chunk(2, 200_000), chunk(3, 200_000)]),
            .init(path: "d", kind: .directory, mode: 0o755, mtimeNanoseconds: 1),
            .init(path: "d/b", kind: .file, mode: 0o644, mtimeNanoseconds: 1, chunks: [chunk(4, 50), chunk(5, 70)]),
            .init(path: "empty", kind: .file, mode: 0o644, mtimeNanoseconds: 1),
            .init(path: "link", kind: .symlink, mode: 0o777, mtimeNanoseconds: 1, symlinkTarget: "a")
        ])

    @Test func theChunkThatCoveredTheOffsetElseTheLast() {
        let chunks = [Self.chunk(4, 50), Self.chunk(5, 70)]
        #expect(PreviousChunks.covering(0, in: chunks) == ChunkID.of([4]))
        #expect(PreviousChunks.covering(49, in: chunks) == ChunkID.of([4]))
        #expect(PreviousChunks.covering(50, in: chunks) == ChunkID.of([5]))
        #expect(PreviousChunks.covering(119, in: chunks) == ChunkID.of([5]))
        #expect(PreviousChunks.covering(5_000, in: chunks) == ChunkID.of([5]))  // the file grew
        #expect(PreviousChunks.covering(0, in: []) == nil)
    }

    @Test func onlyFilesOfTheSamePathWithinTheSizeLimit() {
        var push = PreviousChunks()
        for path in ["a", "big", "d", "d/b", "empty", "link", "new"] {
            push.add(fullPath: "/root/" + path, relativePath: path, previous: Self.base)
        }
        // The 400 kB file is over the cache's limit; a directory, a link, an empty or new file has nothing.
        #expect(Set(push.byPath.keys) == ["/root/a", "/root/d/b"])
        #expect(push.reference(forChunkAt: 60, in: "/root/d/b") == ChunkID.of([5]))
        #expect(push.reference(forChunkAt: 0, in: "/root/big") == nil)

        var pull = PreviousChunks(sizeLimit: .max)
        pull.add(fullPath: "big", relativePath: "big", previous: Self.base)
        #expect(pull.reference(forChunkAt: 250_000, in: "big") == ChunkID.of([3]))
        pull.add(fullPath: "x", relativePath: "x", previous: nil)
        #expect(pull.byPath.count == 1)
    }

    @Test func entriesAreFoundByBinarySearchInManifestOrder() {
        for (index, entry) in Self.base.entries.enumerated() {
            #expect(Self.base.entries.index(ofPath: entry.path.utf8) == index)
        }
        for missing in ["", "0", "c", "d/a", "d/c", "zz"] {
            #expect(Self.base.entries.index(ofPath: missing.utf8) == nil)
        }
    }
}
