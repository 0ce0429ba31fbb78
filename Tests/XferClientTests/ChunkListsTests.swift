import Testing
import XferCore
@testable import XferClient

/// A push's chunk lists held in blocks read back as the arrays they stand for.
@Suite struct ChunkListsTests {
    @Test func eachFileReadsBackItsChunksAcrossBlocksAndEmptyFiles() {
        let reference = { (n: Int) in Manifest.ChunkReference(id: ChunkID.of(Array("\(n)".utf8)), length: n + 1) }
        // Empty files first, between and last; one file spanning blocks; many one-chunk files.
        var expected: [[Manifest.ChunkReference]] = [[], [reference(0)], []]
        expected.append((1...(ChunkLists.blockSize + 10)).map(reference))
        for n in 0..<(2 * ChunkLists.blockSize) { expected.append([reference(100_000 + n)]) }
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
