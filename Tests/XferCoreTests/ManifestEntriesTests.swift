import Testing

@testable import XferCore

/// The packed entries (``Manifest/Entries``) and the builder that fills them.
@Suite struct ManifestEntriesTests {
    @Test func eachEntryReadsBackAsItWasGiven() throws {
        let manifest = try ManifestTests.sample()
        let given = try ManifestTests.sample().entries.map { $0 }  // materialized
        let entries = manifest.entries
        #expect(entries.count == 5)
        for index in entries.indices {
            let entry = entries[index]
            #expect(entry == given[index])
            #expect(entries.path(at: index) == entry.path)
            #expect(Array(entries.pathBytes(at: index)) == Array(entry.path.utf8))
            #expect(entries.kind(at: index) == entry.kind)
            #expect(entries.mode(at: index) == entry.mode)
            #expect(entries.mtimeNanoseconds(at: index) == entry.mtimeNanoseconds)
            #expect(entries.symlinkTarget(at: index) == entry.symlinkTarget)
            #expect(Array(entries.chunks(at: index)) == entry.chunks)
            #expect(Array(entries.chunks(at: index).chunkIDs) == entry.chunks.map(\.id))
            #expect(entries.size(at: index) == entry.size)
        }
        // The chunks of "b.txt", the last entry, lie past those of "a.txt" in the shared list,
        // and are read from 0 all the same.
        let last = entries.chunks(at: 4)
        #expect(last.startIndex == 0 && last.count == 2)
        #expect(last[0].length == 70000 && last[1].length == 1)
        #expect(Array(Manifest.Chunks(entries[4].chunks)) == entries[4].chunks)
        #expect(manifest.allChunks.map(\.length) == [262144, 70000, 1])
        #expect(manifest.fileCount == 4)
    }

    @Test func theBuilderMakesWhatEntriesMake() throws {
        let manifest = try ManifestTests.sample()
        var builder = Manifest.Builder(kind: .package, chunker: .default)
        for entry in manifest.entries {
            builder.append(
                path: entry.path.utf8, kind: entry.kind, mode: entry.mode, mtimeNanoseconds: entry.mtimeNanoseconds,
                symlinkTarget: entry.symlinkTarget)
            builder.appendChunks(entry.chunks)
        }
        let built = try builder.finish()
        #expect(built == manifest)
        #expect(built.encoded() == manifest.encoded())
        #expect(built.hashValue == manifest.hashValue)
    }

    @Test func theBuilderRefusesEntriesOutOfOrderOrRepeated() throws {
        for paths in [["b", "a"], ["a", "a"]] {
            var builder = Manifest.Builder(kind: .package, chunker: .default)
            for path in paths { builder.append(path: path.utf8, kind: .file, mode: 0o644, mtimeNanoseconds: 0) }
            let error = #expect(throws: XferError.self) { try builder.finish() }
            #expect(error?.code == .invalidManifest)
        }
    }

    @Test func aModeOrAChunkOutOfBoundsIsRefusedNotWrapped() throws {
        // Stored as they are given, so the check sees the values a caller gave.
        var builder = Manifest.Builder(kind: .file, chunker: .default)
        builder.append(path: [], kind: .file, mode: 0o10644, mtimeNanoseconds: 0)
        #expect(throws: XferError.self) { try builder.finish() }
        var large = Manifest.Builder(kind: .file, chunker: .default)
        large.append(path: [], kind: .file, mode: 0o644, mtimeNanoseconds: 0)
        large.appendChunk(.init(id: ChunkID.of([1]), length: (1 << 32) + 1))
        #expect(throws: XferError.self) { try large.finish() }
    }

    @Test func aParentIsFoundAmongEntriesThatSortBetween() throws {
        // "a/b" is followed by "a/b-x" before "a/b/c" in bytewise order ("-" < "/"): the parent
        // of "a/b/c" is not the entry just before it.
        let entries: [Manifest.Entry] = ["a", "a/b", "a/b-x", "a/b/c"].map {
            .init(path: $0, kind: $0 == "a/b/c" ? .file : .directory, mode: 0o755, mtimeNanoseconds: 0)
        }
        let manifest = try Manifest(kind: .package, chunker: .default, entries: entries)
        #expect(manifest.entries.map(\.path) == ["a", "a/b", "a/b-x", "a/b/c"])
        #expect(manifest.entries.index(ofPath: "a/b".utf8) == 1)
        #expect(manifest.entries.index(ofPath: "a/c".utf8) == nil)
        // Without "a/b" the file has no parent, though "a/b-x" is a directory before it.
        let orphan = entries.filter { $0.path != "a/b" }
        #expect(throws: XferError.self) { try Manifest(kind: .package, chunker: .default, entries: orphan) }
    }

    @Test func pathBytesFollowTheSameRulesAsStrings() throws {
        let good = ["a", "é/ü", "dir/file.txt", "emoji 😀", "a..b", ".hidden", String(repeating: "x", count: 255)]
        let bad = [
            "", "/abs", "a//b", "a/./b", "../x", "tab\there", "del\u{7F}", "c1\u{85}", "ls\u{2028}", "rtl\u{202E}txt",
            "alm\u{61C}", "iso\u{2066}", "nul\u{0}", String(repeating: "x", count: 256)
        ]
        for path in good {
            try DocumentPathRules.validate(path)
            try DocumentPathRules.validate(utf8: Array(path.utf8))
        }
        for path in bad {
            let fromString = #expect(throws: XferError.self) { try DocumentPathRules.validate(path) }
            let fromBytes = #expect(throws: XferError.self) { try DocumentPathRules.validate(utf8: Array(path.utf8)) }
            #expect(fromString?.code == .invalidPath)
            #expect(fromBytes?.message == fromString?.message)
        }
    }

    @Test func aBuiltPathThatIsNotUTF8IsRefused() throws {
        var builder = Manifest.Builder(kind: .package, chunker: .default)
        builder.append(path: [0x61, 0xFF], kind: .file, mode: 0o644, mtimeNanoseconds: 0)
        let error = #expect(throws: XferError.self) { try builder.finish() }
        #expect(error?.code == .invalidPath)
    }

    @Test func utf8IsCheckedWithoutMakingStrings() {
        #expect(UTF8Scalars.isValid(Array("plain".utf8)))
        #expect(UTF8Scalars.isValid(Array("é😀".utf8)))
        for invalid: [UInt8] in [[0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82], [0x80]] {
            #expect(!UTF8Scalars.isValid(invalid))
        }
        #expect(UTF8Scalars.first(in: Array("ab\u{2028}c".utf8), where: DocumentPathRules.isRefused) == "\u{2028}")
        #expect(UTF8Scalars.first(in: Array("abc".utf8), where: DocumentPathRules.isRefused) == nil)
    }

    @Test func aDecodedManifestWithInvalidUTF8InAPathIsRefused() throws {
        var bytes = try ManifestTests.sample().encoded()
        // The first entry's path "a" (after magic, version, kind, chunker, count, length 1).
        let at = try #require(bytes.firstIndex(of: UInt8(ascii: "a")))
        bytes[at] = 0xFF
        let error = #expect(throws: XferError.self) { try Manifest(decoding: bytes) }
        #expect(error?.code == .invalidManifest)
    }

    @Test func roomIsCountedExactlyForEncodingsAndDeltas() throws {
        let base = try ManifestTests.sample()
        var edited = Array(base.entries)
        edited[1].chunks.append(.init(id: ChunkID.of([7]), length: 3))
        edited.append(
            .init(path: "c", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: edited[4].chunks + edited[1].chunks)
        )
        let target = try Manifest(kind: .package, chunker: .default, entries: edited)
        let names = target.entries.map(\.path.utf8.count).reduce(0, +)
        let chunks = target.allChunks.count
        // The encoding: magic, version, kind, chunker, then the count.
        try target.encoded().withUnsafeBufferPointer { encoded in
            var plain = ByteReader(encoded)
            _ = try plain.bytes(5)
            _ = try plain.chunker()
            let count = try plain.int(limit: 1000)
            #expect(Manifest.room(of: plain, entries: count, against: nil) == (names, chunks))
        }
        // A delta: magic, version, base digest, kind, chunker, then the count.
        try target.delta(against: base).withUnsafeBufferPointer { bytes in
            var delta = ByteReader(bytes)
            _ = try delta.bytes(4 + ChunkID.byteCount + 1)
            _ = try delta.chunker()
            let deltaCount = try delta.int(limit: 1000)
            #expect(Manifest.room(of: delta, entries: deltaCount, against: base.entries) == (names, chunks))
        }
        // Input cut short counts what it has, and the decoding refuses it.
        let cut = Array(target.encoded().dropLast(40))
        #expect(throws: XferError.self) { try Manifest(decoding: cut) }
    }
}
