import Testing

@testable import XferCore

/// Many messages hashed two at a time give SHA-256's digests, whatever their lengths and order.
@Suite struct SHA256LanesTests {
    /// Lengths around the padding's edges (55, 56, 63, 64 bytes a block) and chunk-sized ones,
    /// in batches of every size up to a few more than two lanes, against OpenSSL.
    @Test func digestsAreSHA256s() {
        var generator = SplitMix64(seed: 7)
        let edges = [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000, 4096]
        let sized = (0..<40).map { _ in Int(generator.next() % 300_000) }
        let lengths = edges + sized
        let bytes = (0..<((lengths.max()! + 1024) / 8)).flatMap { _ in
            withUnsafeBytes(of: generator.next()) { Array($0) }
        }
        bytes.withUnsafeBytes { raw in
            for batch in [1, 2, 3, 5, 17, lengths.count] {
                for start in stride(from: 0, to: lengths.count, by: batch) {
                    let messages = lengths[start..<min(start + batch, lengths.count)].enumerated().map {
                        offset, length in
                        UnsafeRawBufferPointer(rebasing: raw[(offset * 13)..<(offset * 13 + length)])
                    }
                    let ids = SHA256Lanes.ids(of: messages)
                    #expect(ids == messages.map { ChunkID.of(Array($0)) }, "batch \(batch) from \(start)")
                }
            }
        }
    }

    @Test func theVectorsOfFIPS180() {
        let abc = Array("abc".utf8)
        let long = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        let ids = abc.withUnsafeBytes { a in long.withUnsafeBytes { l in SHA256Lanes.ids(of: [a, l, a]) } }
        #expect(ids[0].description == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(ids[1].description == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(ids[2] == ids[0])
    }
}
