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
    /// Every entry (one for a file), packed.
    private(set) var tree: TreeEntries
    /// Each file's stamp as the walk saw it (the same `lstat` as its entry), by tree index.
    var stamps: Stamps { Stamps(tree: tree) }
    /// Tree indexes of the files whose stamp matches the state's record (their chunks are known).
    private(set) var unchanged: SpillArray<Int>
    /// Tree indexes of the files that must be read.
    private(set) var toHash: SpillArray<Int>

    /// Walks `path` and compares each file's stamp with what `state` remembers (stamps are
    /// cheap to read: no chunk lists are needed to decide what changed). Inside a package,
    /// what its `.xferignore` files, `exclude` and the built-in defaults ignore is left out.
    /// The tree is put in bytewise path order (a manifest's), so it is set against the state's
    /// rows, read in the same order one at a time, without a map of either.
    /// - Parameters:
    ///   - path: A file, symlink or package directory.
    ///   - state: What this root remembers.
    ///   - exclude: Extra patterns relative to the package's root (`--exclude`).
    ///   - directoryItself: A directory at `path` is the directory alone (a synced folder's
    ///     directory document), not a package of everything below it.
    /// - Throws: `not_found` or `io` from the walk; `io` from the state.
    init(path: String, state: ClientState, exclude: [String] = [], directoryItself: Bool = false) throws {
        var top = try DirectoryWalker.entry(at: path)
        if top.kind == .directory && directoryItself {
            kind = .directory
            top = Self.directoryEntry(mode: top.mode)
            tree = TreeEntries([top])
        } else {
            kind = top.kind == .directory ? .package : .file
            tree =
                kind == .package
                ? try IgnoreRules.walk(path, rules: IgnoreRules(exclude: exclude)).sortedByPath() : TreeEntries([top])
        }
        self.top = top
        base = path.hasSuffix("/") && path.count > 1 ? String(path.dropLast()) : path
        // Both in path order: each remembered row is matched by walking the tree along with it.
        var matches = SpillArray<Bool>(repeating: false, count: tree.count)
        var cursor = 0
        let tree = tree
        try state.forEachStamp { path, stamp in
            if PathOrder.seek(&cursor, count: tree.count, to: path.utf8, bytesAt: tree.pathBytes),
                tree.kind(at: cursor) == .file
            {
                matches[cursor] = tree.stamp(at: cursor) == stamp
            }
        }
        var unchanged = SpillArray<Int>()
        var toHash = SpillArray<Int>()
        for index in tree.indices where tree.kind(at: index) == .file {
            if matches[index] { unchanged.append(index) } else { toHash.append(index) }
        }
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
    func knownChunks(_ state: ClientState) throws -> FileChunkLists {
        var lists = FileChunkLists(files: tree.count)
        // Rows one at a time, in path order, as the unchanged files are (the tree is in path
        // order): only the chunk lists wanted are kept, no map is made.
        var next = 0
        let tree = tree
        let unchanged = unchanged
        try state.forEachFile { file in
            guard
                PathOrder.seek(
                    &next, count: unchanged.count, to: file.path.utf8, bytesAt: { tree.pathBytes(at: unchanged[$0]) })
            else { return }
            lists[unchanged[next]] = file.chunks
            next += 1
        }
        return lists
    }

    /// Content bytes of every file.
    var totalSize: Int64 { tree.indices.reduce(Int64(0)) { $0 + (tree.kind(at: $1) == .file ? tree.size(at: $1) : 0) } }

    /// The absolute path of an entry.
    func fullPath(_ entry: TreeEntry) -> String { fullPath(relative: entry.relativePath) }

    /// The absolute path of tree entry `index`.
    func fullPath(at index: Int) -> String { fullPath(relative: tree.relativePath(at: index)) }

    /// The absolute path of the entry at `relative` (the tree itself is not needed).
    func fullPath(relative: String) -> String { kind == .package ? base + "/" + relative : base }

    /// Lets go of the tree and the stamps (a push past its reading: the manifest has what is
    /// left to say), which are most of what a tree of many files holds.
    mutating func releaseTree() {
        tree = TreeEntries()
        unchanged = []
        toHash = []
    }

    /// The manifest of this tree with these chunk lists (by tree index; missing lists count
    /// as empty), made straight into its packed form.
    func manifest(_ chunkLists: FileChunkLists, chunker: ChunkerConfiguration) throws -> Manifest {
        // The manifest's paths are the tree's own buffer (in the same order), not a copy.
        var builder = Manifest.Builder(
            kind: kind, chunker: chunker, names: tree.packedNames, chunks: chunkLists.referenceCount)
        for index in tree.indices {
            builder.appendEntry(
                kind: tree.kind(at: index), mode: tree.mode(at: index),
                mtimeNanoseconds: tree.mtimeNanoseconds(at: index), symlinkTarget: tree.symlinkTarget(at: index))
            if let chunks = chunkLists.chunks(at: index) { builder.appendChunks(chunks) }
        }
        return try builder.finish()
    }

    /// Whether this is exactly `synced`: no file needs reading and the manifest it would make is the same.
    func isUnchanged(since synced: SyncedDocument?, state: ClientState) throws -> Bool {
        guard toHash.isEmpty, synced != nil else { return false }
        return isUnchanged(since: synced, chunks: try knownChunks(state))
    }

    /// The same, with the unchanged files' chunk lists already read (``knownChunks(_:)``):
    /// entry by entry against `synced`'s (both in path order), without making a manifest.
    func isUnchanged(since synced: SyncedDocument?, chunks: FileChunkLists) -> Bool {
        guard toHash.isEmpty, let synced, synced.manifest.kind == kind, synced.manifest.entries.count == tree.count
        else { return false }
        let previous = synced.manifest.entries
        for index in tree.indices {
            guard previous.pathBytes(at: index).elementsEqual(tree.pathBytes(at: index)),
                previous.kind(at: index) == tree.kind(at: index),
                previous.mode(at: index) == tree.mode(at: index),
                previous.mtimeNanoseconds(at: index) == tree.mtimeNanoseconds(at: index),
                previous.symlinkTarget(at: index) == tree.symlinkTarget(at: index),
                previous.chunks(at: index).elementsEqual(chunks.chunks(at: index) ?? .none)
            else { return false }
        }
        return true
    }
}

extension LocalSnapshot {
    /// The stamps of a snapshot's files, read from its entries: no array of its own.
    struct Stamps: Sendable {
        let tree: TreeEntries

        /// The stamp of the file at tree index `index`; `nil` for a directory or symlink.
        subscript(index: Int) -> FileStamp? { tree.kind(at: index) == .file ? tree.stamp(at: index) : nil }
    }
}
