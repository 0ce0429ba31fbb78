import XferCore

/// Valid manifests of every shape, made with the real builders: the seeds of the manifest and
/// delta harnesses, and the base a delta is applied to.
public enum Samples {
    /// A chunk id from a small number.
    public static func id(_ n: Int) -> ChunkID { ChunkID.of([UInt8(truncatingIfNeeded: n), UInt8(truncatingIfNeeded: n >> 8), 0x5a]) }

    /// A package of a directory, a symlink and two files (one of two chunks): the delta base.
    public static let base: Manifest = try! Manifest(kind: .package, chunker: .default, entries: [
        .init(path: "a", kind: .directory, mode: 0o755, mtimeNanoseconds: -5),
        .init(path: "a/link", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0, symlinkTarget: "../b.txt"),
        .init(path: "a/x", kind: .file, mode: 0o600, mtimeNanoseconds: 1, chunks: [.init(id: id(3), length: 9)]),
        .init(path: "b.txt", kind: .file, mode: 0o644, mtimeNanoseconds: 1_700_000_000_123_456_789,
              chunks: [.init(id: id(0), length: 70000), .init(id: id(1), length: 1)]),
    ])

    /// Manifests of each kind and shape, `base` first.
    public static func manifests() throws -> [(name: String, manifest: Manifest)] {
        let small = try ChunkerConfiguration(minimumSize: 64, averageSize: 256, maximumSize: 1024, normalizationLevel: 0)
        var tree: [Manifest.Entry] = [.init(path: "src", kind: .directory, mode: 0o755, mtimeNanoseconds: 10)]
        for n in 0..<24 {
            tree.append(.init(path: "src/file-\(String(n + 100))", kind: .file, mode: 0o644, mtimeNanoseconds: Int64(n) * 1_000_000_007,
                              chunks: (0..<(n % 4 + 1)).map { .init(id: id(n * 8 + $0), length: 1 + (n * 131 + $0) % 1024) }))
        }
        return [
            ("package", base),
            ("file", try Manifest(kind: .file, chunker: .default, entries: [
                .init(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 2, chunks: [.init(id: id(2), length: 262144), .init(id: id(0), length: 5)]),
            ])),
            ("empty-file", try Manifest(kind: .file, chunker: .default, entries: [
                .init(path: "", kind: .file, mode: 0o600, mtimeNanoseconds: Int64.min, chunks: []),
            ])),
            ("file-symlink", try Manifest(kind: .file, chunker: .default, entries: [
                .init(path: "", kind: .symlink, mode: 0o777, mtimeNanoseconds: Int64.max, symlinkTarget: "/etc/hosts"),
            ])),
            ("directory", Manifest.directory(mode: 0o700)),
            ("empty-package", try Manifest(kind: .package, chunker: .default, entries: [])),
            ("unicode-package", try Manifest(kind: .package, chunker: .default, entries: [
                .init(path: "Caf\u{e9}", kind: .directory, mode: 0o755, mtimeNanoseconds: 3),
                .init(path: "Caf\u{e9}/\u{1F600} notes.txt", kind: .file, mode: 0o644, mtimeNanoseconds: 4, chunks: [.init(id: id(7), length: 12)]),
                .init(path: "Z", kind: .symlink, mode: 0o777, mtimeNanoseconds: 5, symlinkTarget: "Caf\u{e9}"),
            ])),
            ("small-chunker-tree", try Manifest(kind: .package, chunker: small, entries: tree)),
        ]
    }

    /// Edits of ``base``: what a delta against it describes.
    public static func edits() throws -> [(name: String, manifest: Manifest)] {
        var appended = Array(base.entries)
        appended[3].chunks.append(.init(id: id(9), length: 77))
        var reordered = Array(base.entries)
        reordered[3].chunks = [reordered[3].chunks[1], .init(id: id(11), length: 4), reordered[3].chunks[0], reordered[3].chunks[1]]
        var grown = Array(base.entries)
        grown.append(.init(path: "c", kind: .file, mode: 0o600, mtimeNanoseconds: 9, chunks: base.entries[3].chunks + base.entries[2].chunks))
        var retyped = Array(base.entries)
        retyped[2] = .init(path: "a/x", kind: .symlink, mode: 0o777, mtimeNanoseconds: 1, symlinkTarget: "y")
        return [
            ("appended", try Manifest(kind: .package, chunker: .default, entries: appended)),
            ("reordered", try Manifest(kind: .package, chunker: .default, entries: reordered)),
            ("grown", try Manifest(kind: .package, chunker: .default, entries: grown)),
            ("retyped", try Manifest(kind: .package, chunker: .default, entries: retyped)),
            ("removed", try Manifest(kind: .package, chunker: .default, entries: Array(base.entries.prefix(2)))),
            ("same", base),
        ]
    }
}
