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
    /// Tree indexes of the files whose stamp matches the state's record (their chunks are known).
    let unchanged: [Int]
    /// Tree indexes of the files that must be read.
    let toHash: [Int]

    /// Walks `path` and compares each file's stamp with `known` (the state's stamps, which
    /// are cheap to read: no chunk lists are needed to decide what changed). Inside a package,
    /// what its `.xferignore` files, `exclude` and the built-in defaults ignore is left out.
    /// - Parameters:
    ///   - path: A file, symlink or package directory.
    ///   - known: The state's stamps.
    ///   - exclude: Extra patterns relative to the package's root (`--exclude`).
    /// - Throws: `not_found` or `io` from the walk.
    init(path: String, known: [String: FileStamp], exclude: [String] = []) throws {
        top = try DirectoryWalker.entry(at: path)
        kind = top.kind == .directory ? .package : .file
        tree = kind == .package ? try IgnoreRules.walk(path, rules: IgnoreRules(exclude: exclude)) : [top]
        base = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
        var unchanged: [Int] = []
        var stamps: [FileStamp?] = Array(repeating: nil, count: tree.count)
        var toHash: [Int] = []
        let kind = kind, base = base
        for (index, entry) in tree.enumerated() where entry.kind == .file {
            let stamp = FileStamp.of(kind == .package ? base + "/" + entry.relativePath : base)
            stamps[index] = stamp
            if let stamp, known[entry.relativePath] == stamp {
                unchanged.append(index)
            } else {
                toHash.append(index)
            }
        }
        self.stamps = stamps
        self.unchanged = unchanged
        self.toHash = toHash
    }

    /// The chunk list of each unchanged file, by tree index (`nil` for the others).
    func knownChunks(_ state: ClientState) throws -> [[Manifest.ChunkReference]?] {
        let known = try state.files()
        var lists: [[Manifest.ChunkReference]?] = Array(repeating: nil, count: tree.count)
        for index in unchanged { lists[index] = known[tree[index].relativePath]?.chunks }
        return lists
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
    func isUnchanged(since synced: SyncedDocument?, state: ClientState) throws -> Bool {
        guard toHash.isEmpty, synced != nil else { return false }
        return isUnchanged(since: synced, chunks: try knownChunks(state))
    }

    /// The same, with the unchanged files' chunk lists already read (``knownChunks(_:)``).
    func isUnchanged(since synced: SyncedDocument?, chunks: [[Manifest.ChunkReference]?]) -> Bool {
        guard toHash.isEmpty, let synced,
              let manifest = try? Manifest(kind: kind, chunker: synced.manifest.chunker, entries: entries(chunks)) else { return false }
        return manifest == synced.manifest
    }
}
