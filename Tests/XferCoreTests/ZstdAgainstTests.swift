import Testing
import XferCore

/// A chunk sent against its previous content (``ChunkEncoding/zstdAgainst``).
@Suite struct ZstdAgainstTests {
    static let previous = TestData.text(count: 40 << 10, seed: 31)

    /// `previous` with `count` seeded edits: an insertion, an overwrite or a deletion of a few bytes each.
    static func edited(_ data: [UInt8], count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var result = data
        for _ in 0..<count {
            let at = Int(generator.next() % UInt64(max(1, result.count)))
            let length = Int(generator.next() % 40) + 1
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            switch generator.next() % 3 {
            case 0: result.insert(contentsOf: bytes, at: at)
            case 1: result.replaceSubrange(at..<min(result.count, at + length), with: bytes)
            default: result.removeSubrange(at..<min(result.count, at + length))
            }
        }
        return result
    }

    func against(_ data: [UInt8], _ reference: [UInt8], policy: CompressionPolicy = .default) throws -> EncodedChunk {
        try data.withUnsafeBytes {
            try Zstd.encode($0, id: ChunkID.of(data), policy: policy, against: (ChunkID.of(reference), reference))
        }
    }

    @Test(arguments: [1, 3, 10, 50])
    func aSmallEditCostsBytesOnTheOrderOfTheEdit(edits: Int) throws {
        for seed in UInt64(1)...5 {
            let data = Self.edited(Self.previous, count: edits, seed: seed)
            let chunk = try against(data, Self.previous)
            let whole = try data.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(data)) }
            #expect(chunk.encoding == .zstdAgainst)
            #expect(chunk.reference == ChunkID.of(Self.previous))
            // The edits are at most 40 random bytes each; the whole chunk compresses to kilobytes.
            #expect(chunk.payload.count < ChunkID.byteCount + 64 + edits * 80, "seed \(seed)")
            #expect(chunk.payload.count * 4 < whole.payload.count, "seed \(seed)")
            #expect(try chunk.decoded(reference: (ChunkID.of(Self.previous), Self.previous)) == data)
        }
    }

    @Test func unrelatedDataStillRoundTripsAndIsNeverLargerThanAlone() throws {
        for seed in UInt64(1)...4 {
            let data = TestData.random(count: 30 << 10, seed: seed)
            let chunk = try against(data, Self.previous)
            // Nothing to gain: the chunk goes as it would alone (raw, here).
            #expect(chunk.encoding == .raw)
            #expect(try chunk.decoded() == data)
            let text = TestData.text(count: 30 << 10, seed: 100 + seed)
            let other = try against(text, Self.previous)
            #expect(try other.decoded(reference: (ChunkID.of(Self.previous), Self.previous)) == text)
        }
    }

    @Test func theReferenceMustBeTheOneItNames() throws {
        let data = Self.edited(Self.previous, count: 2, seed: 9)
        let chunk = try against(data, Self.previous)
        #expect { try chunk.decoded() } throws: { ($0 as? XferError)?.code == .missingChunks }
        let other = TestData.text(count: 40 << 10, seed: 32)
        #expect { try chunk.decoded(reference: (ChunkID.of(other), other)) } throws: {
            ($0 as? XferError)?.code == .missingChunks
        }
        // Other bytes given under the right id: the result does not hash to the chunk's id.
        #expect { try chunk.decoded(reference: (ChunkID.of(Self.previous), other)) } throws: {
            ($0 as? XferError)?.code == .corruptChunk
        }
    }

    @Test func damagedPayloadsAreRefused() throws {
        let data = Self.edited(Self.previous, count: 3, seed: 10)
        let chunk = try against(data, Self.previous)
        let reference = (ChunkID.of(Self.previous), Self.previous)
        var generator = SplitMix64(seed: 11)
        for _ in 0..<200 {
            var damaged = chunk
            let at = Int(generator.next() % UInt64(damaged.payload.count))
            damaged.payload[at] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            #expect(throws: XferError.self) { try damaged.decoded(reference: reference) }
        }
        var short = chunk
        short.payload = Array(chunk.payload.prefix(10))
        #expect { try short.decoded(reference: reference) } throws: { ($0 as? XferError)?.code == .corruptChunk }
        var longer = chunk
        longer.length = 300 << 10
        #expect { try longer.decoded(maximumLength: 256 << 10, reference: reference) } throws: {
            ($0 as? XferError)?.code == .tooLarge
        }
    }

    @Test func aPooledContextForgetsItsReference() throws {
        // After many encodes against references, a plain encode must decode without one.
        for seed in UInt64(1)...20 {
            let data = Self.edited(Self.previous, count: 1, seed: seed)
            _ = try against(data, Self.previous)
            let alone = try data.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(data)) }
            #expect(alone.encoding == .zstd)
            #expect(try alone.decoded() == data)
        }
    }
}
