import Foundation
import Testing
import XferCore

@testable import XferClient

/// A push's chunk lists, held packed (and spilled to a file once large), read back as the arrays they stand for.
@Suite struct ChunkListsTests {
    @Test func eachFileReadsBackItsChunksWithEmptyFilesAndOnceSpilled() {
        let reference = { (n: Int) in Manifest.ChunkReference(id: ChunkID.of(Array("\(n)".utf8)), length: n + 1) }
        Spill.use(directory: FileManager.default.temporaryDirectory.path)
        // Empty files first, between and last; one long file; many one-chunk files (past the
        // threshold at which the references move to a file).
        let many = Spill.threshold / MemoryLayout<Manifest.ChunkReference>.stride + 10
        var expected: [[Manifest.ChunkReference]] = [[], [reference(0)], []]
        expected.append((1...5000).map(reference))
        for n in 0..<(many) { expected.append([reference(100_000 + n)]) }
        expected.append([])
        var builder = ChunkLists.Builder(files: expected.count)
        for (file, chunks) in expected.enumerated() {
            for chunk in chunks { builder.append(chunk, toFile: file) }
        }
        let lists = builder.finished()
        #expect(lists.count == expected.count)
        #expect(Array(lists) == expected)
        #expect(ChunkLists().isEmpty)
    }
}
