import Foundation
import Testing

@testable import XferCore

@Suite("Sealing at rest")
struct SealingTests {
    static let context = Array("test context".utf8)

    @Test("a sealed value opens to what was sealed, 44 bytes longer, different each time")
    func sealedValuesRoundTrip() throws {
        let keys = try SealingKeys([SealingKey.generate()])
        for size in [0, 1, 15, 16, 17, 1000, 70_000] {
            let plain = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let sealed = keys.seal(plain, context: Self.context)
            #expect(sealed.count == plain.count + Sealing.overhead)
            #expect(Sealing.isSealed(sealed))
            #expect(Sealing.keyID(of: sealed) == keys.current.id)
            #expect(try keys.open(sealed, context: Self.context, what: "value") == plain)
            // Appended to what is there (a pack being built), the value is the same length and opens from its slice.
            var pack: [UInt8] = [9, 9, 9]
            keys.seal(plain, context: Self.context, appendingTo: &pack)
            #expect(pack.prefix(3) == [9, 9, 9] && pack.count == 3 + sealed.count)
            #expect(try keys.open(pack[3...], context: Self.context, what: "value") == plain)
            // A fresh salt each time: the same value never seals to the same bytes.
            #expect(keys.seal(plain, context: Self.context) != sealed)
            if size >= 16 {
                // The plain bytes do not show through.
                #expect(Data(sealed).range(of: Data(plain.prefix(16))) == nil)
            }
        }
    }

    @Test("every flipped byte is refused: the key id as an unknown key (a server-side fault), anything else by the tag")
    func everyFlippedByteIsRefused() throws {
        let keys = try SealingKeys([SealingKey.generate()])
        let sealed = keys.seal(Array("a value worth keeping".utf8), context: Self.context)
        for index in sealed.indices {
            var damaged = sealed
            damaged[index] ^= 0x40
            let error = #expect(throws: XferError.self) { try keys.open(damaged, context: Self.context, what: "value") }
            if (4..<12).contains(index) {
                #expect(error?.code == .internal)
            } else {
                #expect(error?.code == .corruptChunk)
            }
        }
        // Cut short, or sealed for another place.
        #expect(throws: XferError.self) { try keys.open(sealed.dropLast(), context: Self.context, what: "value") }
        let moved = #expect(throws: XferError.self) {
            try keys.open(sealed, context: Array("elsewhere".utf8), what: "value")
        }
        #expect(moved?.code == .corruptChunk)
    }

    @Test("a rotated key still opens what it sealed; without it the error names its id")
    func rotation() throws {
        let old = SealingKey.generate()
        let new = SealingKey.generate()
        #expect(old.id != new.id)
        let sealedOld = try SealingKeys([old]).seal(Array("before".utf8), context: Self.context)
        let rotated = try SealingKeys([new, old])
        #expect(rotated.current.id == new.id)
        #expect(try rotated.open(sealedOld, context: Self.context, what: "value") == Array("before".utf8))
        #expect(Sealing.keyID(of: rotated.seal([1, 2, 3], context: Self.context)) == new.id)
        let missing = #expect(throws: XferError.self) {
            try SealingKeys([new]).open(sealedOld, context: Self.context, what: "value")
        }
        #expect(missing?.message.contains(old.id.description) == true)
        // Plain values pass through openIfSealed; sealed ones need keys.
        #expect(
            try SealingKeys.openIfSealed(Array("XFM plain".utf8)[...], keys: nil, context: Self.context, what: "v")
                == Array("XFM plain".utf8)[...])
        #expect(throws: XferError.self) {
            try SealingKeys.openIfSealed(sealedOld[...], keys: nil, context: Self.context, what: "v")
        }
        #expect(
            try SealingKeys.openIfSealed(sealedOld[...], keys: rotated, context: Self.context, what: "v")
                == Array("before".utf8)[...])
    }

    /// docs/FORMAT.md "Sealed values", pinned; tools/suites/check-format.py recomputes both from the
    /// document with Python's `cryptography`, so the document, this code and the vector agree.
    static let vectorSealed =
        "58465331834b72bc720790016465666768696a6b6c6d6e6f70717273b421072747bbf6645f7a37c5bf40b7e518181dcbd3ca8a9c5ad67caa3957822e3ee783546f17efe5a11a5fdfc3"
    static let vectorChunkName = "c611af8aa4bdc882147328fdbfae3fc39731c78b812c6f9f4c8c5b891d7ee752"

    @Test("the sealed-value vector: key 00…1f, salt 64…73, the manifest of version 3 of document 7")
    func knownAnswer() throws {
        let key = try SealingKey(bytes: Array(0..<32))
        let plain = Array("xfer sealed value test vector".utf8)
        var sealed: [UInt8] = []
        plain.withUnsafeBytes {
            Sealing.seal(
                $0, key: key, salt: Array(100..<116), context: Sealing.manifestContext(document: 7, version: 3),
                appendingTo: &sealed)
        }
        #expect(sealed.map { ChunkID.hexDigits($0) }.joined() == Self.vectorSealed)
        #expect(
            try SealingKeys([key]).open(sealed, context: Sealing.manifestContext(document: 7, version: 3), what: "v")
                == plain)
        #expect(key.name(of: ChunkID.of(Array("chunk".utf8))).hex == Self.vectorChunkName)
    }

    @Test("a key's id and chunk names come from the key alone")
    func idsAndNamesAreKeyed() throws {
        let bytes = [UInt8](repeating: 7, count: 32)
        let key = try SealingKey(bytes: bytes)
        #expect(try SealingKey(bytes: bytes).id == key.id)
        let id = ChunkID.of(Array("chunk".utf8))
        #expect(key.name(of: id) == (try SealingKey(bytes: bytes)).name(of: id))
        #expect(key.name(of: id) != id)
        #expect(SealingKey.generate().name(of: id) != key.name(of: id))
        #expect(SealingKeyID(hex: key.id.description) == key.id)
        #expect(throws: XferError.self) { try SealingKey(bytes: [1, 2, 3]) }
    }

    @Test("key text: one key a line, comments skipped, the first current; bad lines named")
    func keyText() throws {
        let a = SealingKey.generate()
        let b = SealingKey.generate()
        let keys = try SealingKeys.parse("# comment\n\n\(a.hex)\n  \(b.hex.uppercased())  \n", source: "f")
        #expect(keys.map(\.id) == [a.id, b.id])
        let short = #expect(throws: XferError.self) { try SealingKeys.parse("# c\n\(a.hex)\nabc\n", source: "f") }
        #expect(short?.message.contains("f, line 3") == true)
        #expect(throws: XferError.self) { try SealingKeys.parse("# only a comment\n", source: "f") }
        #expect(try SealingKeys.parse(SealingKeys.keyFileText(a), source: "f").map(\.id) == [a.id])
    }

    @Test("key files: read in order before the environment's keys; one others may read is refused")
    func keyFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-keys-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = SealingKey.generate()
        let b = SealingKey.generate()
        let file = directory + "/key"
        try Data(SealingKeys.keyFileText(a).utf8).write(to: URL(fileURLWithPath: file))
        chmod(file, 0o600)
        let loaded = try #require(try SealingKeys.load(files: [file], environment: b.hex))
        #expect(loaded.current.id == a.id)
        #expect(loaded.ids.sorted() == [a.id, b.id].sorted())
        #expect(try SealingKeys.load(files: [], environment: nil) == nil)
        #expect(try SealingKeys.load(files: [], environment: b.hex)?.current.id == b.id)
        chmod(file, 0o644)
        let open = #expect(throws: XferError.self) { try SealingKeys.load(files: [file], environment: nil) }
        #expect(open?.message.contains("chmod 600") == true)
        #expect(throws: XferError.self) { try SealingKeys.load(files: [directory + "/none"], environment: nil) }
    }

    /// Chunk ids as a sealed store keeps them: the same id always the same bytes, read back to
    /// the id, unlike the id's own bytes, another key's unlike; and the same from many threads
    /// at once.
    @Test func chunkIDsEncipherDeterministicallyAndBackFromAnyThread() throws {
        let cipher = try ChunkIDCipher(key: Array(0..<32))
        let other = try ChunkIDCipher(key: Array(1...32))
        let ids = (0..<2_000).map { ChunkID.of(Array("id \($0)".utf8)) }
        let stored = ids.map(cipher.encipher)
        #expect(Set(stored).count == ids.count)
        for (id, bytes) in zip(ids, stored) {
            #expect(bytes != id.bytes && bytes.count == 32)
            #expect(cipher.decipher(bytes) == id)
            #expect(other.encipher(id) != bytes)
        }
        #expect(cipher.decipher([1, 2, 3]) == nil)
        let mismatches = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { lane in
            var wrong = 0
            for round in 0..<5 {
                for index in stride(from: (lane + round) % 8, to: ids.count, by: 8) {
                    if cipher.encipher(ids[index]) != stored[index] || cipher.decipher(stored[index]) != ids[index] {
                        wrong += 1
                    }
                }
            }
            mismatches.withLock { $0 += wrong }
        }
        #expect(mismatches.value == 0)
    }

    /// A transaction's contexts give what the cipher gives, many ids in one call or one at a
    /// time, and one set of them shared by threads at once gives the same.
    @Test func contextsMadeOnceGiveTheSameBytesBatchedAndShared() throws {
        let cipher = try ChunkIDCipher(key: Array(0..<32))
        let ids = (0..<1_000).map { ChunkID.of(Array("id \($0)".utf8)) }
        let stored = ids.map(cipher.encipher)
        let contexts = cipher.contexts()
        #expect(contexts.encipher(ids) == stored)
        #expect(contexts.encipher([]) == [])
        #expect(contexts.encipher([ids[7]]) == [stored[7]])
        #expect(stored.map(contexts.decipher) == ids)
        #expect(contexts.decipher(Array(repeating: 0, count: 31)) == nil)
        let mismatches = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 8) { lane in
            var wrong = 0
            for round in 0..<5 {
                let batch = Array(stride(from: (lane + round) % 8, to: ids.count, by: 8))
                if contexts.encipher(batch.map { ids[$0] }) != batch.map({ stored[$0] }) { wrong += 1 }
                for index in batch where contexts.decipher(stored[index]) != ids[index] { wrong += 1 }
            }
            mismatches.withLock { $0 += wrong }
        }
        #expect(mismatches.value == 0)
    }
}
