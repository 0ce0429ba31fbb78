import XferCore
import XferProtocol

/// A push's decisions, made without I/O from what the client already knows: the version the
/// new one is based on, whether there is anything to do, which chunks the server surely has,
/// which files must be read, and where the bytes of each chunk to send are. ``PushEngine``
/// gathers the facts (the local snapshot, the client state, the server's answers) and does the
/// I/O these name; `PushDecisionsTests` tests them alone (as ``ChunkSourcing`` does for a pull).
enum PushDecisions {
    /// The version a push is based on: the one this root last synced, or with `force` whatever
    /// is current on the server (none if the document is deleted or never was).
    static func baseVersion(synced: Int64?, force: Bool, serverCurrent: DocumentInfo?) -> Int64? {
        guard force else { return synced }
        return serverCurrent.flatMap { $0.state == .current ? $0.version : nil }
    }

    /// Whether nothing needs doing: not forced, based on the synced version, and the snapshot
    /// makes the same manifest (`unchanged`).
    static func isNoOp(force: Bool, synced: SyncedDocument?, baseVersion: Int64?, unchanged: Bool) -> Bool {
        guard !force, let synced else { return false }
        return baseVersion == synced.version && unchanged
    }

    /// The chunks the server surely holds for this account: those of the base version, when
    /// that is the version this root holds (the server keeps a version's chunks while it is
    /// kept). Never asked about, never sent: by prefix, as a chunk taken for one of them by
    /// mistake is sent when the commit answers `missing_chunks` (``ChunkIDPrefixes``).
    static func onServer(baseVersion: Int64?, synced: SyncedDocument?) -> ChunkIDPrefixes {
        guard let synced, baseVersion == synced.version else { return [] }
        var ids = ChunkIDPrefixes()
        ids.formUnion(chunksOf: synced.manifest)
        return ids
    }

    /// The files to read: the changed ones, then unchanged ones whose chunk list is no longer
    /// recorded (a record removed since the stamps were read).
    static func filesToRead(changed: SpillArray<Int>, unchanged: SpillArray<Int>, chunkLists: FileChunkLists)
        -> SpillArray<Int>
    {
        let unread = unchanged.filter { !chunkLists.isKnown($0) }
        guard !unread.isEmpty else { return changed }  // (shares the list it was given)
        var all = changed
        all.append(contentsOf: unread)
        return all
    }

    /// Whether a push reads its changed files before it announces a version, to find whether
    /// their content changed at all (as a batch push finds it): unforced, based on a version the
    /// server is taken to hold, with files to read of ``PushEngine/rereadBytes`` at most. A
    /// larger document is announced before its data is read, and makes a version.
    static func rereadsFirst(force: Bool, basis: SyncedDocument?, changedSizes: some Sequence<Int64>) -> Bool {
        guard !force, basis != nil else { return false }
        var bytes: Int64 = 0
        var any = false
        for size in changedSizes {
            bytes += size
            any = true
        }
        return any && bytes <= PushEngine.rereadBytes
    }

    /// How a push's manifest says its chunks were cut: as the synced version's were when it read
    /// nothing (every chunk list is that version's), else as this push's pipeline cuts.
    static func chunker(readAny: Bool, synced: SyncedDocument?, configured: ChunkerConfiguration)
        -> ChunkerConfiguration
    {
        guard !readAny, let synced else { return configured }
        return synced.manifest.chunker
    }

    /// The bytes of the files whose chunk lists are known (`size` gives a file's, by tree index):
    /// hashed already, as a push's progress counts them.
    static func knownBytes(_ chunkLists: FileChunkLists, size: (Int) -> Int64?) -> Int64 {
        chunkLists.indices.reduce(Int64(0)) { $0 + (chunkLists.isKnown($1) ? size($1) ?? 0 : 0) }
    }

    /// Where the bytes of each chunk `include` picks are, in file order, from the files whose
    /// chunk lists are known, counted as `owner`'s (a batch's document). `include` sees every
    /// chunk and may keep state (to pick each once).
    static func locations(
        _ chunkLists: FileChunkLists, path: (Int) -> String, owner: Int = 0,
        include: (ChunkID) -> Bool
    ) -> [PushEngine.Location] {
        var result: [PushEngine.Location] = []
        for index in chunkLists.indices {
            guard let chunks = chunkLists.chunks(at: index) else { continue }
            var offset: Int64 = 0
            for chunk in chunks {
                if include(chunk.id) {
                    result.append(
                        PushEngine.Location(
                            id: chunk.id, file: path(index), offset: offset, length: chunk.length,
                            owner: owner))
                }
                offset += Int64(chunk.length)
            }
        }
        return result
    }

    /// What to send before any file is read: each chunk of the known files that the server
    /// does not surely hold, once. `queued` is what it picked, so the files read next skip those.
    static func initialUpload(
        _ chunkLists: FileChunkLists, path: (Int) -> String,
        onServer: ChunkIDPrefixes
    ) -> (locations: [PushEngine.Location], queued: ChunkIDPrefixes) {
        var queued = ChunkIDPrefixes()
        let locations = locations(chunkLists, path: path) { !onServer.contains($0) && queued.insert($0) }
        return (locations, queued)
    }

    /// What to send again when a commit answers that the server lacks `missing` (a base from
    /// another root, say): each once, from wherever this push read it.
    static func resend(_ missing: [ChunkID], _ chunkLists: FileChunkLists, path: (Int) -> String) -> [PushEngine
        .Location]
    {
        var wanted = Set(missing)
        return locations(chunkLists, path: path) { wanted.remove($0) != nil }
    }
}
