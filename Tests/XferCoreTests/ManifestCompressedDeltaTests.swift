import Testing
import XferCore

/// Manifest deltas compressed for the wire (`XFDZ` + a zstd frame).
@Suite struct ManifestCompressedDeltaTests {
    /// A package like a source tree: many files under shared directories, all with new times.
    static func tree(files: Int, mtime: Int64, changed: Set<Int> = []) throws -> Manifest {
        let directories = ["Sources"] + (0..<12).flatMap { ["Sources/Module\($0)", "Sources/Module\($0)/Subsystem"] }
        return try Manifest(
            kind: .package, chunker: .default,
            entries: directories.map {
                Manifest.Entry(path: $0, kind: .directory, mode: 0o755, mtimeNanoseconds: mtime)
            }
                + (0..<files).map { index in
                    let seed = UInt64(index) + (changed.contains(index) ? 1_000_000 : 0)
                    return Manifest.Entry(
                        path: "Sources/Module\(index % 12)/Subsystem/File\(index).swift", kind: .file, mode: 0o644,
                        mtimeNanoseconds: mtime,
                        chunks: [
                            Manifest.ChunkReference(
                                id: ChunkID.of(withUnsafeBytes(of: seed) { Array($0) }), length: 4000 + index)
                        ])
                })
    }

    @Test func aTreesDeltaShrinksAndRoundTrips() throws {
        let base = try Self.tree(files: 800, mtime: 1_700_000_000_000_000_000)
        let next = try Self.tree(files: 800, mtime: 1_700_000_100_000_000_000, changed: [3, 40, 700])
        let plain = next.delta(against: base)
        let compressed = next.compressedDelta(against: base)
        #expect(compressed.count * 4 < plain.count, "\(compressed.count) of \(plain.count) bytes")
        #expect(try Manifest(applying: compressed, to: base) == next)
        #expect(try Manifest(applying: plain, to: base) == next)
        // Without a base, too.
        #expect(try Manifest(applying: next.compressedDelta(against: nil), to: nil) == next)
        // Too small to gain: the plain form is sent.
        let single = try Manifest(
            kind: .file, chunker: .default,
            entries: [Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 1)])
        #expect(Array(single.compressedDelta(against: nil)) == single.delta(against: nil))
    }

    @Test func aLargeTreesDeltaIsCompressedInPiecesAndRoundTrips() throws {
        // 12,000 files: over half a megabyte of plain delta, fed to the compressor in several pieces.
        let base = try Self.tree(files: 12_000, mtime: 1)
        let next = try Self.tree(files: 12_000, mtime: 2, changed: [5, 6_000, 11_999])
        for against in [nil, base] {
            let plain = next.delta(against: against)
            let compressed = next.compressedDelta(against: against)
            #expect(against != nil || plain.count > 2 * (256 << 10))
            #expect(Manifest.isCompressedDelta(compressed) && compressed.count < plain.count)
            #expect(try Manifest(applying: compressed, to: against) == next)
        }
    }

    @Test func aStreamedFrameHoldsItsPiecesAndItsDeclaredSize() throws {
        let pieces = [TestData.text(count: 100_000, seed: 1), [], TestData.random(count: 70_000, seed: 2)]
        let whole = pieces.flatMap { $0 }
        let frame = try Zstd.frame(level: 3, pledgedSize: whole.count, prefix: [7, 7]) { write in
            for piece in pieces { try piece.withUnsafeBytes { try write($0) } }
        }
        #expect(Array(frame.prefix(2)) == [7, 7])
        #expect(try Zstd.decompressFrame(Array(frame.dropFirst(2)), maximumLength: whole.count) == whole)
        // Given fewer bytes than it declared, the frame is not made.
        #expect(throws: XferError.self) {
            try Zstd.frame(level: 3, pledgedSize: whole.count + 1) { write in
                try whole.withUnsafeBytes { try write($0) }
            }
        }
    }

    @Test func aDamagedOrHostileCompressedDeltaIsRefused() throws {
        let base = try Self.tree(files: 300, mtime: 1)
        let next = try Self.tree(files: 300, mtime: 2)
        let compressed = next.compressedDelta(against: base)
        var generator = SplitMix64(seed: 4)
        for _ in 0..<200 {
            var damaged = compressed
            let at = 4 + Int(generator.next() % UInt64(compressed.count - 4))
            damaged[at] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
            #expect(throws: XferError.self) { try Manifest(applying: damaged, to: base) }
        }
        // A few bytes that would inflate to megabytes are refused before inflating.
        let zeros = [UInt8](repeating: 0, count: 8 << 20)
        let bomb = Array("XFDZ".utf8) + (try zeros.withUnsafeBytes { try Zstd.frame($0, level: 19) })
        #expect(bomb.count < 2000)
        #expect { try Manifest(applying: bomb, to: nil) } throws: { ($0 as? XferError)?.code == .tooLarge }
        // Nor may one hold another.
        let inner = next.compressedDelta(against: base)
        let nested = Array("XFDZ".utf8) + (try inner.withUnsafeBytes { try Zstd.frame($0, level: 3) })
        #expect { try Manifest(applying: nested, to: base) } throws: { ($0 as? XferError)?.code == .invalidManifest }
    }
}
