import XferCore

/// Where each chunk of a pull's files comes from, decided before any byte moves: the pure half
/// of a pull (``PullEngine`` does the I/O). For every place a chunk goes, the sources to try
/// in order; what none of them yields (each is verified against the chunk's id when read) is
/// downloaded, once per chunk however many places it goes.
struct ChunkSourcing: Equatable {
    /// A place a chunk's bytes could come from without asking the server.
    enum Source: Equatable {
        /// The staging copy of an interrupted pull of the same version, where the chunk already is.
        case staging
        /// A file on disk that held these bytes when it was last synced.
        case local(path: String, offset: Int64)
        /// Fetched already with other documents' chunks (a sync pass's batch).
        case prefetched
    }

    /// One place a chunk goes: file `file` (its index among the version's files) at `offset`.
    struct Step: Equatable {
        var chunk: Manifest.ChunkReference
        var file: Int
        var offset: Int64
        /// Tried in this order; empty when only the server has it.
        var sources: [Source]
    }

    /// Every place of every chunk, file by file, offset by offset.
    var steps: [Step]

    /// Plans a pull of files with these chunk lists.
    /// - Parameters:
    ///   - files: Each file's chunks in order.
    ///   - resuming: A staging copy of this version is there (its chunks are tried first, in place).
    ///   - local: Where chunks are on disk (``ChunkSources``).
    ///   - prefetched: The chunks fetched already.
    static func make(files: [[Manifest.ChunkReference]], resuming: Bool, local: [ChunkID: ChunkSources.Location],
                     prefetched: Set<ChunkID>) -> ChunkSourcing {
        var steps: [Step] = []
        steps.reserveCapacity(files.reduce(0) { $0 + $1.count })
        for (file, chunks) in files.enumerated() {
            var offset: Int64 = 0
            for chunk in chunks {
                var sources: [Source] = []
                if resuming { sources.append(.staging) }
                if let source = local[chunk.id] { sources.append(.local(path: source.path, offset: source.offset)) }
                if prefetched.contains(chunk.id) { sources.append(.prefetched) }
                steps.append(Step(chunk: chunk, file: file, offset: offset, sources: sources))
                offset += Int64(chunk.length)
            }
        }
        return ChunkSourcing(steps: steps)
    }

    /// What to download when every source of `failed` steps (indexes into ``steps``) fell
    /// through: each chunk once, in first-needed order, with every place it goes.
    func downloads(failed: [Int]) -> (order: [(id: ChunkID, length: Int)], targets: [ChunkID: [PullEngine.Target]]) {
        var order: [(id: ChunkID, length: Int)] = []
        var targets: [ChunkID: [PullEngine.Target]] = [:]
        for index in failed {
            let step = steps[index]
            if targets[step.chunk.id] == nil { order.append((step.chunk.id, step.chunk.length)) }
            targets[step.chunk.id, default: []].append(PullEngine.Target(file: step.file, offset: step.offset))
        }
        return (order, targets)
    }
}
