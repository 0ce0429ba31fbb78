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

    /// Each file's chunks in order.
    var files: FileChunks
    /// The places that have a source to try, file by file, offset by offset. A place only the
    /// server has is no step (a first pull of 200,000 files makes none, not 12.8 MB of them).
    var steps: [Step]

    /// Plans a pull of files with these chunk lists.
    /// - Parameters:
    ///   - files: Each file's chunks in order.
    ///   - resuming: A staging copy of this version is there (its chunks are tried first, in place).
    ///   - local: Where chunks are on disk (``ChunkSources``).
    ///   - prefetched: The chunks fetched already.
    static func make(
        files: FileChunks, resuming: Bool, local: [ChunkID: ChunkSources.Location],
        prefetched: Set<ChunkID>
    ) -> ChunkSourcing {
        var steps: [Step] = []
        if resuming { steps.reserveCapacity(files.reduce(0) { $0 + $1.count }) }
        for (file, chunks) in files.enumerated() {
            var offset: Int64 = 0
            for chunk in chunks {
                var sources: [Source] = []
                if resuming { sources.append(.staging) }
                if let source = local[chunk.id] { sources.append(.local(path: source.path, offset: source.offset)) }
                if prefetched.contains(chunk.id) { sources.append(.prefetched) }
                if !sources.isEmpty { steps.append(Step(chunk: chunk, file: file, offset: offset, sources: sources)) }
                offset += Int64(chunk.length)
            }
        }
        return ChunkSourcing(files: files, steps: steps)
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

    /// The downloads of a pull, in order. Each is kept as where its chunk is in ``files`` (24
    /// bytes; a ``Download`` with its chunk's id is 64, 12.8 MB for 200,000 small files) and
    /// made whole when read.
    struct Downloads: RandomAccessCollection, Sendable {
        fileprivate struct Record: Sendable {
            var file: Int32
            var chunk: Int32  // its index in the file's chunk list
            var offset: Int64
            /// Its other places, as a chain through ``more`` (-1: none).
            var firstMore: Int32 = -1
            var lastMore: Int32 = -1
        }
        /// A chunk's place after its first, and where the next one is in ``more`` (-1: none).
        fileprivate struct More: Sendable {
            var target: PullEngine.Target
            var next: Int32 = -1
        }
        let files: FileChunks
        /// Both grow with the number of files, so both spill (``SpillArray``).
        fileprivate var records = SpillArray<Record>()
        fileprivate var more = SpillArray<More>()

        var startIndex: Int { 0 }
        var endIndex: Int { records.count }
        subscript(position: Int) -> Download {
            let record = records[position]
            let file = Int(record.file)
            var others: [PullEngine.Target] = []
            var next = record.firstMore
            while next >= 0 {
                others.append(more[Int(next)].target)
                next = more[Int(next)].next
            }
            return Download(
                chunk: files[file][Int(record.chunk)], first: PullEngine.Target(file: file, offset: record.offset),
                more: others)
        }

        /// Whether at least `count` distinct files hold a download's first place: about how many
        /// files the downloads write. The first places are in file order, so a change of file is
        /// a new one; a file made only of chunks an earlier file needs too is not counted, so
        /// this is a lower bound.
        func writeFiles(atLeast count: Int) -> Bool {
            var files = 0
            var last: Int32 = -1
            for record in records where record.file != last {
                if files >= count { return true }
                last = record.file
                files += 1
            }
            return files >= count
        }

        /// Adds `target` to record `position`'s places.
        fileprivate mutating func add(_ target: PullEngine.Target, to position: Int) {
            guard let index = Int32(exactly: more.count) else {
                preconditionFailure("more than 2^31 repeated chunks in one pull")
            }
            more.append(More(target: target))
            if records[position].lastMore >= 0 {
                more[Int(records[position].lastMore)].next = index
            } else {
                records[position].firstMore = index
            }
            records[position].lastMore = index
        }
    }

    /// What to download: the places no step has, and those of the `failed` steps (indexes
    /// into ``steps``, ascending), every source of which fell through. Each chunk once, in
    /// first-needed order, with every place it goes.
    func downloads(failed: [Int]) -> Downloads {
        let places = files.reduce(0) { $0 + $1.count } - steps.count + failed.count
        var order = Downloads(files: files)
        order.records.reserveCapacity(places)
        // Only while planning (the downloads hold the places): where each chunk is in `order`,
        // by its first 64 bits (``PrefixPositions``: 16 bytes a chunk, where a map by whole ids
        // took 150 and one by prefixes about 42), with the rare chunk whose prefix another holds
        // kept by its whole id.
        var position = PrefixPositions(capacity: places)
        var sharingPrefix: [ChunkID: Int] = [:]
        // The steps and the failed ones are in place order too: each is met by a cursor.
        var nextStep = 0
        var nextFailed = 0
        for (file, chunks) in files.enumerated() {
            var offset: Int64 = 0
            for (index, chunk) in chunks.enumerated() {
                defer { offset += Int64(chunk.length) }
                if nextStep < steps.count && steps[nextStep].file == file && steps[nextStep].offset == offset {
                    let fellThrough = nextFailed < failed.count && failed[nextFailed] == nextStep
                    if fellThrough { nextFailed += 1 }
                    nextStep += 1
                    guard fellThrough else { continue }  // a source yielded it
                }
                let target = PullEngine.Target(file: file, offset: offset)
                let id = chunk.id
                let candidate = position[id.prefix]
                if let known = candidate.flatMap({ order[$0].chunk.id == id ? $0 : sharingPrefix[id] }) {
                    order.add(target, to: known)
                } else {
                    if candidate == nil { position[id.prefix] = order.count } else { sharingPrefix[id] = order.count }
                    guard let file32 = Int32(exactly: file), let index32 = Int32(exactly: index) else {
                        preconditionFailure("more than 2^31 files or chunks in one file")
                    }
                    order.records.append(Downloads.Record(file: file32, chunk: index32, offset: offset))
                }
            }
        }
        // Every step met, every failed one among them: else a place would be neither filled nor downloaded.
        precondition(nextStep == steps.count && nextFailed == failed.count, "failed steps out of order")
        return order
    }
}

/// Each file of a pull's chunk list, in file order: read from the manifest's packed entries by
/// each file's entry index (the indexes the pull keeps anyway: nothing a file of its own).
struct FileChunks: RandomAccessCollection, Sendable, Equatable {
    private let entries: Manifest.Entries
    private let entryIndexes: SpillArray<Int>

    /// File `n`'s chunks are those of entry `entryIndexes[n]` of `entries`.
    init(_ entries: Manifest.Entries, entryIndexes: SpillArray<Int>) {
        self.entries = entries
        self.entryIndexes = entryIndexes
    }

    var startIndex: Int { 0 }
    var endIndex: Int { entryIndexes.count }

    subscript(file: Int) -> Manifest.Chunks { entries.chunks(at: entryIndexes[file]) }

    static func == (a: FileChunks, b: FileChunks) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { $0 == $1 }
    }
}

/// Positions by 64-bit key (a chunk id's first bits), inserted once each: open addressing over
/// two flat arrays, 12 bytes a slot at most three quarters full. The slot a key starts from is
/// the process's seeded hash of it, so ids a server chose cannot be made to collide.
struct PrefixPositions {
    private var keys: [UInt64]
    /// Position + 1 (0: the slot is empty).
    private var values: [UInt32]
    private let mask: Int
    private var count = 0

    /// Room for `capacity` keys.
    init(capacity: Int) {
        var slots = 16
        while slots * 3 < capacity * 4 { slots *= 2 }
        keys = Array(repeating: 0, count: slots)
        values = Array(repeating: 0, count: slots)
        mask = slots - 1
    }

    /// The position of `key`, if it was set; setting one records it (a key is set once).
    subscript(key: UInt64) -> Int? {
        get {
            var slot = Self.start(key) & mask
            while values[slot] != 0 {
                if keys[slot] == key { return Int(values[slot]) - 1 }
                slot = (slot + 1) & mask
            }
            return nil
        }
        set {
            guard let newValue else { preconditionFailure("positions are never removed") }
            guard let stored = UInt32(exactly: newValue + 1) else { preconditionFailure("more than 2^32 positions") }
            var slot = Self.start(key) & mask
            while values[slot] != 0 && keys[slot] != key { slot = (slot + 1) & mask }
            if values[slot] == 0 {
                count += 1
                precondition(count < keys.count, "more positions than the table was made for")
            }
            keys[slot] = key
            values[slot] = stored
        }
    }

    private static func start(_ key: UInt64) -> Int {
        var hasher = Hasher()
        hasher.combine(key)
        return hasher.finalize()
    }
}
