import Testing
import XferCore

/// Committed test vectors. They pin the chunk boundary and id format (docs/FORMAT.md): a
/// change that fails them moves boundaries and breaks dedup against every existing store.
/// Regenerate only for a new format version: `XFER_PRINT_VECTORS=1 swift test --filter VectorTests`.
@Suite struct VectorTests {
    struct Vector {
        var name: String
        var input: [UInt8]
        var config: ChunkerConfiguration
        /// Chunk lengths in order.
        var lengths: [Int]
        /// SHA-256 over the concatenated 32-byte ids of all chunks, and the first chunk's id.
        var idsDigest: String
        var firstID: String
    }

    static let medium = try! ChunkerConfiguration(minimumSize: 2048, averageSize: 8192, maximumSize: 32768)

    static func inputs() -> [(String, [UInt8], ChunkerConfiguration)] {
        [
            ("random-1MiB-default", TestData.random(count: 1 << 20, seed: 1), .default),
            ("random-256KiB-small", TestData.random(count: 256 << 10, seed: 2), smallChunks),
            ("text-512KiB-medium", TestData.text(count: 512 << 10, seed: 3), medium),
            ("records-512KiB-medium", TestData.records(count: 512 << 10, seed: 4), medium),
            ("zeros-600KiB-default", [UInt8](repeating: 0, count: 600 << 10), .default)
        ]
    }

    static func compute(_ input: [UInt8], _ config: ChunkerConfiguration) -> (
        lengths: [Int], digest: String, first: String
    ) {
        let lengths = input.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: config) }
        var offset = 0
        var all: [UInt8] = []
        for length in lengths {
            all += ChunkID.of(input[offset..<(offset + length)]).bytes
            offset += length
        }
        let first = ChunkID(bytes: all.prefix(32))!.hex
        return (lengths, ChunkID.of(all).hex, first)
    }

    @Test func gearTableIsPinned() {
        let table = GearTable.values
        #expect(table.count == 256)
        #expect(table[0] == Self.gearFirst)
        #expect(table[255] == Self.gearLast)
        let bytes = table.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } }
        #expect(ChunkID.of(bytes).hex == Self.gearDigest)
    }

    @Test func boundariesAndIdsArePinned() throws {
        let inputs = Self.inputs()
        if let flag = getenv("XFER_PRINT_VECTORS"), String(cString: flag) == "1" {
            let table = GearTable.values
            let bytes = table.flatMap { value in withUnsafeBytes(of: value.littleEndian) { Array($0) } }
            print("static let gearFirst: UInt64 = 0x\(String(table[0], radix: 16))")
            print("static let gearLast: UInt64 = 0x\(String(table[255], radix: 16))")
            print("static let gearDigest = \"\(ChunkID.of(bytes).hex)\"")
            for (name, input, config) in inputs {
                let (lengths, digest, first) = Self.compute(input, config)
                print("(\"\(name)\", \(lengths), \"\(digest)\", \"\(first)\"),")
            }
            return
        }
        #expect(inputs.count == Self.expected.count)
        for ((name, input, config), expected) in zip(inputs, Self.expected) {
            #expect(name == expected.0)
            let (lengths, digest, first) = Self.compute(input, config)
            #expect(lengths == expected.1, "\(name): boundaries moved")
            #expect(digest == expected.2, "\(name): chunk ids changed")
            #expect(first == expected.3, "\(name): first chunk id changed")
        }
    }
}

#if canImport(Glibc)
    import Glibc
#endif
