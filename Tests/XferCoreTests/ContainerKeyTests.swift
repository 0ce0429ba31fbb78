import Foundation
import Testing

@testable import XferCore

/// End-to-end keys (docs/FORMAT.md, "End-to-end keys"): derivation, the passphrase wrap, the
/// recovery key, sealed names, padding and keyed chunking.
@Suite struct ContainerKeyTests {
    // Pinned for the container key 00…1f; tools/suites/check-format.py recomputes each from the
    // document with Python's hashlib and `cryptography`.
    static let gear0 = "511b3e6a5807c202"
    static let chunkID = "4355084864e1938ed781fa1cb2098b082224f21b4cd7bdf4f79166e60fb1c129"
    static let name = "wqi2cu3dc2juu37ueubtwgdr4sytwng2527okzez5msxcei4vjiq"
    static let recovery = "000G4-0R40M-30E20-9185G-R38E1-W8124-GK2GA-HC5RR-34D1P-70X3R-FP638"
    static let wrapped =
        "584657310a0801000102030405060708090a0b0c0d0e0f5846533145b3d787653959e1101112131415161718191a1b1c1d1e1fa95c0c4aa78105ab443ff83d5da12ab309369be766a0c66a8ccec3652239fc59c56fe1e278f20bf066e9d3b440031d67"
    static let padme = "1,2,3,10,104,1024,65536,67584,1015808"
    static let wireID = "18ddba35d429550891c492dfcede495a3fd0e1ec53c286ed25a7e9c7ce4bb67c"
    static let sealedChunk =
        "4355084864e1938ed781fa1cb2098b082224f21b4cd7bdf4f79166e60fb1c129584653310fab79fe54e5023f202122232425262728292a2b2c2d2e2fe245d0ffb1283c2d4a2ddaa94975b74b38e2884c4b078c7c2668d5e8"

    static let key = try! ContainerKey(bytes: Array(0..<32))
    static let fast = try! ScryptParameters(logN: 10, r: 8, p: 1)

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { ChunkID.hexDigits($0) }.joined() }

    @Test func thePinnedVectorsHold() throws {
        let key = Self.key
        #expect(String(key.chunking.gear[0], radix: 16).leftPadded(16) == Self.gear0)
        #expect(key.chunking.id(of: Array("chunk".utf8)).hex == Self.chunkID)
        #expect(try key.names.seal("Notes.txt", parent: "Documents") == Self.name)
        #expect(key.recoveryText == Self.recovery)
        let wrapped = try ContainerKeyWrap.wrap(
            key, passphrase: "correct horse", container: "com.example.notes", parameters: Self.fast,
            salt: Array(0..<16), valueSalt: Array(16..<32))
        #expect(Self.hex(wrapped) == Self.wrapped)
        #expect(
            [1, 2, 3, 9, 100, 1000, 65536, 65537, 1_000_000].map { String(Padding.padme($0)) }.joined(separator: ",")
                == Self.padme)
        // A chunk sealed end to end ("End-to-end chunks"; salt 20…2f): its id, and the payload opens.
        let chunks = EndToEndChunks(key: key)
        #expect(Array("chunk".utf8).withUnsafeBytes { chunks.id(of: $0) }.hex == Self.wireID)
        let payload = Sealing.hexBytes(Self.sealedChunk)!
        let sealed = EncodedChunk(
            id: ChunkID(hex: Self.wireID)!, length: payload.count, encoding: .sealed, payload: payload)
        #expect(try chunks.open(sealed) == Array("chunk".utf8))
    }

    @Test func hkdfMatchesRFC5869() {
        // RFC 5869, test case 1.
        let okm = Crypto.hkdf(
            key: [UInt8](repeating: 0x0b, count: 22), salt: Array(0...12), info: Array(0xf0...0xf9), count: 42)
        #expect(Self.hex(okm) == "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865")
    }

    @Test func scryptMatchesRFC7914() throws {
        let out = try Crypto.scrypt(
            Array("pleaseletmein".utf8), salt: Array("SodiumChloride".utf8),
            parameters: ScryptParameters(logN: 14, r: 8, p: 1), count: 64)
        #expect(
            Self.hex(out)
                == "7023bdcb3afd7348461c06cd81fd38ebfda8fbba904f8e3ea9b543f6545da1f2d5432955613f0fcf62d49705242a9af9e61e85dc0d651e40dfcf017b45575887"
        )
    }

    @Test func eachPurposeHasItsOwnKey() {
        let labels = ["chunk id", "gear", "chunk", "manifest", "name", "kv key", "kv value", "key id"]
        let derived = labels.map { Self.key.derive($0) }
        #expect(Set(derived).count == labels.count)
        #expect(!derived.contains(Self.key.bytes))
        #expect(ContainerKey.generate() != ContainerKey.generate())
        #expect(!"\(Self.key)".contains(Self.hex(Self.key.bytes)) && "\(Self.key)".contains(Self.key.id))
    }

    @Test func aWrappedKeyOpensWithItsPassphraseAloneAndAChangeKeepsTheKey() throws {
        let key = ContainerKey.generate()
        let wrapped = try ContainerKeyWrap.wrap(
            key, passphrase: "correct horse", container: "notes", parameters: Self.fast)
        #expect(wrapped.count == ContainerKeyWrap.size)
        #expect(try ContainerKeyWrap.unwrap(wrapped, passphrase: "correct horse", container: "notes") == key)
        for (passphrase, container) in [
            ("correct horse ", "notes"), ("Correct horse", "notes"), ("correct horse", "notes2"), ("", "notes")
        ] {
            let refused = #expect(throws: XferError.self) {
                try ContainerKeyWrap.unwrap(wrapped, passphrase: passphrase, container: container)
            }
            #expect(refused?.code == .unauthorized, "\(passphrase) \(container)")
        }
        // A passphrase change wraps the same key anew: the old passphrase no longer opens it.
        let changed = try ContainerKeyWrap.wrap(
            try ContainerKeyWrap.unwrap(wrapped, passphrase: "correct horse", container: "notes"),
            passphrase: "battery staple", container: "notes", parameters: Self.fast)
        #expect(try ContainerKeyWrap.unwrap(changed, passphrase: "battery staple", container: "notes") == key)
        #expect(throws: XferError.self) {
            try ContainerKeyWrap.unwrap(changed, passphrase: "correct horse", container: "notes")
        }
        #expect(changed != wrapped, "a new salt each time")
        // The same passphrase typed composed or decomposed.
        let accented = try ContainerKeyWrap.wrap(
            key, passphrase: "caf\u{E9}", container: "notes", parameters: Self.fast)
        #expect(try ContainerKeyWrap.unwrap(accented, passphrase: "cafe\u{301}", container: "notes") == key)
    }

    @Test func everyFlippedByteOfAWrappedKeyIsRefused() throws {
        let wrapped = try ContainerKeyWrap.wrap(Self.key, passphrase: "pw", container: "c", parameters: Self.fast)
        for index in wrapped.indices {
            var damaged = wrapped
            damaged[index] ^= 0x01
            #expect(throws: XferError.self, "byte \(index)") {
                try ContainerKeyWrap.unwrap(damaged, passphrase: "pw", container: "c")
            }
        }
        #expect(throws: XferError.self) {
            try ContainerKeyWrap.unwrap(Array(wrapped.dropLast()), passphrase: "pw", container: "c")
        }
    }

    /// A hostile server's wrapped key cannot make a client spend unbounded memory or time: the
    /// parameters are refused before scrypt runs.
    @Test(arguments: [
        (UInt8(25), UInt8(8), UInt8(1)), (21, 8, 1), (20, 8, 1), (16, 8, 16), (16, 200, 1), (4, 8, 1), (16, 0, 1)
    ])
    func scryptParametersBeyondTheBoundsAreRefused(_ logN: UInt8, _ r: UInt8, _ p: UInt8) throws {
        var wrapped = try ContainerKeyWrap.wrap(Self.key, passphrase: "pw", container: "c", parameters: Self.fast)
        wrapped[4] = logN
        wrapped[5] = r
        wrapped[6] = p
        let refused = #expect(throws: XferError.self) {
            try ContainerKeyWrap.unwrap(wrapped, passphrase: "pw", container: "c")
        }
        #expect(refused?.code == .invalidConfiguration)
        #expect(ContainerKeyWrap.parameters(of: wrapped) == nil)
    }

    @Test func aRecoveryKeyReadsBackAndAMistypedOneIsRefused() throws {
        let key = ContainerKey.generate()
        let text = key.recoveryText
        #expect(text.count == 55 + 10)
        #expect(try ContainerKey(recoveryText: text) == key)
        // Typed loosely: lowercase, without dashes, O for 0 and l for 1.
        let loose = text.lowercased().replacingOccurrences(of: "-", with: " ").replacingOccurrences(of: "0", with: "o")
            .replacingOccurrences(of: "1", with: "l")
        #expect(try ContainerKey(recoveryText: loose) == key)
        // Every single mistyped character of the pinned key is caught.
        let digits = Array(Self.recovery)
        for index in digits.indices where digits[index] != "-" {
            var typo = digits
            typo[index] = typo[index] == "7" ? "8" : "7"
            #expect(throws: XferError.self, "position \(index)") { try ContainerKey(recoveryText: String(typo)) }
        }
        #expect(throws: XferError.self) { try ContainerKey(recoveryText: String(text.dropLast())) }
        #expect(throws: XferError.self) {
            try ContainerKey(
                recoveryText: text.replacingOccurrences(of: "-", with: "U", options: [], range: text.range(of: "-")))
        }
    }

    @Test func namesSealDeterministicallyPerFolderAndOpenOnlyThere() throws {
        let names = Self.key.names
        let sealed = try names.seal("Report 2026 — final.txt", parent: "Documents/work")
        #expect(try names.seal("Report 2026 — final.txt", parent: "Documents/work") == sealed)
        #expect(try names.open(sealed, parent: "Documents/work") == "Report 2026 — final.txt")
        #expect(sealed.utf8.allSatisfy { Base32.alphabet.contains($0) })
        // Another folder: another sealed name, and this one does not open there.
        #expect(try names.seal("Report 2026 — final.txt", parent: "Documents/home") != sealed)
        #expect(throws: XferError.self) { try names.open(sealed, parent: "Documents/home") }
        // Another container's key does not open it either.
        #expect(throws: XferError.self) { try ContainerKey.generate().names.open(sealed, parent: "Documents/work") }
        // Every changed character is refused.
        for index in sealed.indices {
            var changed = sealed
            changed.replaceSubrange(index...index, with: sealed[index] == "a" ? "b" : "a")
            #expect(throws: XferError.self) { try names.open(changed, parent: "Documents/work") }
        }
        // Lengths show only in steps of 16 bytes; the longest name fits a 255-byte component.
        let short = try (0...15).map { try names.seal(String(repeating: "x", count: $0), parent: "").count }
        #expect(Set(short).count == 1)
        let longest = try names.seal(String(repeating: "é", count: 63) + "x", parent: "")
        #expect(longest.utf8.count <= 255)
        #expect(try names.open(longest, parent: "") == String(repeating: "é", count: 63) + "x")
        let tooLong = #expect(throws: XferError.self) { try names.seal(String(repeating: "x", count: 128), parent: "") }
        #expect(tooLong?.code == .invalidPath)
    }

    @Test func padmeAddsAtMostTwelvePercentAndUnpads() {
        var generator = SplitMix64(seed: 9)
        for length in Array(0...4096) + (0..<2000).map({ _ in Int(generator.next() % (64 << 20)) }) {
            let padded = Padding.padme(length)
            #expect(padded >= length && Double(padded) <= Double(length) * 1.12 + 1, "\(length) -> \(padded)")
        }
        for length in [0, 1, 15, 16, 17, 1000, 70_000] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next() | 1) }
            let padded = Padding.padme(bytes)
            #expect(padded.count == Padding.padme(length + 1))
            #expect(Padding.unblock(padded) == bytes)
            #expect(Padding.unblock(Padding.block(bytes, multiple: 16)) == bytes)
        }
        #expect(Padding.unblock([1, 2, 0, 0]) == nil)
    }

    @Test func keyedChunkingCutsAndNamesChunksTheUnkeyedChunkerCannotPredict() throws {
        let data = TestData.random(count: 4 << 20, seed: 31)
        let configuration = ChunkerConfiguration.default
        let keyed = Self.key.chunking
        #expect(keyed.gear != GearTable.values)
        let plainLengths = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: configuration) }
        let keyedLengths = data.withUnsafeBytes {
            Chunker.chunkLengths(of: $0, configuration: configuration, gear: keyed.gear)
        }
        #expect(keyedLengths.reduce(0, +) == data.count)
        #expect(
            keyedLengths.dropLast().allSatisfy { (configuration.minimumSize...configuration.maximumSize).contains($0) })
        // Cut points differ: the lengths are not the unkeyed chunker's.
        var plainCuts = Set<Int>()
        var keyedCuts = Set<Int>()
        var offset = 0
        for length in plainLengths.dropLast() {
            offset += length
            plainCuts.insert(offset)
        }
        offset = 0
        for length in keyedLengths.dropLast() {
            offset += length
            keyedCuts.insert(offset)
        }
        #expect(plainCuts.intersection(keyedCuts).count < keyedCuts.count / 10)
        // Another key cuts elsewhere again; the same key always the same.
        let other = data.withUnsafeBytes {
            Chunker.chunkLengths(of: $0, configuration: configuration, gear: ContainerKey.generate().chunking.gear)
        }
        #expect(other != keyedLengths)
        #expect(
            data.withUnsafeBytes {
                Chunker.chunkLengths(of: $0, configuration: configuration, gear: Self.key.chunking.gear)
            } == keyedLengths)
        // Fed in odd pieces, the keyed chunker cuts in the same places.
        var chunker = Chunker(configuration: configuration, gear: keyed.gear)
        var pieces: [Int] = []
        var pending = 0
        var start = 0
        var piece = 1
        while start < data.count {
            let end = min(data.count, start + piece)
            var rest = start
            while rest < end, let cut = data[rest..<end].withUnsafeBytes({ chunker.nextBoundary(in: $0) }) {
                pieces.append(pending + cut)
                pending = 0
                rest += cut
            }
            pending += end - rest
            start = end
            piece = piece * 7 % 100_003 + 1
        }
        if let last = chunker.finish() { pieces.append(last) }
        #expect(pieces == keyedLengths)
        // Ids are keyed: not the SHA-256 of the bytes, and another key's differ.
        let chunk = Array(data.prefix(keyedLengths[0]))
        #expect(keyed.id(of: chunk) != ChunkID.of(chunk))
        #expect(keyed.id(of: chunk) != ContainerKey.generate().chunking.id(of: chunk))
        #expect(keyed.id(of: chunk) == Self.key.chunking.id(of: chunk))
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
