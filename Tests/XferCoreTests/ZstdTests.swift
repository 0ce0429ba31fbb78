import Testing
import XferCore

@Suite struct ZstdTests {
    static let compressible = TestData.text(count: 64 << 10, seed: 21)
    static let incompressible = TestData.random(count: 64 << 10, seed: 22)

    func encode(_ data: [UInt8], policy: CompressionPolicy = .default) throws -> EncodedChunk {
        try data.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(data), policy: policy) }
    }

    @Test(arguments: [1, 3, 9, 19])
    func roundTrips(level: Int32) throws {
        for data in [Self.compressible, Self.incompressible, [], [1, 2, 3], TestData.records(count: 200_000, seed: 1)] {
            let encoded = try encode(data, policy: CompressionPolicy(level: level))
            #expect(try encoded.decoded() == data)
            #expect(encoded.length == data.count)
        }
    }

    @Test func compressibleIsCompressedAndRandomIsKeptRaw() throws {
        let text = try encode(Self.compressible)
        #expect(text.encoding == .zstd)
        #expect(text.payload.count < Self.compressible.count / 2)
        let random = try encode(Self.incompressible)
        #expect(random.encoding == .raw)
        #expect(random.payload == Self.incompressible)
        #expect(try encode([]).encoding == .raw)
    }

    @Test func rejectsAWrongDeclaredSize() throws {
        var chunk = try encode(Self.compressible)
        chunk.length -= 1
        #expect { try chunk.decoded() } throws: { ($0 as? XferError)?.code == .corruptChunk }
    }

    @Test func refusesToInflatePastTheLimit() throws {
        let big = [UInt8](repeating: 0, count: 1 << 20)
        let chunk = try encode(big)
        #expect(chunk.payload.count < 1000)
        #expect { try chunk.decoded(maximumLength: 256 << 10) } throws: { ($0 as? XferError)?.code == .tooLarge }
        // A frame that lies about its size is refused by the declared size before anything is inflated.
        #expect {
            try Zstd.decompress(chunk.payload, expectedLength: 100, maximumLength: 256 << 10)
        } throws: { ($0 as? XferError)?.code == .tooLarge }
    }

    @Test func rejectsTruncatedTrailingAndGarbageFrames() throws {
        let chunk = try encode(Self.compressible)
        for cut in [1, 10, chunk.payload.count / 2, chunk.payload.count - 1] {
            var truncated = chunk
            truncated.payload = Array(chunk.payload.prefix(cut))
            #expect(throws: XferError.self) { try truncated.decoded() }
        }
        var trailing = chunk
        trailing.payload += [0, 1, 2]
        #expect { try trailing.decoded() } throws: { ($0 as? XferError)?.code == .corruptChunk }
        var generator = SplitMix64(seed: 8)
        for _ in 0..<200 {
            var garbage = chunk
            garbage.payload = TestData.random(count: 1 + Int(generator.next() % 300), seed: generator.next())
            #expect(throws: XferError.self) { try garbage.decoded() }
        }
    }

    @Test func flippedBitsNeverPassVerification() throws {
        let chunk = try encode(Self.compressible)
        var generator = SplitMix64(seed: 9)
        for _ in 0..<200 {
            var flipped = chunk
            let index = Int(generator.next() % UInt64(flipped.payload.count))
            flipped.payload[index] ^= UInt8(1 << (generator.next() % 8))
            #expect(throws: XferError.self) { try flipped.decoded() }
        }
    }

    @Test func rawChunksAreCheckedToo() throws {
        var raw = try encode(Self.incompressible)
        raw.payload[100] ^= 1
        #expect { try raw.decoded() } throws: { ($0 as? XferError)?.code == .corruptChunk }
        raw.payload.removeLast()
        #expect { try raw.decoded() } throws: { ($0 as? XferError)?.code == .corruptChunk }
    }
}
