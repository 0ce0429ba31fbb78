import XferCore

/// A local file or package as it is now, set against what a ``ClientState`` remembers: the
/// files whose stamp is unchanged (their chunks are known) and those that must be read again.
struct LocalSnapshot: Sendable {
    /// The path, without a trailing `/`.
    let base: String
    /// The file, symlink or package root itself.
    let top: TreeEntry
    /// File, package, or a directory alone.
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
    ///   - directoryItself: A directory at `path` is the directory alone (a synced folder's
    ///     directory document), not a package of everything below it.
    /// - Throws: `not_found` or `io` from the walk.
    init(path: String, known: [String: FileStamp], exclude: [String] = [], directoryItself: Bool = false) throws {
        var top = try DirectoryWalker.entry(at: path)
        if top.kind == .directory && directoryItself {
            kind = .directory
            top = Self.directoryEntry(mode: top.mode)
            tree = [top]
        } else {
            kind = top.kind == .directory ? .package : .file
            tree = kind == .package ? try IgnoreRules.walk(path, rules: IgnoreRules(exclude: exclude)) : [top]
        }
        self.top = top
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

    /// The one entry of a directory document: its permission bits, no time (a directory's
    /// mtime moves with every name made or removed in it, so it is not its content).
    static func directoryEntry(mode: UInt32) -> TreeEntry {
        TreeEntry(relativePath: "", kind: .directory, mode: directoryMode(mode), size: 0, mtimeNanoseconds: 0)
    }

    /// The mode a directory document carries: the rwx bits, the owner's always all set (a
    /// directory its owner cannot read or write is one no device could sync into; one made so
    /// here does not make it so elsewhere).
    static func directoryMode(_ mode: UInt32) -> UInt32 { (mode & 0o777) | 0o700 }

    /// What ``ClientState`` records as a directory document's stamp: its mode, the one thing
    /// about it a pass compares.
    static func directoryStamp(mode: UInt32) -> String { "dir:\(String(directoryMode(mode), radix: 8))" }

    /// The chunk list of each unchanged file, by tree index (`nil` for the others).
    func knownChunks(_ state: ClientState) throws -> [[Manifest.ChunkReference]?] {
        var lists: [[Manifest.ChunkReference]?] = Array(repeating: nil, count: tree.count)
        var wanted: [String: Int] = [:]
        wanted.reserveCapacity(unchanged.count)
        for index in unchanged { wanted[tree[index].relativePath] = index }
        // Read row by row: only the chunk lists wanted are kept.
        try state.forEachFile { file in
            if let index = wanted[file.path] { lists[index] = file.chunks }
        }
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
