import Foundation
import Testing

@testable import XferCore

/// Chunks of an end-to-end encrypted container (``EndToEndChunks``, docs/FORMAT.md,
/// "End-to-end chunks"): sealed by a client, checked by the server without the key, opened
/// and checked again by a client.
@Suite struct EndToEndChunksTests {
    static let chunks = EndToEndChunks(key: ContainerKeyTests.key)

    static func seal(_ plain: [UInt8]) throws -> EncodedChunk {
        try plain.withUnsafeBytes { try chunks.seal($0) }
    }

    /// Whether `needle` occurs anywhere in `haystack`.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }

    @Test(arguments: [0, 1, 100, 4_096, 65_536, 262_144])
    func aSealedChunkOpensToItsBytesAndTheServerCanCheckIt(size: Int) throws {
        for plain in [TestData.text(count: size, seed: 1), TestData.random(count: size, seed: 2)] {
            let sealed = try Self.seal(plain)
            #expect(sealed.encoding == .sealed && sealed.length == sealed.payload.count)
            #expect(sealed.id == plain.withUnsafeBytes { Self.chunks.id(of: $0) })
            #expect(sealed.payload.count <= EndToEndChunks.maximumPayload(plain: size))
            // What the server does, with no key: the binding holds, the bytes come back as they are.
            #expect(try sealed.decoded(maximumLength: 262_144) == sealed.payload)
            #expect(try Self.chunks.open(sealed) == plain)
        }
    }

    @Test func theIdIsTheSameEachTimeAndThePayloadIsNot() throws {
        let plain = TestData.text(count: 10_000, seed: 3)
        let first = try Self.seal(plain)
        let second = try Self.seal(plain)
        #expect(first.id == second.id)
        #expect(first.payload != second.payload)
        #expect(try Self.chunks.open(second) == plain)
    }

    @Test func nothingOfThePlainBytesShows() throws {
        let marker = Array("a line of the secret plan, written out plainly".utf8)
        let plain = Array((0..<200).flatMap { _ in marker })
        let sealed = try Self.seal(plain)
        #expect(!Self.contains(sealed.payload, Array(marker.prefix(16))))
        #expect(sealed.id != ChunkID.of(plain))
        #expect(!Self.contains(sealed.payload, ChunkID.of(plain).bytes))
        // Compressed before it is sealed: 9,400 bytes of repeated text take far fewer.
        #expect(sealed.payload.count < 1_000)
    }

    @Test func lengthsArePaddedSoNeighbouringSizesLookAlike() throws {
        var lengths: Set<Int> = []
        for size in 1_000...1_100 {
            lengths.insert(try Self.seal(TestData.random(count: size, seed: UInt64(size))).payload.count)
        }
        #expect(lengths.count <= 3)
    }

    @Test func anyByteChangedIsRefused() throws {
        let plain = TestData.text(count: 5_000, seed: 4)
        let sealed = try Self.seal(plain)
        // The keyed id, the seal's header, its salt, the ciphertext, the tag.
        for position in [
            0, 31, 32, 40, 60, 80, sealed.payload.count / 2, sealed.payload.count - 17, sealed.payload.count - 1
        ] {
            var damaged = sealed
            damaged.payload[position] ^= 0x01
            #expect(throws: XferError.self) { try Self.chunks.open(damaged) }
        }
        var shorter = sealed
        shorter.payload.removeLast()
        shorter.length -= 1
        #expect(throws: XferError.self) { try Self.chunks.open(shorter) }
    }

    @Test func anotherContainersKeyOpensNothing() throws {
        let sealed = try Self.seal(TestData.text(count: 3_000, seed: 5))
        let other = EndToEndChunks(key: ContainerKey.generate())
        #expect(throws: XferError.self) { try other.open(sealed) }
    }

    @Test func aSealedFrameCannotTakeAPlainChunksId() throws {
        let plain = TestData.text(count: 3_000, seed: 6)
        var forged = try Self.seal(TestData.text(count: 3_000, seed: 7))
        forged.id = ChunkID.of(plain)
        #expect(throws: XferError.self) { try forged.decoded() }
        // Nor a payload too short to hold a keyed id and a seal.
        let stub = EncodedChunk(
            id: EndToEndChunks.id(keyed: [UInt8](repeating: 0, count: 32)), length: 40, encoding: .sealed,
            payload: [UInt8](repeating: 0, count: 40))
        #expect(throws: XferError.self) { try stub.decoded() }
    }

    @Test func noPlainChunkTakesASealedChunksId() throws {
        let sealed = try Self.seal(TestData.text(count: 3_000, seed: 10))
        let preimage = Array("xfer e2e chunk id v1".utf8) + sealed.payload[0..<32]
        #expect(ChunkID.of(preimage) == sealed.id)
        let plain = EncodedChunk(id: sealed.id, length: preimage.count, encoding: .raw, payload: preimage)
        #expect(throws: XferError.self) { try plain.decoded() }
    }

    @Test func aPlainChunkIsNotTakenForASealedOne() throws {
        let plain = TestData.text(count: 3_000, seed: 8)
        let whole = try plain.withUnsafeBytes { try Zstd.encode($0, id: Self.chunks.id(of: $0)) }
        #expect(throws: XferError.self) { try Self.chunks.open(whole) }
    }

    @Test func aDeclaredLengthOverTheLimitIsRefusedBeforeInflating() throws {
        let sealed = try Self.seal(TestData.text(count: 200_000, seed: 9))
        let error = #expect(throws: XferError.self) { try Self.chunks.open(sealed, maximumLength: 100_000) }
        #expect(error?.code == .tooLarge)
    }
}
