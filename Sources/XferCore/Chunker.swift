/// A streaming FastCDC chunker: Gear rolling hash, cut-point skipping and normalized chunking.
///
/// Feed it bytes in pieces of any size with ``nextBoundary(in:)``; the cut points depend only
/// on the bytes, never on how they were split. A chunk's length is the number of bytes up to
/// and including the byte whose hash matched (see docs/FORMAT.md for the exact rule).
public struct Chunker: Sendable {
    /// The size limits in use.
    public let configuration: ChunkerConfiguration
    private let minimumSize: Int
    private let averageSize: Int
    private let maximumSize: Int
    private let smallMask: UInt64
    private let largeMask: UInt64
    /// The Gear table: ``GearTable/values``, or a container's keyed one (``KeyedChunking``).
    private let gear: [UInt64]

    /// Bytes of the current chunk seen so far.
    public private(set) var pendingCount: Int = 0
    /// The Gear hash of the current chunk's bytes from `minimumSize - 64` on.
    private var hash: UInt64 = 0

    /// Bytes that contribute to the Gear hash: each step shifts it left by one bit, so a
    /// byte's contribution is gone 64 bytes later.
    public static let windowSize = 64

    /// Creates a chunker at the start of a stream.
    /// - Parameters:
    ///   - configuration: Chunk size limits.
    ///   - gear: The 256 values of the Gear table (a keyed container's own, ``KeyedChunking/gear``).
    public init(configuration: ChunkerConfiguration = .default, gear: [UInt64] = GearTable.values) {
        precondition(gear.count == 256, "a Gear table has 256 values")
        self.gear = gear
        self.configuration = configuration
        minimumSize = configuration.minimumSize
        averageSize = configuration.averageSize
        maximumSize = configuration.maximumSize
        smallMask = configuration.smallMask
        largeMask = configuration.largeMask
    }

    /// Scans `bytes` for the end of the current chunk.
    ///
    /// - Parameter bytes: The next bytes of the stream.
    /// - Returns: The number of bytes of `bytes` that complete the current chunk (the chunker
    ///   is then at the start of a new one), or `nil` if all of `bytes` belong to the current
    ///   chunk and it continues.
    public mutating func nextBoundary(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return nil }
        let input = base.assumingMemoryBound(to: UInt8.self)
        let count = bytes.count
        var index = 0

        // Cut-point skipping: bytes before `minimumSize - 64` are never hashed; the 64 bytes
        // before `minimumSize` only warm the hash up, so that from `minimumSize` on the hash
        // is a function of exactly the 64 bytes ending at the current one.
        let warmUpStart = minimumSize - Self.windowSize
        if pendingCount < warmUpStart {
            let skip = min(warmUpStart - pendingCount, count)
            pendingCount += skip
            index = skip
            if index == count { return nil }
        }
        return gear.withUnsafeBufferPointer { table -> Int? in
            let gear = table.baseAddress!
            var h = hash
            if pendingCount < minimumSize {
                let end = min(count, index + (minimumSize - pendingCount))
                for i in index..<end { h = (h &<< 1) &+ gear[Int(input[i])] }
                pendingCount += end - index
                index = end
                if index == count {
                    hash = h
                    return nil
                }
            }
            if pendingCount < averageSize {
                let end = min(count, index + (averageSize - pendingCount))
                if let cut = Self.scan(input, from: index, to: end, mask: smallMask, gear: gear, hash: &h) {
                    return finishChunk(at: cut)
                }
                pendingCount += end - index
                index = end
            }
            if index < count {
                let end = min(count, index + (maximumSize - pendingCount))
                if let cut = Self.scan(input, from: index, to: end, mask: largeMask, gear: gear, hash: &h) {
                    return finishChunk(at: cut)
                }
                pendingCount += end - index
                index = end
                if pendingCount == maximumSize { return finishChunk(at: index) }
            }
            hash = h
            return nil
        }
    }

    /// Ends the stream.
    /// - Returns: The length of the last chunk, or `nil` if no bytes are pending.
    public mutating func finish() -> Int? {
        defer { reset() }
        return pendingCount > 0 ? pendingCount : nil
    }

    /// Forgets the current chunk and starts afresh (as at the start of a new file).
    public mutating func reset() {
        pendingCount = 0
        hash = 0
    }

    private mutating func finishChunk(at end: Int) -> Int {
        reset()
        return end
    }

    /// Bytes per lane in one round of the interleaved scan.
    static let laneLength = 1024

    /// The Gear loop: `h = (h << 1) + gear[byte]`, a cut after the first byte where
    /// `h & mask == 0`.
    ///
    /// The rolling hash is a chain of dependent additions, one per byte, so a plain loop runs
    /// at one byte per cycle at best. Because the hash after a byte depends only on the 64
    /// bytes ending there, a round of `4 * laneLength` bytes is split into four lanes hashed
    /// in one interleaved loop (lanes 1–3 warm up on the 64 bytes before their start); the
    /// four independent chains keep the core's ports busy. A round in which any lane matches
    /// is scanned again by the plain loop, which finds the first match exactly.
    ///
    /// - Returns: The index just past the matching byte, or `nil` if none in `start..<end`.
    @inline(__always)
    private static func scan(
        _ input: UnsafePointer<UInt8>, from start: Int, to end: Int, mask: UInt64,
        gear: UnsafePointer<UInt64>, hash h: inout UInt64
    ) -> Int? {
        var i = start
        let lane = laneLength
        while end &- i >= 4 &* lane {
            if let lastHash = scanRound(input, at: i, lane: lane, mask: mask, gear: gear, hash: h) {
                h = lastHash
                i &+= 4 &* lane
            } else {
                return scanSerially(input, from: i, to: i &+ 4 &* lane, mask: mask, gear: gear, hash: &h)
            }
        }
        return scanSerially(input, from: i, to: end, mask: mask, gear: gear, hash: &h)
    }

    /// Hashes four lanes of `lane` bytes from `start` at once.
    /// - Returns: The hash after the round's last byte, or `nil` if some byte matched `mask`.
    @inline(__always)
    private static func scanRound(
        _ input: UnsafePointer<UInt8>, at start: Int, lane: Int, mask: UInt64,
        gear: UnsafePointer<UInt64>, hash: UInt64
    ) -> UInt64? {
        let p0 = input + start
        let p1 = p0 + lane
        let p2 = p1 + lane
        let p3 = p2 + lane
        var h0 = hash
        var h1: UInt64 = 0
        var h2: UInt64 = 0
        var h3: UInt64 = 0
        var k = -windowSize
        while k < 0 {
            h1 = (h1 &<< 1) &+ gear[Int(p1[k])]
            h2 = (h2 &<< 1) &+ gear[Int(p2[k])]
            h3 = (h3 &<< 1) &+ gear[Int(p3[k])]
            k &+= 1
        }
        var t = 0
        while t < lane {
            h0 = (h0 &<< 1) &+ gear[Int(p0[t])]
            h1 = (h1 &<< 1) &+ gear[Int(p1[t])]
            h2 = (h2 &<< 1) &+ gear[Int(p2[t])]
            h3 = (h3 &<< 1) &+ gear[Int(p3[t])]
            if (h0 & mask == 0) || (h1 & mask == 0) || (h2 & mask == 0) || (h3 & mask == 0) { return nil }
            t &+= 1
        }
        return h3
    }

    /// The plain loop, four bytes per step to keep the loop overhead off the dependency chain.
    @inline(__always)
    private static func scanSerially(
        _ input: UnsafePointer<UInt8>, from start: Int, to end: Int, mask: UInt64,
        gear: UnsafePointer<UInt64>, hash h: inout UInt64
    ) -> Int? {
        var i = start
        while i &+ 4 <= end {
            h = (h &<< 1) &+ gear[Int(input[i])]
            if h & mask == 0 { return i &+ 1 }
            h = (h &<< 1) &+ gear[Int(input[i &+ 1])]
            if h & mask == 0 { return i &+ 2 }
            h = (h &<< 1) &+ gear[Int(input[i &+ 2])]
            if h & mask == 0 { return i &+ 3 }
            h = (h &<< 1) &+ gear[Int(input[i &+ 3])]
            if h & mask == 0 { return i &+ 4 }
            i &+= 4
        }
        while i < end {
            h = (h &<< 1) &+ gear[Int(input[i])]
            if h & mask == 0 { return i &+ 1 }
            i &+= 1
        }
        return nil
    }
}

extension Chunker {
    /// The chunk lengths of a whole buffer, the last chunk included.
    /// - Parameters:
    ///   - bytes: The complete input.
    ///   - configuration: Chunk size limits.
    ///   - gear: The Gear table.
    /// - Returns: Chunk lengths in order; their sum is `bytes.count`.
    public static func chunkLengths(
        of bytes: UnsafeRawBufferPointer,
        configuration: ChunkerConfiguration = .default, gear: [UInt64] = GearTable.values
    ) -> [Int] {
        var chunker = Chunker(configuration: configuration, gear: gear)
        var lengths: [Int] = []
        var rest = bytes
        while let cut = chunker.nextBoundary(in: rest) {
            lengths.append(cut)  // each chunk starts at the start of `rest`
            rest = UnsafeRawBufferPointer(rebasing: rest[cut...])
        }
        if let last = chunker.finish() { lengths.append(last) }
        return lengths
    }
}
