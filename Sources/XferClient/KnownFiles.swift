import Foundation
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

/// Files of a manifest as the state records them: each one's path and chunk list from its entry,
/// with its stamp, made one at a time as the state database takes them (a tree may have hundreds
/// of thousands: no array of them is built). A file whose stamp cannot be had gets no row (the
/// next push reads it again). The files a push read, a pull's files put in place, and a
/// package's files in its staging copy are each one of these, their stamps had three ways.
struct ManifestFiles: Sequence, Sendable {
    let manifest: Manifest
    /// The entry indexes of the files, in order (an entry that is no file is passed over).
    let indexes: SpillArray<Int>
    let stamps: Stamps

    /// Where each file's stamp comes from.
    enum Stamps: Sendable {
        /// The inode and ctime a push read each file with, by position in `indexes` (size and
        /// mtime are the entry's): 16 bytes a file, so the tree can go before the rows are written.
        case read(SpillArray<Identity>)
        /// Looked at now, at the entry's path below the document's path (a pull's files, in place).
        case at(target: String)
        /// Looked at beneath a staging copy's open root directory, never by a path resolved
        /// again (a package's files before its copy is put in place).
        case beneath(ConfinedDirectory)
    }

    struct Identity {
        var inode: UInt64
        var ctimeNanoseconds: Int64
    }

    /// The files a push read: those at tree indexes `only` of `snapshot` (files all:
    /// ``LocalSnapshot/toHash``), whose manifest (made from the same tree, its entries in the same
    /// order) is `manifest`.
    init(_ snapshot: LocalSnapshot, manifest: Manifest, only: SpillArray<Int>) {
        self.manifest = manifest
        let tree = snapshot.tree
        indexes = only  // (shared, not copied)
        stamps = .read(
            SpillArray(
                only.lazy.map {
                    let stamp = tree.stamp(at: $0)
                    return Identity(inode: stamp.inode, ctimeNanoseconds: stamp.ctimeNanoseconds)
                }))
    }

    /// A pull's files at entries `files` of `manifest`, as they are now at `target`.
    init(written manifest: Manifest, files: SpillArray<Int>, target: String) {
        self.manifest = manifest
        indexes = files
        stamps = .at(target: target)
    }

    /// A package's files at entries `files` of `manifest`, as its staging copy (opened at
    /// `root`) holds them.
    init(staged manifest: Manifest, files: SpillArray<Int>, root: ConfinedDirectory) {
        self.manifest = manifest
        indexes = files
        stamps = .beneath(root)
    }

    struct Iterator: IteratorProtocol {
        let files: ManifestFiles
        var position = 0
        /// The directory of the file before, for `.beneath` (files come in path order: a
        /// directory's files together).
        var directory: (path: Substring, opened: ConfinedDirectory?)? = nil

        mutating func next() -> KnownFile? {
            while position < files.indexes.count {
                defer { position += 1 }
                let entry = files.manifest.entries[files.indexes[position]]
                guard entry.kind == .file, let stamp = stamp(of: entry) else { continue }
                return KnownFile(path: entry.path, stamp: stamp, chunks: entry.chunks)
            }
            return nil
        }

        private mutating func stamp(of entry: Manifest.Entry) -> FileStamp? {
            switch files.stamps {
            case .read(let identities):
                let identity = identities[position]
                return FileStamp(
                    size: entry.size, mtimeNanoseconds: entry.mtimeNanoseconds, inode: identity.inode,
                    ctimeNanoseconds: identity.ctimeNanoseconds)
            case .at(let target):
                return FileStamp.of(entry.path.isEmpty ? target : target + "/" + entry.path)
            case .beneath(let root):
                let (parent, name) = PullPlanner.split(entry.path)
                if directory?.path != parent {
                    let opened =
                        parent.isEmpty ? root : try? root.directory(parent.split(separator: "/"), create: false)
                    directory = (parent, opened)
                }
                guard let info = directory?.opened?.status(String(name)), (info.st_mode & S_IFMT) == S_IFREG else {
                    return nil
                }
                return FileStamp(info)
            }
        }
    }

    func makeIterator() -> Iterator { Iterator(files: self) }
}
