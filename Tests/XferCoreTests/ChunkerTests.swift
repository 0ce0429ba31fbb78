import Testing

@testable import XferCore

/// FastCDC written from its definition, with the Gear hash recomputed from scratch at every
/// offset instead of rolled: the hash after byte `p` is the sum of `gear[b[p-k]] << k` over
/// the 64 bytes ending at `p` (all inside the chunk, since `p` is at least `minimumSize`
/// past its start). The rolling chunker must cut exactly where this one does.
func referenceChunkLengths(_ data: [UInt8], _ config: ChunkerConfiguration) -> [Int] {
    let gear = GearTable.values
    var lengths: [Int] = []
    var start = 0
    while start < data.count {
        let remaining = data.count - start
        var length = min(remaining, config.maximumSize)
        if remaining > config.minimumSize {
            for p in (start + config.minimumSize)..<(start + min(remaining, config.maximumSize)) {
                var h: UInt64 = 0
                for k in 0..<64 {
                    h &+= gear[Int(data[p - k])] &<< UInt64(k)
                }
                let mask = p - start < config.averageSize ? config.smallMask : config.largeMask
                if h & mask == 0 {
                    length = p - start + 1
                    break
                }
            }
        }
        lengths.append(length)
        start += length
    }
    return lengths
}

/// Feeds `data` to a chunker in the given piece sizes and returns the chunk lengths.
func streamedChunkLengths(_ data: [UInt8], pieces: [Int], _ config: ChunkerConfiguration) -> [Int] {
    var chunker = Chunker(configuration: config)
    var lengths: [Int] = []
    var current = 0
    var offset = 0
    data.withUnsafeBytes { all in
        for size in pieces {
            var piece = UnsafeRawBufferPointer(rebasing: all[offset..<(offset + size)])
            offset += size
            while let cut = chunker.nextBoundary(in: piece) {
                lengths.append(current + cut)
                current = 0
                piece = UnsafeRawBufferPointer(rebasing: piece[cut...])
            }
            current += piece.count
        }
    }
    if let last = chunker.finish() {
        #expect(last == current)
        lengths.append(last)
    }
    return lengths
}

@Suite struct ChunkerTests {
    static let inputs: [(String, [UInt8])] = [
        ("random", TestData.random(count: 96 << 10, seed: 11)),
        ("text", TestData.text(count: 96 << 10, seed: 12)),
        ("records", TestData.records(count: 96 << 10, seed: 13)),
        ("zeros", [UInt8](repeating: 0, count: 40 << 10))
    ]

    @Test(arguments: 0..<inputs.count)
    func rollingEqualsRestartAtEveryOffset(_ index: Int) {
        let data = Self.inputs[index].1
        let expected = referenceChunkLengths(data, smallChunks)
        let actual = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
        #expect(actual == expected, "input \(Self.inputs[index].0)")
        #expect(actual.count >= 10)
    }

    @Test(arguments: [1, 3, 64, 1000, 5000])
    func cutPointsIndependentOfHowInputIsFed(maxPiece: Int) {
        for (name, data) in Self.inputs {
            let whole = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
            let sizes =
                maxPiece == 1
                ? Array(repeating: 1, count: data.count)
                : TestData.pieces(total: data.count, maxPiece: maxPiece, seed: UInt64(maxPiece))
            #expect(
                streamedChunkLengths(data, pieces: sizes, smallChunks) == whole, "input \(name), pieces ≤ \(maxPiece)")
        }
    }

    @Test(arguments: [
        smallChunks, ChunkerConfiguration.default,
        try! ChunkerConfiguration(minimumSize: 2048, averageSize: 8192, maximumSize: 65536, normalizationLevel: 1)
    ])
    func everyChunkWithinLimitsExceptTheLast(config: ChunkerConfiguration) {
        for seed in UInt64(1)...3 {
            let data = TestData.random(count: 64 * config.averageSize / 4 + Int(seed) * 977, seed: seed)
            let lengths = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: config) }
            #expect(lengths.reduce(0, +) == data.count)
            for length in lengths.dropLast() {
                #expect(length >= config.minimumSize && length <= config.maximumSize)
            }
            #expect(lengths.last! >= 1 && lengths.last! <= config.maximumSize)
        }
    }

    @Test func meanChunkSizeIsNearTheAverageOnRandomData() {
        let data = TestData.random(count: 4 << 20, seed: 99)
        let lengths = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
        let mean = Double(data.count) / Double(lengths.count)
        // Normalized chunking with a 256-byte minimum puts the mean a little above 1 KiB.
        #expect(mean > 0.8 * 1024 && mean < 1.6 * 1024, "mean \(mean)")
    }

    @Test func anEditMovesOnlyNearbyBoundaries() {
        var data = TestData.text(count: 256 << 10, seed: 5)
        let before = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
        data.insert(contentsOf: Array("an inserted sentence. ".utf8), at: 128 << 10)
        let after = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
        let ends = { (lengths: [Int]) in lengths.reduce(into: [Int]()) { $0.append(($0.last ?? 0) + $1) } }
        let shared = Set(ends(before).filter { $0 < 120 << 10 }).intersection(ends(after))
        #expect(shared.count == ends(before).filter { $0 < 120 << 10 }.count)
        let shiftedAfter = Set(ends(after).filter { $0 > 140 << 10 }.map { $0 - 22 })
        let tailBefore = Set(ends(before).filter { $0 > 140 << 10 })
        #expect(tailBefore == shiftedAfter)
    }

    @Test func emptyAndTinyInputs() {
        #expect([UInt8]().withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) } == [])
        #expect(
            [UInt8](repeating: 7, count: 100).withUnsafeBytes {
                Chunker.chunkLengths(of: $0, configuration: smallChunks)
            } == [100])
    }

    @Test func invalidConfigurationsAreRefused() {
        let bad: [(Int, Int, Int)] = [
            (16, 1024, 4096), (256, 1000, 4096), (1024, 1024, 4096),
            (256, 1024, 1024), (256, 1024, 32 << 20), (-1, 1024, 4096)
        ]
        for (minimum, average, maximum) in bad {
            #expect(throws: XferError.self) {
                try ChunkerConfiguration(minimumSize: minimum, averageSize: average, maximumSize: maximum)
            }
        }
    }
}

@Suite struct ChunkerLaneTests {
    /// Limits whose hashed regions are longer than a round of the interleaved scan, so the
    /// four-lane path and its serial rescan both run.
    static let medium = try! ChunkerConfiguration(minimumSize: 2048, averageSize: 8192, maximumSize: 32768)

    @Test(arguments: [
        ("random", TestData.random(count: 192 << 10, seed: 61)),
        ("text", TestData.text(count: 192 << 10, seed: 62)),
        ("records", TestData.records(count: 192 << 10, seed: 63))
    ])
    func interleavedScanEqualsTheReference(name: String, data: [UInt8]) {
        let expected = referenceChunkLengths(data, Self.medium)
        #expect(
            data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: Self.medium) } == expected, "\(name)")
        let pieces = TestData.pieces(total: data.count, maxPiece: 9000, seed: 64)
        #expect(streamedChunkLengths(data, pieces: pieces, Self.medium) == expected, "\(name), streamed")
    }
}
