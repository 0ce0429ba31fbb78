import XferCore

/// What new chunks are sent against: for each changed file that had a previous version, that
/// version's chunks. A pure choice, tested alone.
struct PreviousChunks: Sendable {
    /// The largest previous file whose chunks are candidates: a push's come from the cache,
    /// which keeps small files' (``ChunkCache/fileLimit``); a pull's from the file on disk too,
    /// whatever its size.
    let sizeLimit: Int64
    /// The previous chunk list of each candidate file, by its full path.
    private(set) var byPath: [String: [Manifest.ChunkReference]] = [:]

    /// No candidates yet.
    /// - Parameter sizeLimit: The largest previous file whose chunks are candidates.
    init(sizeLimit: Int64 = ChunkCache.fileLimit) {
        self.sizeLimit = sizeLimit
    }

    /// Adds a file whose previous version `manifest` may hold: when an entry of that relative
    /// path was a file of at most ``sizeLimit`` bytes, its chunks are candidates. A file added
    /// already is not looked up again.
    mutating func add(fullPath: String, relativePath: String, previous manifest: Manifest?) {
        guard byPath[fullPath] == nil, let entries = manifest?.entries,
            let index = entries.index(ofPath: relativePath.utf8),
            entries.kind(at: index) == .file, entries.size(at: index) <= sizeLimit, !entries.chunks(at: index).isEmpty
        else { return }
        byPath[fullPath] = Array(entries.chunks(at: index))
    }

    /// The previous chunk to send a new chunk at `offset` of the file at `path` against: the one
    /// that covered that offset, else the last one (the file grew).
    func reference(forChunkAt offset: Int64, in path: String) -> ChunkID? {
        guard !byPath.isEmpty, let chunks = byPath[path] else { return nil }
        return Self.covering(offset, in: chunks)
    }

    /// The chunk of `chunks` (a file's list, in order) that covers `offset`, else the last.
    static func covering(_ offset: Int64, in chunks: [Manifest.ChunkReference]) -> ChunkID? {
        var start: Int64 = 0
        for chunk in chunks {
            if offset < start + Int64(chunk.length) { return chunk.id }
            start += Int64(chunk.length)
        }
        return chunks.last?.id
    }
}
