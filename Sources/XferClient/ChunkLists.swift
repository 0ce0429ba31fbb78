import XferCore

/// Every read file's chunk list as a push's pipeline makes them: the references in blocks
/// and where each file's end, rather than an array per file. A tree of 200,000 one-chunk
/// files holds 72 bytes a file as arrays (header and reference) and 44 here, and no block is
/// ever copied to grow. A file's array is made when it is read out.
struct ChunkLists: RandomAccessCollection, Sendable {
    /// References per block (160 KiB of them).
    static let blockSize = 4096

    private let blocks: [[Manifest.ChunkReference]]
    /// Where each file's chunks end.
    private let ends: [UInt32]

    /// Made file by file as chunks come (``ChunkLists/Builder``).
    struct Builder {
        private var blocks: [[Manifest.ChunkReference]] = []
        /// Each file's count of chunks.
        private var counts: [UInt32]
        private var total = 0

        /// Lists for `files` files, all empty.
        init(files: Int) {
            counts = Array(repeating: 0, count: files)
        }

        /// Appends a chunk to file `file`'s list. Chunks come file by file, each file's in order.
        mutating func append(_ chunk: Manifest.ChunkReference, toFile file: Int) {
            if total % ChunkLists.blockSize == 0 {
                blocks.append([])
                blocks[blocks.count - 1].reserveCapacity(ChunkLists.blockSize)
            }
            blocks[blocks.count - 1].append(chunk)
            total += 1
            counts[file] += 1
        }

        /// The lists, once every chunk is in.
        consuming func finished() -> ChunkLists {
            var end: UInt32 = 0
            for file in counts.indices {
                end += counts[file]
                counts[file] = end
            }
            return ChunkLists(blocks: blocks, ends: counts)
        }
    }

    private init(blocks: [[Manifest.ChunkReference]], ends: [UInt32]) {
        self.blocks = blocks
        self.ends = ends
    }

    /// No files.
    init() {
        self.init(blocks: [], ends: [])
    }

    var startIndex: Int { 0 }
    var endIndex: Int { ends.count }

    /// File `file`'s chunks, in order.
    subscript(file: Int) -> [Manifest.ChunkReference] {
        let start = file == 0 ? 0 : Int(ends[file - 1]), end = Int(ends[file])
        return (start..<end).map { blocks[$0 / Self.blockSize][$0 % Self.blockSize] }
    }
}
