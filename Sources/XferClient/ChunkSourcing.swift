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

    /// A chunk to download and every place it goes: the first held inline, since most chunks
    /// go to one place (a pull of 200,000 small files makes no array per chunk).
    struct Download: Equatable {
        var chunk: Manifest.ChunkReference
        var first: PullEngine.Target
        var more: [PullEngine.Target] = []

        /// Every place it goes, in the order they were planned.
        var targets: [PullEngine.Target] { [first] + more }
    }

    /// What to download when every source of `failed` steps (indexes into ``steps``) fell
    /// through: each chunk once, in first-needed order, with every place it goes.
    func downloads(failed: [Int]) -> [Download] {
        var order: [Download] = []
        order.reserveCapacity(failed.count)
        // Only while planning (the downloads hold the places): where each chunk is in `order`,
        // by its first 64 bits (a quarter of a map by whole ids; 200,000 chunks took 31 MB
        // that way), with the rare chunk whose prefix another holds kept by its whole id.
        var position: [UInt64: Int] = [:]
        position.reserveCapacity(failed.count)
        var sharingPrefix: [ChunkID: Int] = [:]
        for index in failed {
            let step = steps[index]
            let target = PullEngine.Target(file: step.file, offset: step.offset)
            let id = step.chunk.id
            let candidate = position[id.prefix]
            if let known = candidate.flatMap({ order[$0].chunk.id == id ? $0 : sharingPrefix[id] }) {
                order[known].more.append(target)
            } else {
                if candidate == nil { position[id.prefix] = order.count } else { sharingPrefix[id] = order.count }
                order.append(Download(chunk: step.chunk, first: target))
            }
        }
        return order
    }
}
