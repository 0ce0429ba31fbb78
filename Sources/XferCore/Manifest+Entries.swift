extension Manifest {
    /// A manifest's entries, packed: every path's bytes in one buffer (``PackedNames``), every
    /// chunk reference in two flat arrays (ids, lengths), and a fixed 24-byte record an entry
    /// saying where its chunks end. A package of 200,000 one-chunk files held about 190 bytes an entry as
    /// ``Entry`` values (a path string, an array of chunks and the entry itself, each its own
    /// allocation) and holds its path's bytes plus 60 here, in five allocations in all.
    ///
    /// It is a collection of ``Entry`` values, each made when it is read (its path a new string,
    /// its chunks a new array): hot loops read the parts they need instead (``path(at:)``,
    /// ``pathBytes(at:)``, ``chunks(at:)``, ``kind(at:)``), which make nothing.
    public struct Entries: RandomAccessCollection, Sendable, Hashable {
        /// One entry: where its chunks end in the shared lists, and its metadata.
        struct Record: Sendable, Hashable {
            var mtimeNanoseconds: Int64
            var chunkEnd: UInt32
            var mode: UInt32
            var kind: EntryKind
        }

        private(set) var names = PackedNames()
        private(set) var records = SpillArray<Record>()
        private(set) var ids = SpillArray<ChunkID>()
        private(set) var lengths = SpillArray<UInt32>()
        /// Symlink targets by entry index (symlinks are few).
        private(set) var targets: [Int: String] = [:]
        /// Whether the names passed 4 GiB: the builder throws `too_large`.
        var overflowed: Bool { names.overflowed }

        /// No entries.
        public init() {}

        public var startIndex: Int { 0 }
        public var endIndex: Int { records.count }

        /// Entry `index`, made now (its path and chunk list are new values).
        public subscript(index: Int) -> Entry {
            let record = records[index]
            return Entry(
                path: path(at: index), kind: record.kind, mode: record.mode, mtimeNanoseconds: record.mtimeNanoseconds,
                chunks: Array(chunks(at: index)), symlinkTarget: targets[index])
        }

        /// Where entry `index`'s chunks lie in ``ids`` and ``lengths``.
        @inline(__always)
        func chunkRange(_ index: Int) -> Range<Int> {
            (index == 0 ? 0 : Int(records[index - 1].chunkEnd))..<Int(records[index].chunkEnd)
        }

        /// Entry `index`'s path.
        public func path(at index: Int) -> String { names.string(at: index) }

        /// Entry `index`'s path as UTF-8 bytes, read in place.
        public func pathBytes(at index: Int) -> PackedNames.Bytes { names[index] }

        /// Entry `index`'s kind.
        public func kind(at index: Int) -> EntryKind { records[index].kind }

        /// Entry `index`'s permission bits.
        public func mode(at index: Int) -> UInt32 { records[index].mode }

        /// Entry `index`'s modification time.
        public func mtimeNanoseconds(at index: Int) -> Int64 { records[index].mtimeNanoseconds }

        /// Entry `index`'s symlink target (symlinks only).
        public func symlinkTarget(at index: Int) -> String? { targets[index] }

        /// Entry `index`'s chunks, read in place.
        public func chunks(at index: Int) -> Chunks { Chunks(ids: ids, lengths: lengths, range: chunkRange(index)) }

        /// Entry `index`'s size (see ``Entry/size``).
        public func size(at index: Int) -> Int64 {
            switch records[index].kind {
            case .file: return lengths[chunkRange(index)].reduce(Int64(0)) { $0 + Int64($1) }
            case .symlink: return Int64(targets[index]?.utf8.count ?? 0)
            case .directory: return 0
            }
        }

        /// Every chunk reference of every entry, in order.
        var allChunks: Chunks { Chunks(ids: ids, lengths: lengths, range: 0..<ids.count) }

        /// The sum of every chunk's length.
        var chunkBytes: Int64 { lengths.reduce(Int64(0)) { $0 + Int64($1) } }

        /// The index of the entry whose path is `path` (bytes), by binary search: entries are
        /// in path order once checked.
        public func index(ofPath path: some Collection<UInt8>) -> Int? { names.index(of: path) }

        mutating func reserve(entries: Int, nameBytes: Int, chunks: Int) {
            records.reserveCapacity(entries)
            names.reserve(count: entries, bytes: nameBytes)
            reserveChunks(chunks)
        }

        /// Appends an entry with no chunks yet (``appendChunk(_:)`` adds them).
        mutating func append(
            path: some Collection<UInt8>, kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64,
            symlinkTarget: String?
        ) {
            names.append(path)
            if let symlinkTarget { targets[records.count] = symlinkTarget }
            records.append(
                Record(
                    mtimeNanoseconds: mtimeNanoseconds, chunkEnd: UInt32(truncatingIfNeeded: ids.count),
                    mode: mode, kind: kind))
        }

        /// Entries for these names (in this order), their records to come (``appendRecord``):
        /// the names are shared, not copied.
        init(names: PackedNames) {
            self.names = names
            records.reserveCapacity(names.count)
        }

        mutating func reserveChunks(_ chunks: Int) {
            ids.reserveCapacity(chunks)
            lengths.reserveCapacity(chunks)
        }

        /// Appends the record of the entry whose name is the next without one.
        mutating func appendRecord(kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64, symlinkTarget: String?) {
            precondition(records.count < names.count, "a record for a name that is not there")
            if let symlinkTarget { targets[records.count] = symlinkTarget }
            records.append(
                Record(
                    mtimeNanoseconds: mtimeNanoseconds, chunkEnd: UInt32(truncatingIfNeeded: ids.count),
                    mode: mode, kind: kind))
        }

        /// Appends a chunk to the last entry's list.
        mutating func appendChunk(_ chunk: ChunkReference) {
            ids.append(chunk.id)
            // A length above 4 GiB is out of any chunker's bounds: it is kept past them (so the
            // manifest's check refuses it), never wrapped into them.
            lengths.append(UInt32(clamping: chunk.length))
            records[records.count - 1].chunkEnd = UInt32(truncatingIfNeeded: ids.count)
        }

        /// Appends an entry whole.
        mutating func append(_ entry: Entry) {
            append(
                path: entry.path.utf8, kind: entry.kind, mode: entry.mode, mtimeNanoseconds: entry.mtimeNanoseconds,
                symlinkTarget: entry.symlinkTarget)
            for chunk in entry.chunks { appendChunk(chunk) }
        }
    }

    /// One entry's chunk references, read in place from a manifest's packed entries (indices
    /// from 0, as an array's).
    public struct Chunks: RandomAccessCollection, Sendable, Equatable {
        private let ids: SpillArray<ChunkID>
        private let lengths: SpillArray<UInt32>
        private let base: Int
        public let endIndex: Int
        public var startIndex: Int { 0 }

        /// The references at `range` of `ids` and `lengths` (each length as stored: see ``Manifest/Entries``).
        package init(ids: SpillArray<ChunkID>, lengths: SpillArray<UInt32>, range: Range<Int>) {
            self.ids = ids
            self.lengths = lengths
            self.base = range.lowerBound
            self.endIndex = range.count
        }

        /// The references of an array, packed the same way.
        public init(_ chunks: [ChunkReference]) {
            self.init(
                ids: SpillArray(chunks.lazy.map(\.id)),
                lengths: SpillArray(chunks.lazy.map { UInt32(clamping: $0.length) }),
                range: 0..<chunks.count)
        }

        /// No references.
        public static let none = Chunks(ids: [], lengths: [], range: 0..<0)

        /// Reference `position`.
        public subscript(position: Int) -> ChunkReference {
            ChunkReference(id: ids[base + position], length: Int(lengths[base + position]))
        }

        /// The same references in the same order, wherever each list lies.
        public static func == (a: Chunks, b: Chunks) -> Bool { a.elementsEqual(b) }

        /// The ids alone.
        public var chunkIDs: Slice<SpillArray<ChunkID>> { ids[base..<(base + endIndex)] }
    }

    /// Builds a manifest entry by entry, straight into its packed form (no ``Entry`` values):
    /// how manifests are decoded, rebuilt from deltas, and made from a walked tree.
    public struct Builder {
        private var entries = Entries()
        private let kind: Kind
        private let chunker: ChunkerConfiguration

        /// A builder for a manifest of `kind` cut with `chunker`, with room reserved.
        public init(kind: Kind, chunker: ChunkerConfiguration, entries: Int = 0, nameBytes: Int = 0, chunks: Int = 0) {
            self.kind = kind
            self.chunker = chunker
            self.entries.reserve(entries: entries, nameBytes: nameBytes, chunks: chunks)
        }

        /// A builder for the entries named by `names` (in path order), in that order: each
        /// entry's path is the name at its position, shared with whoever holds `names` (a walked
        /// tree's, ``TreeEntries/packedNames``), not copied. Entries are added with
        /// ``appendEntry(kind:mode:mtimeNanoseconds:symlinkTarget:)``.
        public init(kind: Kind, chunker: ChunkerConfiguration, names: PackedNames, chunks: Int = 0) {
            self.kind = kind
            self.chunker = chunker
            self.entries = Entries(names: names)
            self.entries.reserveChunks(chunks)  // (the names are left alone: reserving room would copy them)
            self.namesGiven = true
        }

        /// Whether the names came with the builder (entries then come without paths).
        private var namesGiven = false

        /// Entries so far.
        public var count: Int { entries.count }

        /// Appends the next entry of a builder made with its names (path order is theirs).
        public mutating func appendEntry(
            kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64, symlinkTarget: String? = nil
        ) {
            precondition(namesGiven, "entries without paths need a builder made with their names")
            entries.appendRecord(
                kind: kind, mode: mode, mtimeNanoseconds: mtimeNanoseconds, symlinkTarget: symlinkTarget)
        }

        /// Appends an entry; entries must come in path order (``finish()`` checks).
        public mutating func append(
            path: some Collection<UInt8>, kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64,
            symlinkTarget: String? = nil
        ) {
            precondition(!namesGiven, "a builder made with its names takes entries without paths")
            entries.append(
                path: path, kind: kind, mode: mode, mtimeNanoseconds: mtimeNanoseconds, symlinkTarget: symlinkTarget)
        }

        /// Appends a chunk to the last entry.
        public mutating func appendChunk(_ chunk: ChunkReference) { entries.appendChunk(chunk) }

        /// Appends chunks to the last entry.
        public mutating func appendChunks(_ chunks: some Sequence<ChunkReference>) {
            for chunk in chunks { entries.appendChunk(chunk) }
        }

        /// Appends an entry whole.
        public mutating func append(_ entry: Entry) {
            precondition(!namesGiven, "a builder made with its names takes entries without paths")
            entries.append(entry)
        }

        /// The manifest, checked as every manifest is.
        /// - Throws: `invalid_manifest`, `invalid_path` or `too_large`, as ``Manifest/init(kind:chunker:entries:)``,
        ///   and `invalid_manifest` for entries out of path order.
        public consuming func finish() throws -> Manifest {
            guard !entries.overflowed else {
                throw XferError(.tooLarge, "manifest names take over 4 GiB, more than a document may hold")
            }
            guard entries.names.count == entries.count else {
                throw XferError(
                    .invalidManifest, "\(entries.names.count) names were given for \(entries.count) entries")
            }
            return try Manifest(kind: kind, chunker: chunker, packed: entries)
        }
    }
}
