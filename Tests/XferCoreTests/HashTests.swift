import Testing
import XferCore

@Suite struct HashTests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        (
            "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        )
    ])
    func knownDigests(input: String, hex: String) {
        #expect(ChunkID.of(Array(input.utf8)).hex == hex)
    }

    @Test func millionAs() {
        #expect(
            ChunkID.of([UInt8](repeating: 0x61, count: 1_000_000)).hex
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func incrementalEqualsOneShot() {
        let data = TestData.random(count: 100_000, seed: 3)
        var hasher = SHA256Hasher()
        var offset = 0
        for size in TestData.pieces(total: data.count, maxPiece: 4000, seed: 4) {
            data[offset..<(offset + size)].withUnsafeBytes { hasher.update($0) }
            offset += size
        }
        #expect(hasher.finalize() == ChunkID.of(data))
        // After finalize the hasher starts afresh.
        #expect(hasher.finalize() == ChunkID.of([UInt8]()))
    }

    @Test func hexRoundTripAndRejects() {
        let id = ChunkID.of(Array("xfer".utf8))
        #expect(ChunkID(hex: id.hex) == id)
        #expect(ChunkID(hex: id.hex.uppercased()) == id)
        #expect(ChunkID(bytes: id.bytes) == id)
        #expect(ChunkID(hex: String(id.hex.dropLast())) == nil)
        #expect(ChunkID(hex: id.hex + "0") == nil)
        #expect(ChunkID(hex: "g" + id.hex.dropFirst()) == nil)
        #expect(ChunkID(bytes: [UInt8](repeating: 0, count: 31)) == nil)
        #expect(ChunkID(hex: String(repeating: "0", count: 64))! < id)
    }
}

@Suite struct ByteCountTests {
    @Test(arguments: [
        ("0", 0), ("65536", 65536), ("64K", 65536), ("64KiB", 65536), ("64kb", 65536),
        ("1.5M", 1_572_864), ("2 GiB", 2 << 30), ("1t", 1 << 40), ("12b", 12)
    ])
    func parses(text: String, bytes: Int64) {
        #expect(ByteCount(parsing: text)?.value == bytes)
    }

    @Test(arguments: ["", "K", "-1", "1X", "1.2.3", "99999999P"])
    func rejects(text: String) {
        #expect(ByteCount(parsing: text) == nil)
    }

    @Test func prints() {
        #expect(ByteCount(512).description == "512 B")
        #expect(ByteCount(65536).description == "64.0 KiB")
        #expect(ByteCount(1_610_612_736).description == "1.50 GiB")
        #expect(ByteCount(1 << 20).description == "1.00 MiB")
    }
}

@Suite struct SplitMix64Tests {
    /// The reference implementation's first output for seed 0 (Vigna's splitmix64.c).
    @Test func matchesTheReference() {
        var generator = SplitMix64(seed: 0)
        #expect(generator.next() == 0xE220_A839_7B1D_CDAF)
        #expect(generator.next() == 0x6E78_9E6A_A1B9_65F4)
    }

    /// The server locks chunk rows in `<` order and a manifest writes ids word by word: both
    /// rely on `<` being the order of the ids' bytes, and on the words being those bytes.
    @Test func idOrderIsTheBytesOrder() {
        let ids = (0..<500).map { ChunkID.of([UInt8($0 % 256), UInt8($0 / 256)]) }
        #expect(ids.sorted() == ids.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) })
        for id in ids.prefix(20) {
            #expect(ChunkID(bytes: id.bytes) == id)
            #expect(id.withUnsafeBytes { Array($0) }.map(ChunkID.hexDigits).joined() == id.hex)
        }
    }
}
