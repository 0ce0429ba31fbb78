import XferCore

/// Every read file's chunk list as a push's pipeline makes them: all references in one
/// array (``SpillArray``: on disk once large) and where each file's end, rather than an array
/// per file. A tree of 200,000 one-chunk files holds 72 bytes a file as arrays (header and
/// reference) and 44 here. A file's array is made when it is read out.
struct ChunkLists: RandomAccessCollection, Sendable {
    private let references: SpillArray<Manifest.ChunkReference>
    /// Where each file's chunks end.
    private let ends: SpillArray<UInt32>

    /// Made file by file as chunks come (``ChunkLists/Builder``).
    struct Builder {
        private var references = SpillArray<Manifest.ChunkReference>()
        /// Each file's count of chunks.
        private var counts: SpillArray<UInt32>

        /// Lists for `files` files, all empty.
        init(files: Int) {
            counts = SpillArray(repeating: 0, count: files)
        }

        /// Appends a chunk to file `file`'s list. Chunks come file by file, each file's in order.
        mutating func append(_ chunk: Manifest.ChunkReference, toFile file: Int) {
            references.append(chunk)
            counts[file] += 1
        }

        /// The lists, once every chunk is in.
        consuming func finished() -> ChunkLists {
            var end: UInt32 = 0
            for file in counts.indices {
                end += counts[file]
                counts[file] = end
            }
            return ChunkLists(references: references, ends: counts)
        }
    }

    private init(references: SpillArray<Manifest.ChunkReference>, ends: SpillArray<UInt32>) {
        self.references = references
        self.ends = ends
    }

    /// No files.
    init() {
        self.init(references: [], ends: [])
    }

    var startIndex: Int { 0 }
    var endIndex: Int { ends.count }

    /// File `file`'s chunks, in order.
    subscript(file: Int) -> [Manifest.ChunkReference] {
        let start = file == 0 ? 0 : Int(ends[file - 1])
        let end = Int(ends[file])
        return Array(references[start..<end])
    }
}

/// Each file's chunk list by tree index, as a push knows them (from the state's rows, then
/// from its reading), packed: the references of all files in two flat arrays and 8 bytes a
/// file saying where its list lies, or that it is not known. An array a file took about 80
/// bytes for a one-chunk file and 8 for an unknown one; here 44 and 8. A list is set once
/// (setting one again leaves the old one's references unused until the whole goes).
struct FileChunkLists: RandomAccessCollection, MutableCollection, ExpressibleByArrayLiteral, Sendable {
    private struct Span: Sendable {
        var start: UInt32
        var count: UInt32
    }
    /// A span's count for a file whose list is not known.
    private static let unknown = UInt32.max

    private var ids = SpillArray<ChunkID>()
    private var lengths = SpillArray<UInt32>()
    private var spans: SpillArray<Span>

    /// Lists for `files` files, none known.
    init(files: Int = 0) {
        spans = SpillArray(repeating: Span(start: 0, count: Self.unknown), count: files)
    }

    /// The lists of a manifest's entries, by entry index (empty for what is not a file).
    init(of manifest: Manifest) {
        self.init(files: manifest.entries.count)
        for index in manifest.entries.indices { self[index] = Array(manifest.entries.chunks(at: index)) }
    }

    init(arrayLiteral lists: [Manifest.ChunkReference]?...) {
        self.init(files: lists.count)
        for (index, list) in lists.enumerated() { self[index] = list }
    }

    var startIndex: Int { 0 }
    var endIndex: Int { spans.count }

    /// File `index`'s list, made now (`nil`: not known).
    subscript(index: Int) -> [Manifest.ChunkReference]? {
        get { chunks(at: index).map { Array($0) } }
        set {
            guard let list = newValue else {
                spans[index] = Span(start: 0, count: Self.unknown)
                return
            }
            precondition(ids.count + list.count < Int(UInt32.max), "more than 2^32 chunk references in one push")
            spans[index] = Span(start: UInt32(ids.count), count: UInt32(list.count))
            for chunk in list {
                ids.append(chunk.id)
                lengths.append(UInt32(clamping: chunk.length))
            }
        }
    }

    /// Whether file `index`'s list is known.
    func isKnown(_ index: Int) -> Bool { spans[index].count != Self.unknown }

    /// File `index`'s list, read in place (`nil`: not known).
    func chunks(at index: Int) -> Manifest.Chunks? {
        let span = spans[index]
        guard span.count != Self.unknown else { return nil }
        return Manifest.Chunks(ids: ids, lengths: lengths, range: Int(span.start)..<Int(span.start + span.count))
    }

    /// References held, over all files.
    var referenceCount: Int { ids.count }
}
