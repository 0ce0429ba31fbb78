import Testing
import XferCore

@Suite struct ManifestTests {
    static func sample() throws -> Manifest {
        let ids = (0..<3).map { ChunkID.of([UInt8($0)]) }
        return try Manifest(
            kind: .package, chunker: .default,
            entries: [
                .init(
                    path: "b.txt", kind: .file, mode: 0o644, mtimeNanoseconds: 1_700_000_000_123_456_789,
                    chunks: [.init(id: ids[0], length: 70000), .init(id: ids[1], length: 1)]),
                .init(path: "a", kind: .directory, mode: 0o755, mtimeNanoseconds: -5),
                .init(path: "a/link", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0, symlinkTarget: "../b.txt"),
                .init(path: "a/empty", kind: .file, mode: 0o600, mtimeNanoseconds: 1),
                .init(
                    path: "a.txt", kind: .file, mode: 0o644, mtimeNanoseconds: 2,
                    chunks: [.init(id: ids[2], length: 262144)])
            ])
    }

    @Test func entriesUnderASymlinkOrFileAreInvalid() throws {
        // A package cannot place an entry below a symlink (or a file): a pull would write through it.
        for parent in [
            Manifest.Entry(path: "out", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0, symlinkTarget: "/etc"),
            Manifest.Entry(path: "out", kind: .file, mode: 0o644, mtimeNanoseconds: 0)
        ] {
            #expect(throws: XferError.self) {
                try Manifest(
                    kind: .package, chunker: .default,
                    entries: [
                        parent, .init(path: "out/passwd", kind: .file, mode: 0o644, mtimeNanoseconds: 0)
                    ])
            }
        }
    }

    @Test func roundTripsCanonically() throws {
        let manifest = try Self.sample()
        #expect(manifest.entries.map(\.path) == ["a", "a.txt", "a/empty", "a/link", "b.txt"])
        let bytes = manifest.encoded()
        let decoded = try Manifest(decoding: bytes)
        #expect(decoded == manifest)
        #expect(decoded.encoded() == bytes)
        #expect(decoded.digest == manifest.digest)
        #expect(manifest.totalSize == 70001 + 262144 + 8)
        let file = try Manifest(
            kind: .file, chunker: .default,
            entries: [
                .init(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 9,
                    chunks: [.init(id: ChunkID.of([9]), length: 5)])
            ])
        #expect(try Manifest(decoding: file.encoded()) == file)
    }

    @Test func everyTruncationIsRefused() throws {
        let bytes = try Self.sample().encoded()
        for length in 0..<bytes.count {
            #expect(throws: XferError.self) { try Manifest(decoding: Array(bytes.prefix(length))) }
        }
        #expect { try Manifest(decoding: bytes + [0]) } throws: { ($0 as? XferError)?.code == .invalidManifest }
    }

    @Test func randomInputsAndMutationsNeverCrash() throws {
        let bytes = try Self.sample().encoded()
        var generator = SplitMix64(seed: 77)
        var accepted = 0
        for round in 0..<3000 {
            var input: [UInt8]
            if round % 3 == 0 {
                input = TestData.random(count: Int(generator.next() % 400), seed: generator.next())
            } else {
                input = bytes
                for _ in 0..<(1 + generator.next() % 3) {
                    input[Int(generator.next() % UInt64(input.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            }
            // Anything accepted must be canonical: it re-encodes to the same bytes.
            if let manifest = try? Manifest(decoding: input) {
                accepted += 1
                #expect(manifest.encoded() == input)
            }
        }
        #expect(accepted < 3000)
    }

    @Test func refusesInvalidTrees() throws {
        let id = ChunkID.of([1])
        let bad: [[Manifest.Entry]] = [
            [.init(path: "../x", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "/x", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "a//b", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "a/./b", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "x\u{0}y", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [.init(path: "nodir/x", kind: .file, mode: 0o644, mtimeNanoseconds: 0)],
            [
                .init(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0),
                .init(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0)
            ],
            [.init(path: "x", kind: .file, mode: 0o10000, mtimeNanoseconds: 0)],
            [.init(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [.init(id: id, length: 0)])],
            [.init(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [.init(id: id, length: 262145)])],
            [.init(path: "x", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0)],
            [.init(path: "x", kind: .directory, mode: 0o755, mtimeNanoseconds: 0, chunks: [.init(id: id, length: 1)])],
            [.init(path: String(repeating: "a", count: 256), kind: .file, mode: 0o644, mtimeNanoseconds: 0)]
        ]
        for entries in bad {
            #expect(throws: XferError.self, "\(entries.map(\.path))") {
                try Manifest(kind: .package, chunker: .default, entries: entries)
            }
        }
        #expect(throws: XferError.self) {
            try Manifest(
                kind: .file, chunker: .default,
                entries: [.init(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0)])
        }
    }

    @Test func refusesNonCanonicalEncodings() throws {
        let bytes = try Self.sample().encoded()
        #expect { try Manifest(decoding: Array("XFM".utf8) + [2]) } throws: {
            ($0 as? XferError)?.message.contains("version") == true
        }
        #expect { try Manifest(decoding: Array("XFN".utf8) + [1]) } throws: {
            ($0 as? XferError)?.message.contains("magic") == true
        }
        // Header: magic, version, kind, 16 KiB / 64 KiB / 256 KiB as varints, NC level 2, then the entry count.
        let header: [UInt8] = Array("XFM".utf8) + [1, 2, 0x80, 0x80, 0x01, 0x80, 0x80, 0x04, 0x80, 0x80, 0x10, 2]
        #expect(Array(bytes.prefix(header.count)) == header)
        // The entry count 5 written as the non-minimal varint 0x85 0x00.
        var padded = bytes
        padded[header.count] = 0x85
        padded.insert(0x00, at: header.count + 1)
        #expect { try Manifest(decoding: padded) } throws: { ($0 as? XferError)?.message.contains("minimal") == true }
        // Entries out of order: swap the first two entries ("a" directory and "a.txt" file) by
        // encoding a manifest whose stored order is wrong.
        var unsorted = header + [2]
        unsorted += [1, UInt8(ascii: "b"), 2, 0x80 | 0x6D, 0x03, 0]  // "b" directory, mode 755, mtime 0
        unsorted += [1, UInt8(ascii: "a"), 2, 0x80 | 0x6D, 0x03, 0]  // "a" directory
        #expect { try Manifest(decoding: unsorted) } throws: { ($0 as? XferError)?.message.contains("order") == true }
        // A count larger than the input could hold is refused before allocating.
        #expect { try Manifest(decoding: header + [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) } throws: { $0 is XferError }
    }
}
