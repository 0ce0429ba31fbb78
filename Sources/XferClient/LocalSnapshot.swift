import XferCore

/// A local file or package as it is now, set against what a ``ClientState`` remembers: the
/// files whose stamp is unchanged (their chunks are known) and those that must be read again.
struct LocalSnapshot: Sendable {
    /// The path, without a trailing `/`.
    let base: String
    /// The file, symlink or package root itself.
    let top: TreeEntry
    /// File or package.
    let kind: Manifest.Kind
    /// Every entry (one for a file).
    let tree: [TreeEntry]
    /// Each file's stamp now, by tree index.
    let stamps: [FileStamp?]
    /// Each file's chunks where its stamp matches the state's record, by tree index.
    let knownChunks: [[Manifest.ChunkReference]?]
    /// Tree indexes of the files that must be read.
    let toHash: [Int]

    /// Walks `path` and compares each file's stamp with `known`.
    /// - Throws: `not_found` or `io` from the walk.
    init(path: String, known: [String: KnownFile]) throws {
        top = try DirectoryWalker.entry(at: path)
        kind = top.kind == .directory ? .package : .file
        tree = kind == .package ? try DirectoryWalker.walk(path) : [top]
        base = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
        var chunkLists: [[Manifest.ChunkReference]?] = Array(repeating: nil, count: tree.count)
        var stamps: [FileStamp?] = Array(repeating: nil, count: tree.count)
        var toHash: [Int] = []
        let kind = kind, base = base
        for (index, entry) in tree.enumerated() where entry.kind == .file {
            let stamp = FileStamp.of(kind == .package ? base + "/" + entry.relativePath : base)
            stamps[index] = stamp
            if let stamp, let record = known[entry.relativePath], record.stamp == stamp {
                chunkLists[index] = record.chunks
            } else {
                toHash.append(index)
            }
        }
        self.stamps = stamps
        self.knownChunks = chunkLists
        self.toHash = toHash
    }

    /// Content bytes of every file.
    var totalSize: Int64 { tree.reduce(Int64(0)) { $0 + ($1.kind == .file ? $1.size : 0) } }

    /// The absolute path of an entry.
    func fullPath(_ entry: TreeEntry) -> String { kind == .package ? base + "/" + entry.relativePath : base }

    /// Manifest entries with these chunk lists (by tree index; missing lists count as empty).
    func entries(_ chunkLists: [[Manifest.ChunkReference]?]) -> [Manifest.Entry] {
        tree.enumerated().map { index, entry in
            Manifest.Entry(path: entry.relativePath, kind: entry.kind, mode: entry.mode, mtimeNanoseconds: entry.mtimeNanoseconds,
                           chunks: chunkLists[index] ?? [], symlinkTarget: entry.symlinkTarget)
        }
    }

    /// Whether this is exactly `synced`: no file needs reading and the manifest it would make is the same.
    func isUnchanged(since synced: SyncedDocument?) -> Bool {
        guard toHash.isEmpty, let synced,
              let manifest = try? Manifest(kind: kind, chunker: synced.manifest.chunker, entries: entries(knownChunks)) else { return false }
        return manifest == synced.manifest
    }
}
