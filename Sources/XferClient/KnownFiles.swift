import XferCore
import XferProtocol

/// Some of a snapshot's files with their stamps and chunk lists, made one at a time as the
/// state database reads them (a tree may have hundreds of thousands: no array of them is built).
struct KnownFiles: Sequence, Sendable {
    let snapshot: LocalSnapshot
    let chunkLists: FileChunkLists
    /// The tree indexes to give, in order.
    let only: [Int]

    struct Iterator: IteratorProtocol {
        let files: KnownFiles
        var position = 0

        mutating func next() -> KnownFile? {
            let tree = files.snapshot.tree
            while position < files.only.count {
                defer { position += 1 }
                let index = files.only[position]
                guard tree.kind(at: index) == .file, let stamp = files.snapshot.stamps[index],
                    let chunks = files.chunkLists[index]
                else { continue }
                return KnownFile(path: tree.relativePath(at: index), stamp: stamp, chunks: chunks)
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(files: self) }
}

/// The files a push read, as the state records them, made from the manifest the push made
/// (its entries are the tree's, in the same order) and the one thing of each stamp it lacks:
/// 16 bytes a file, so the tree can go before the rows are written.
struct PushedFiles: Sequence, Sendable {
    let manifest: Manifest
    /// The entry indexes of the files read, in order.
    let indexes: SpillArray<Int>
    /// Each one's inode and ctime, by position in `indexes` (size and mtime are the entry's).
    let identities: SpillArray<Identity>
    struct Identity {
        var inode: UInt64
        var ctimeNanoseconds: Int64
    }

    /// The files at tree indexes `only` of `snapshot` (files all: ``LocalSnapshot/toHash``),
    /// whose manifest (made from the same tree) is `manifest`.
    init(_ snapshot: LocalSnapshot, manifest: Manifest, only: SpillArray<Int>) {
        self.manifest = manifest
        let tree = snapshot.tree
        indexes = only  // (shared, not copied)
        identities = SpillArray(
            only.lazy.map {
                let stamp = tree.stamp(at: $0)
                return Identity(inode: stamp.inode, ctimeNanoseconds: stamp.ctimeNanoseconds)
            })
    }

    struct Iterator: IteratorProtocol {
        let files: PushedFiles
        var position = 0

        mutating func next() -> KnownFile? {
            while position < files.indexes.count {
                defer { position += 1 }
                let entry = files.manifest.entries[files.indexes[position]]
                guard entry.kind == .file else { continue }
                let identity = files.identities[position]
                return KnownFile(
                    path: entry.path,
                    stamp: FileStamp(
                        size: entry.size, mtimeNanoseconds: entry.mtimeNanoseconds,
                        inode: identity.inode, ctimeNanoseconds: identity.ctimeNanoseconds),
                    chunks: entry.chunks)
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(files: self) }
}
