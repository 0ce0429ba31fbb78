import XferCore

/// Local sources of chunks: files a root (and every root sharing its state database) synced
/// that are unchanged since, so a document renamed elsewhere arrives without downloading.
/// Found once, on first use, and shared by the pulls of one sync pass (finding them reads
/// every remembered file's record and stamp). A source that changes afterwards costs
/// nothing but a download: every chunk read from one is verified against its id.
public final class ChunkSources: Sendable {
    /// Where one chunk's bytes are.
    typealias Location = (path: String, offset: Int64, length: Int)
    private let state: ClientState
    private let found = Locked<[ChunkID: Location]?>(nil)

    /// The sources of `state`'s database.
    init(_ state: ClientState) {
        self.state = state
    }

    /// Each chunk's first location on disk.
    func locations() throws -> [ChunkID: Location] {
        if let found = found.value { return found }
        var sources: [ChunkID: Location] = [:]
        for (path, file) in try state.sources() {
            var offset: Int64 = 0
            for chunk in file.chunks {
                if sources[chunk.id] == nil { sources[chunk.id] = (path, offset, chunk.length) }
                offset += Int64(chunk.length)
            }
        }
        found.withLock { $0 = sources }
        return sources
    }
}
