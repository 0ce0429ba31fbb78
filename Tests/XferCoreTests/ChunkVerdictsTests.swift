import Testing

@testable import XferCore

/// An upload's chunks checked together give each the verdict it would get alone.
@Suite struct ChunkVerdictsTests {
    @Test func eachChunkGetsItsOwnVerdict() throws {
        var generator = SplitMix64(seed: 11)
        var chunks: [EncodedChunk] = []
        for index in 0..<40 {
            let bytes = (0..<(100 + index * 997)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let chunk = try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes)) }
            switch index % 10 {
            case 3:  // another chunk's id
                chunks.append(
                    EncodedChunk(
                        id: ChunkID.of([1, 2, 3]), length: chunk.length, encoding: chunk.encoding,
                        payload: chunk.payload))
            case 7:  // a payload that does not decode
                chunks.append(EncodedChunk(id: chunk.id, length: chunk.length, encoding: .zstd, payload: [0, 1, 2, 3]))
            case 9:  // a raw chunk of the wrong length
                chunks.append(
                    EncodedChunk(id: chunk.id, length: bytes.count, encoding: .raw, payload: Array(bytes.dropLast())))
            default:
                chunks.append(chunk)
            }
        }
        let together = EncodedChunk.verdicts(chunks, maximumLength: 1 << 20)
        let alone: [XferError?] = chunks.map { chunk in
            do {
                _ = try chunk.decoded(maximumLength: 1 << 20)
                return nil
            } catch {
                return error as? XferError
            }
        }
        #expect(together.map { $0?.code } == alone.map { $0?.code })
        #expect(together.map { $0?.message } == alone.map { $0?.message })
        #expect(together.compactMap { $0 }.count == 12)
    }
}
