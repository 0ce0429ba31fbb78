extension Manifest {
    /// The manifest of a directory document: one directory entry of mode `mode`, no time.
    public static func directory(mode: UInt32) -> Manifest {
        var builder = Builder(kind: .directory, chunker: .default, entries: 1)
        builder.append(path: [UInt8](), kind: .directory, mode: mode, mtimeNanoseconds: 0)
        // One directory entry at the root is a directory document's manifest.
        return try! builder.finish()
    }

    /// Builds the manifest of a file or directory on disk: a directory becomes a package
    /// (every file, directory and symlink under it, symlinks not followed), anything else a
    /// single-file document.
    ///
    /// - Parameters:
    ///   - path: A regular file, symlink or directory.
    ///   - options: Pipeline options; their chunk limits are recorded in the manifest.
    ///   - onEvent: Receives every pipeline event (in order), e.g. to see chunks as they are
    ///     hashed; its file indexes count the regular files in manifest order.
    /// - Returns: The validated manifest.
    /// - Throws: `not_found` / `io` for unreadable paths; `invalid_path` for a name that is
    ///   not a valid document path; whatever `onEvent` throws.
    public static func build(
        from path: String, options: ChunkPipeline.Options = ChunkPipeline.Options(),
        onEvent: @escaping @Sendable (ChunkEvent) throws -> Void = { _ in }
    ) throws -> Manifest {
        let top = try DirectoryWalker.entry(at: path)
        let kind: Kind = top.kind == .directory ? .package : .file
        let tree = kind == .package ? try DirectoryWalker.walk(path) : TreeEntries([top])
        let base = path.hasSuffix("/") ? String(path.dropLast()) : path
        let fileIndexes = tree.indices.filter { tree[$0].kind == .file }
        let inputs: [ChunkInput] = fileIndexes.map { index in
            .file(kind == .package ? base + "/" + tree[index].relativePath : path)
        }
        let chunks = Locked([[ChunkReference]](repeating: [], count: inputs.count))
        try ChunkPipeline(options: options).run(inputs) { event in
            if case .chunk(let file, let record) = event {
                chunks.withLock { $0[file].append(ChunkReference(id: record.id, length: record.length)) }
            }
            try onEvent(event)
        }
        let collected = chunks.value
        var fileNumber = 0
        let entries = tree.map { entry -> Entry in
            var result = Entry(
                path: entry.relativePath, kind: entry.kind, mode: entry.mode,
                mtimeNanoseconds: entry.mtimeNanoseconds, symlinkTarget: entry.symlinkTarget)
            if entry.kind == .file {
                result.chunks = collected[fileNumber]
                fileNumber += 1
            }
            return result
        }
        return try Manifest(kind: kind, chunker: options.chunker, entries: entries)
    }
}
