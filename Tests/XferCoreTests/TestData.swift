import XferCore

/// Seeded, reproducible inputs for tests and vectors.
enum TestData {
    /// `count` pseudo-random bytes from SplitMix64(seed), eight bytes per output, little-endian.
    static func random(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + 8)
        while bytes.count < count {
            withUnsafeBytes(of: generator.next().littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    /// Text that looks like prose: words from a fixed list, picked by SplitMix64(seed),
    /// with punctuation and line breaks.
    static func text(count: Int, seed: UInt64) -> [UInt8] {
        let words = [
            "the", "chunk", "of", "a", "file", "is", "named", "by", "its", "hash", "and", "stored",
            "once", "sync", "between", "devices", "through", "server", "sends", "only", "what",
            "changed", "version", "document", "package", "manifest", "boundary", "content", "defined",
            "rolling", "gear", "table", "window", "minimum", "average", "maximum", "size", "zstd",
            "compressed", "verified", "atomic", "rename", "fsync", "directory", "tree", "metadata"
        ]
        var generator = SplitMix64(seed: seed)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + 32)
        var column = 0
        while bytes.count < count {
            let r = generator.next()
            bytes.append(contentsOf: words[Int(r % UInt64(words.count))].utf8)
            column += 1
            switch (r >> 32) % 23 {
            case 0: bytes.append(contentsOf: ". ".utf8)
            case 1: bytes.append(contentsOf: ", ".utf8)
            default: bytes.append(0x20)
            }
            if column > 11 && (r >> 40) % 4 == 0 {
                bytes.append(0x0A)
                column = 0
            }
        }
        return Array(bytes.prefix(count))
    }

    /// Binary that looks like a database or log file: 64-byte records with a magic, a
    /// counter, a slowly changing timestamp, a small random field and zero padding.
    static func records(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var bytes = [UInt8]()
        bytes.reserveCapacity(count + 64)
        var counter: UInt64 = 0
        var timestamp: UInt64 = 1_700_000_000_000
        while bytes.count < count {
            let r = generator.next()
            bytes.append(contentsOf: Array("XREC".utf8))
            withUnsafeBytes(of: counter.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: timestamp.littleEndian) { bytes.append(contentsOf: $0) }
            withUnsafeBytes(of: (r & 0xFFFF_FFFF).littleEndian) { bytes.append(contentsOf: $0) }
            bytes.append(contentsOf: repeatElement(0, count: 36))
            counter += 1
            timestamp += r >> 60
        }
        return Array(bytes.prefix(count))
    }

    /// Splits `count` into random piece sizes in 1...maxPiece.
    static func pieces(total count: Int, maxPiece: Int, seed: UInt64) -> [Int] {
        var generator = SplitMix64(seed: seed)
        var sizes: [Int] = []
        var left = count
        while left > 0 {
            let size = min(left, 1 + Int(generator.next() % UInt64(maxPiece)))
            sizes.append(size)
            left -= size
        }
        return sizes
    }
}

/// Small limits so that short inputs have many chunks.
let smallChunks = try! ChunkerConfiguration(minimumSize: 256, averageSize: 1024, maximumSize: 4096)
