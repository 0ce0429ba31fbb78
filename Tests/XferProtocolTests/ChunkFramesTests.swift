import Testing
import XferCore
import XferProtocol

@Suite struct ChunkFramesTests {
    static func chunks() throws -> [EncodedChunk] {
        var generator = SplitMix64(seed: 3)
        return try (0..<12).map { index in
            let count = index == 0 ? 0 : Int(generator.next() % 70_000)
            var bytes = [UInt8](repeating: 0, count: count)
            for i in stride(from: 0, to: count, by: 8) {
                bytes[i] = UInt8(truncatingIfNeeded: generator.next() % UInt64(index + 2))
            }
            return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes)) }
        }
    }

    /// A frame is laid out as PROTOCOL.md says, byte for byte: id, plain length (u32 LE),
    /// encoding, payload length (u32 LE), payload.
    @Test func aFrameIsLaidOutAsDocumented() throws {
        let plain = Array(repeating: UInt8(7), count: 300)
        let chunk = try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
        let count = chunk.payload.count
        let expected =
            ChunkFrames.magic + chunk.id.bytes + [44, 1, 0, 0] + [chunk.encoding.rawValue]
            + [UInt8(count & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count >> 16 & 0xFF), UInt8(count >> 24)]
            + chunk.payload
        #expect(ChunkFrames.encode([chunk]) == expected)
        let header = ChunkFrames.withHeader(of: chunk) { Array($0) }
        #expect(
            header == Array(expected[ChunkFrames.magic.count..<(ChunkFrames.magic.count + ChunkFrames.frameHeaderSize)])
        )
    }

    func decode(_ body: [UInt8], pieces: [Int]) throws -> [EncodedChunk] {
        var decoder = ChunkFrameDecoder()
        var out: [EncodedChunk] = []
        var offset = 0
        for size in pieces {
            out += try decoder.feed(body[offset..<(offset + size)])
            offset += size
        }
        try decoder.finish()
        return out
    }

    static func pieces(total: Int, maxPiece: Int, seed: UInt64) -> [Int] {
        var generator = SplitMix64(seed: seed)
        var sizes: [Int] = []
        var left = total
        while left > 0 {
            let size = min(left, 1 + Int(generator.next() % UInt64(maxPiece)))
            sizes.append(size)
            left -= size
        }
        return sizes
    }

    @Test func sameChunksWhetherFedWholeByteByByteOrInPieces() throws {
        let chunks = try Self.chunks()
        let body = ChunkFrames.encode(chunks)
        #expect(try decode(body, pieces: [body.count]) == chunks)
        #expect(try decode(body, pieces: Array(repeating: 1, count: body.count)) == chunks)
        for seed in UInt64(1)...5 {
            #expect(try decode(body, pieces: Self.pieces(total: body.count, maxPiece: 5000, seed: seed)) == chunks)
        }
        for chunk in chunks { #expect(try chunk.decoded().count == chunk.length) }
        #expect(try decode(ChunkFrames.encode([]), pieces: [4]) == [])
    }

    @Test func truncatedBodiesAreRefusedAtTheEnd() throws {
        let body = ChunkFrames.encode(try Self.chunks())
        var generator = SplitMix64(seed: 9)
        for _ in 0..<100 {
            let cut = Int(generator.next() % UInt64(body.count))
            var decoder = ChunkFrameDecoder()
            // A prefix alone is never an error; only finish() knows the body ended.
            let complete = try decoder.feed(body[..<cut])
            let atBoundary = cut >= 4 && ChunkFrames.encode(complete).count == cut
            #expect(((try? decoder.finish()) != nil) == atBoundary, "cut at \(cut)")
        }
        #expect(throws: XferError.self) { try ChunkFrameDecoder().finish() }
    }

    @Test func oversizedLengthsAreRefusedBeforeThePayloadArrives() throws {
        var header = ChunkFrames.magic + ChunkID.of([1]).bytes
        header += [0x00, 0x00, 0x10, 0x00]  // plain length 1 MiB, over 256 KiB
        header += [1, 0x10, 0, 0, 0]
        var decoder = ChunkFrameDecoder()
        #expect { _ = try decoder.feed(header) } throws: { ($0 as? XferError)?.code == .tooLarge }

        var badPayload = ChunkFrames.magic + ChunkID.of([1]).bytes + [16, 0, 0, 0, 1] + [0xFF, 0xFF, 0xFF, 0x7F]
        badPayload += [0]
        var second = ChunkFrameDecoder()
        #expect { _ = try second.feed(badPayload) } throws: { ($0 as? XferError)?.code == .tooLarge }

        var small = ChunkFrameDecoder(limits: ChunkFrameLimits(maximumFrames: 2))
        #expect { _ = try small.feed(ChunkFrames.encode(try Self.chunks())) } throws: {
            ($0 as? XferError)?.code == .tooLarge
        }

        // More frames allowed, but not more plain bytes than the default frames could declare.
        var plainLimited = ChunkFrameLimits(maximumChunkLength: 100, maximumFrames: 2)
        plainLimited.maximumFrames = 100
        #expect(plainLimited.maximumPlainBytes == 200)
        let declared = (0..<3).map {
            EncodedChunk(
                id: ChunkID.of([UInt8($0)]), length: 90, encoding: .raw,
                payload: [UInt8](repeating: UInt8($0), count: 90))
        }
        var overPlain = ChunkFrameDecoder(limits: plainLimited)
        #expect { _ = try overPlain.feed(ChunkFrames.encode(declared)) } throws: {
            ($0 as? XferError)?.code == .tooLarge
        }
        var withinPlain = ChunkFrameDecoder(limits: plainLimited)
        #expect(try withinPlain.feed(ChunkFrames.encode(Array(declared.prefix(2)))).count == 2)

        var tiny = ChunkFrameDecoder(limits: ChunkFrameLimits(maximumBodyLength: 100))
        #expect { _ = try tiny.feed([UInt8](repeating: 0, count: 101)) } throws: {
            ($0 as? XferError)?.code == .tooLarge
        }
    }

    @Test func badMagicAndEncodingAreRefused() throws {
        var decoder = ChunkFrameDecoder()
        #expect { _ = try decoder.feed(Array("XFU2".utf8)) } throws: { ($0 as? XferError)?.code == .corruptChunk }
        var body = ChunkFrames.encode([EncodedChunk(id: ChunkID.of([1]), length: 1, encoding: .raw, payload: [1])])
        body[4 + 36] = 7
        var second = ChunkFrameDecoder()
        #expect { _ = try second.feed(body) } throws: { ($0 as? XferError)?.code == .corruptChunk }
    }

    @Test func aSealedMaximumChunkFitsItsFrameAndOneLongerDoesNot() throws {
        // Random bytes do not compress: a sealed 256 KiB chunk is longer than 256 KiB.
        var generator = SplitMix64(seed: 9)
        let plain = (0..<(256 << 10)).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let sealed = try plain.withUnsafeBytes { try EndToEndChunks(key: ContainerKey.generate()).seal($0) }
        #expect(sealed.payload.count > 256 << 10)
        var decoder = ChunkFrameDecoder()
        #expect(try decoder.feed(ChunkFrames.encode([sealed])) == [sealed])

        let limit = EndToEndChunks.maximumPayload(plain: 256 << 10)
        var header = ChunkFrames.magic + sealed.id.bytes
        header += withUnsafeBytes(of: UInt32(limit + 1).littleEndian, Array.init) + [ChunkEncoding.sealed.rawValue]
        header += withUnsafeBytes(of: UInt32(limit + 1).littleEndian, Array.init)
        var over = ChunkFrameDecoder()
        #expect { _ = try over.feed(header) } throws: { ($0 as? XferError)?.code == .tooLarge }
    }
}
