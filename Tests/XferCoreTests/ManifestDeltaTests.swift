import Testing
import XferCore

@Suite struct ManifestDeltaTests {
    static func chunks(_ seeds: [UInt64]) -> [Manifest.ChunkReference] {
        seeds.map {
            Manifest.ChunkReference(id: ChunkID.of(withUnsafeBytes(of: $0) { Array($0) }), length: 1000 + Int($0 % 7))
        }
    }

    static func file(_ seeds: [UInt64]) throws -> Manifest {
        try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 5, chunks: chunks(seeds))
            ])
    }

    @Test func roundTripsAgainstAnyBase() throws {
        let base = try Self.file(Array(0..<2000))
        let edits: [[UInt64]] = [
            Array(0..<2000),  // unchanged
            Array(0..<1000) + [9999] + Array(1001..<2000),  // one chunk replaced
            Array(0..<1000) + [7777, 8888] + Array(1000..<2000),  // insertion
            Array(500..<2000),  // prefix removed
            [1, 1, 1, 2, 2, 2],  // repeats
            []  // emptied
        ]
        for seeds in edits {
            let next = try Self.file(seeds)
            let delta = next.delta(against: base)
            #expect(try Manifest(applying: delta, to: base) == next)
            #expect(try Manifest(applying: next.delta(against: nil), to: nil) == next)
        }
        // A small edit of a long list costs a few dozen bytes, not the list.
        let edited = try Self.file(Array(0..<1000) + [9999] + Array(1001..<2000))
        #expect(edited.delta(against: base).count < 200)
        #expect(edited.encoded().count > 60_000)
    }

    @Test func packagesMatchFilesByPath() throws {
        let base = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                .init(path: "a", kind: .file, mode: 0o644, mtimeNanoseconds: 1, chunks: Self.chunks(Array(0..<100))),
                .init(path: "d", kind: .directory, mode: 0o755, mtimeNanoseconds: 2),
                .init(
                    path: "d/b", kind: .file, mode: 0o600, mtimeNanoseconds: 3, chunks: Self.chunks(Array(100..<200))),
                .init(path: "l", kind: .symlink, mode: 0o777, mtimeNanoseconds: 4, symlinkTarget: "a")
            ])
        let next = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                .init(
                    path: "a", kind: .file, mode: 0o644, mtimeNanoseconds: 9,
                    chunks: Self.chunks(Array(0..<100) + [555])),
                .init(path: "d", kind: .directory, mode: 0o755, mtimeNanoseconds: 2),
                .init(
                    path: "d/c", kind: .file, mode: 0o600, mtimeNanoseconds: 3, chunks: Self.chunks(Array(100..<200))),
                .init(path: "l", kind: .symlink, mode: 0o777, mtimeNanoseconds: 4, symlinkTarget: "d/c")
            ])
        #expect(try Manifest(applying: next.delta(against: base), to: base) == next)
    }

    @Test func refusesTheWrongBaseAndMalformedDeltas() throws {
        let base = try Self.file(Array(0..<50))
        let other = try Self.file(Array(50..<100))
        let next = try Self.file(Array(0..<60))
        let delta = next.delta(against: base)
        #expect(throws: XferError.self) { try Manifest(applying: delta, to: other) }
        #expect(throws: XferError.self) { try Manifest(applying: delta, to: nil) }
        // Every truncation and every single-byte flip is refused or yields a valid manifest, never a crash.
        for cut in 0..<delta.count {
            #expect(throws: XferError.self) { try Manifest(applying: Array(delta.prefix(cut)), to: base) }
        }
        for index in delta.indices {
            var flipped = delta
            flipped[index] ^= 0x41
            _ = try? Manifest(applying: flipped, to: base)
        }
    }
}
