import Testing

@testable import XferCore

/// The packed tree a walk makes (``TreeEntries``) and the names it shares with manifests.
@Suite struct TreeEntriesTests {
    static let entries: [TreeEntry] = [
        TreeEntry(
            relativePath: "b", kind: .directory, mode: 0o755, size: 0, mtimeNanoseconds: 5, inode: 10,
            ctimeNanoseconds: 6),
        TreeEntry(
            relativePath: "b/c", kind: .file, mode: 0o644, size: 12, mtimeNanoseconds: 7, inode: 11, ctimeNanoseconds: 8
        ),
        TreeEntry(
            relativePath: "b-x", kind: .symlink, mode: 0o777, size: 3, mtimeNanoseconds: -1, symlinkTarget: "b/c",
            inode: 12, ctimeNanoseconds: 9),
        TreeEntry(
            relativePath: "a.txt", kind: .file, mode: 0o600, size: 0, mtimeNanoseconds: 1_700_000_000_000_000_001,
            inode: 13, ctimeNanoseconds: 2)
    ]

    @Test func eachEntryReadsBackAsItWasGiven() {
        let tree = TreeEntries(Self.entries)
        #expect(Array(tree) == Self.entries)
        for (index, entry) in Self.entries.enumerated() {
            #expect(tree.relativePath(at: index) == entry.relativePath)
            #expect(Array(tree.pathBytes(at: index)) == Array(entry.relativePath.utf8))
            #expect(tree.kind(at: index) == entry.kind)
            #expect(tree.mode(at: index) == entry.mode)
            #expect(tree.size(at: index) == entry.size)
            #expect(tree.mtimeNanoseconds(at: index) == entry.mtimeNanoseconds)
            #expect(tree.symlinkTarget(at: index) == entry.symlinkTarget)
            #expect(tree.stamp(at: index) == entry.stamp)
        }
        #expect(tree.nameBytes == Self.entries.reduce(0) { $0 + $1.relativePath.utf8.count })
    }

    @Test func sortingPutsEntriesInBytewiseOrderWithTheirTargets() {
        let sorted = TreeEntries(Self.entries).sortedByPath()
        // "-" and "." sort before "/": "b-x" comes between "b" and "b/c".
        #expect(sorted.map(\.relativePath) == ["a.txt", "b", "b-x", "b/c"])
        #expect(Array(sorted) == Self.entries.sorted { PathOrder.precedes($0.relativePath, $1.relativePath) })
        #expect(sorted.symlinkTarget(at: 2) == "b/c" && sorted.symlinkTarget(at: 3) == nil)
        // Already in order: the same entries, unchanged.
        #expect(Array(sorted.sortedByPath()) == Array(sorted))
    }

    @Test func aWalkListsWhatTheEntriesSay() throws {
        let root = TemporaryDirectory()
        defer { root.remove() }
        root.write("z.txt", Array("z".utf8))
        root.write("d/inner", Array("inner".utf8))
        let tree = try DirectoryWalker.walk(root.path)
        #expect(tree.map(\.relativePath) == ["d", "d/inner", "z.txt"])
        #expect(tree.size(at: 1) == 5 && tree.kind(at: 0) == .directory)
        #expect(tree.stamp(at: 2) == (try DirectoryWalker.entry(at: root.path + "/z.txt")).stamp)
    }

    @Test func packedNamesAreFoundByTheirBytes() {
        var names = PackedNames()
        for name in ["", "a", "a/b", "ab", "é"] { names.append(name.utf8) }
        #expect(names.count == 5 && names.isInOrder)
        #expect(names.index(of: "a/b".utf8) == 2)
        #expect(names.index(of: "".utf8) == 0)
        #expect(names.index(of: "b".utf8) == nil)
        #expect(names.string(at: 4) == "é")
        names.append("a".utf8)
        #expect(!names.isInOrder)
    }

    @Test func aManifestMadeOnATreesNamesIsTheManifestOfItsEntries() throws {
        let tree = TreeEntries(Self.entries).sortedByPath()
        let id = ChunkID.of([1])
        var builder = Manifest.Builder(kind: .package, chunker: .default, names: tree.packedNames)
        for index in tree.indices {
            builder.appendEntry(
                kind: tree.kind(at: index), mode: tree.mode(at: index),
                mtimeNanoseconds: tree.mtimeNanoseconds(at: index), symlinkTarget: tree.symlinkTarget(at: index))
            if tree.kind(at: index) == .file, tree.size(at: index) > 0 {
                builder.appendChunk(.init(id: id, length: Int(tree.size(at: index))))
            }
        }
        let shared = try builder.finish()
        let made = try Manifest(
            kind: .package, chunker: .default,
            entries: tree.map { entry in
                Manifest.Entry(
                    path: entry.relativePath, kind: entry.kind, mode: entry.mode,
                    mtimeNanoseconds: entry.mtimeNanoseconds,
                    chunks: entry.kind == .file && entry.size > 0 ? [.init(id: id, length: Int(entry.size))] : [],
                    symlinkTarget: entry.symlinkTarget)
            })
        #expect(shared == made)
        #expect(shared.encoded() == made.encoded())
        // Names left without an entry: refused, not a manifest of fewer entries.
        var short = Manifest.Builder(kind: .package, chunker: .default, names: tree.packedNames)
        short.appendEntry(kind: .file, mode: 0o644, mtimeNanoseconds: 0)
        let error = #expect(throws: XferError.self) { try short.finish() }
        #expect(error?.code == .invalidManifest)
    }
}
