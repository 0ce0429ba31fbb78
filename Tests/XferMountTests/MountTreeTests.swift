import Testing
import XferCore
import XferProtocol

@testable import XferMount

@Suite("MountTree")
struct MountTreeTests {
    static func info(
        _ path: String, version: Int64 = 1, state: VersionState = .current, kind: DocumentKind = .file,
        size: Int64 = 10, chunks: Int? = 1
    ) -> DocumentInfo {
        DocumentInfo(
            path: try! DocumentPath(path), version: version, state: state, kind: kind, size: size,
            mtimeNs: 1_700_000_000_000_000_000, mode: 0o640, baseVersion: nil, manifestDigest: nil, files: 1,
            chunks: chunks, device: nil, sequence: version)
    }

    /// A package's manifest: directory `dir`, file `dir/f` of 3 bytes, symlink `ln`.
    static func packageManifest() throws -> Manifest {
        let chunk = Manifest.ChunkReference(id: ChunkID.of(Array("abc".utf8)), length: 3)
        return try Manifest(
            kind: .package, chunker: .default,
            entries: [
                Manifest.Entry(path: "dir", kind: .directory, mode: 0o700, mtimeNanoseconds: 1),
                Manifest.Entry(path: "dir/f", kind: .file, mode: 0o600, mtimeNanoseconds: 2, chunks: [chunk]),
                Manifest.Entry(path: "ln", kind: .symlink, mode: 0o777, mtimeNanoseconds: 3, symlinkTarget: "dir/f")
            ])
    }

    func number(_ tree: MountTree, _ path: String) -> UInt64? {
        var current = MountTree.root
        for name in path.split(separator: "/") {
            guard let (next, _) = tree.lookup(current, String(name)) else { return nil }
            current = next
        }
        return current
    }

    @Test("documents show under the directories their paths imply, with their attributes")
    func impliedDirectories() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/a/b.txt", size: 42))
        tree.apply(Self.info("Documents/a/link", size: 7, chunks: 0))
        tree.apply(Self.info("Data/empty", kind: .directory, size: 0, chunks: 0))
        #expect(tree.children(of: MountTree.root).map(\.name) == ["Data", "Documents"])
        let file = tree[number(tree, "Documents/a/b.txt")!]!
        #expect(file.kind == .file && file.size == 42 && file.mode == 0o640)
        #expect(tree[number(tree, "Documents/a/link")!]!.kind == .symlink)
        #expect(tree[number(tree, "Data/empty")!]!.kind == .directory)
        #expect(tree[number(tree, "Documents/a")!]!.origin == .implied)
        #expect(tree.path(of: number(tree, "Documents/a/b.txt")!) == "Documents/a/b.txt")
    }

    @Test(
        "a file's newer version is a new inode, the old one kept until forgotten; an older one or an upload changes nothing"
    )
    func versions() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/x", version: 2, size: 1))
        let before = number(tree, "Documents/x")!
        #expect(tree.apply(Self.info("Documents/x", version: 1, size: 99)).isEmpty)
        #expect(tree.apply(Self.info("Documents/x", version: 3, state: .uploading, size: 99)).isEmpty)
        let invalidations = tree.apply(Self.info("Documents/x", version: 4, size: 7))
        let after = number(tree, "Documents/x")!
        #expect(after != before && tree[after]!.size == 7 && tree[before]!.size == 1)
        #expect(invalidations == [.entry(parent: tree[after]!.parent, name: "x")])
        tree.forget(before)
        #expect(tree[before] == nil && tree[after] != nil)
    }

    @Test(
        "a deletion removes the node and the implied directories it leaves empty, and is not undone by an older listing"
    )
    func deletion() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/a/b/c", version: 1))
        tree.apply(Self.info("Documents/keep", version: 1))
        tree.apply(Self.info("Documents/a/b/c", version: 2, state: .deleted))
        #expect(number(tree, "Documents/a") == nil)
        #expect(number(tree, "Documents/keep") != nil)
        tree.apply(Self.info("Documents/a/b/c", version: 1))
        #expect(number(tree, "Documents/a/b/c") == nil)
    }

    @Test("a package's entries show once its manifest is given, and go when a newer version comes")
    func package() throws {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/P.pkg", version: 1, kind: .package, size: 3))
        let package = number(tree, "Documents/P.pkg")!
        #expect(tree.needsManifest(package) != nil)
        let manifest = try Self.packageManifest()
        let stale = tree.fill(package, with: manifest, version: 9)
        let filled = tree.fill(package, with: manifest, version: 1)
        #expect(!stale && filled)
        #expect(tree.needsManifest(package) == nil)
        let file = number(tree, "Documents/P.pkg/dir/f")!
        #expect(tree[file]!.size == 3 && tree[file]!.origin == .entry(package: package, index: 1))
        #expect(tree.path(of: file) == "Documents/P.pkg/dir/f")
        #expect(tree[number(tree, "Documents/P.pkg/dir")!]!.mode == 0o700)
        #expect(tree[number(tree, "Documents/P.pkg/ln")!]!.kind == .symlink)
        let invalidations = tree.apply(Self.info("Documents/P.pkg", version: 2, kind: .package, size: 3))
        #expect(number(tree, "Documents/P.pkg/dir") == nil)
        #expect(tree.needsManifest(package) != nil && number(tree, "Documents/P.pkg") == package)
        #expect(invalidations.contains(.entry(parent: package, name: "ln")) && invalidations.contains(.inode(package)))
        tree.fill(package, with: manifest, version: 2)
        #expect(number(tree, "Documents/P.pkg/dir/f") != file)
    }

    @Test("a document below a file (a hostile listing) replaces the file with a directory of a new number")
    func documentBelowAFile() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/a"))
        let file = number(tree, "Documents/a")!
        tree.apply(Self.info("Documents/a/b"))
        let directory = number(tree, "Documents/a")!
        #expect(directory != file && tree[directory]!.kind == .directory && tree[file]!.kind == .file)
        #expect(number(tree, "Documents/a/b") != nil)
    }

    @Test("a file written here stays as written until its upload settles it, under the same inode")
    func stagedFiles() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/a", version: 3, size: 10))
        let (number, _) = tree.stage("Documents/a", mode: 0o600, size: 12, mtimeNanoseconds: 9)
        #expect(number == self.number(tree, "Documents/a") && tree[number]!.origin == .staged(base: 3))
        // Another device's version meanwhile does not replace what is written here.
        #expect(tree.apply(Self.info("Documents/a", version: 4, size: 99)).isEmpty)
        #expect(tree[number]!.size == 12)
        let ours = Self.info("Documents/a", version: 5, size: 12)
        tree.settle(ours, current: ours)
        #expect(self.number(tree, "Documents/a") == number && tree[number]!.origin == .document(ours))
        // A new file, then an upload that became a conflict version: the current one shows, anew.
        let (new, invalidations) = tree.stage("Documents/b/c", mode: 0o644, size: 1, mtimeNanoseconds: 9)
        #expect(tree[new]!.origin == .staged(base: nil) && !invalidations.isEmpty)
        let theirs = Self.info("Documents/b/c", version: 2, size: 7)
        tree.settle(Self.info("Documents/b/c", version: 1, state: .conflict, size: 1), current: theirs)
        #expect(self.number(tree, "Documents/b/c") != new && tree[self.number(tree, "Documents/b/c")!]!.size == 7)
    }

    @Test("a rename moves the file under its own inode onto the target's version, and prunes what it leaves")
    func moves() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/x/a", version: 2))
        tree.apply(Self.info("Documents/b", version: 7))
        let moved = number(tree, "Documents/x/a")!
        let target = number(tree, "Documents/b")!
        tree.move("Documents/x/a", to: "Documents/b", base: tree.base(of: "Documents/b"))
        #expect(number(tree, "Documents/b") == moved && tree[moved]!.origin == .staged(base: 7))
        #expect(number(tree, "Documents/x") == nil && tree[target] != nil)  // retired, kept until forgotten
        tree.rebase("Documents/b", on: 8)
        #expect(tree[moved]!.origin == .staged(base: 8) && tree.base(of: "Documents/b") == 8)
    }

    @Test("inside a package is a package's; beside it is not")
    func packages() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/P.pkg", kind: .package))
        tree.apply(Self.info("Documents/f"))
        let package = number(tree, "Documents/P.pkg")!
        #expect(tree.package(containing: package) == package)
        #expect(tree.package(containing: number(tree, "Documents/f")!) == nil)
        #expect(tree.package(containing: MountTree.root) == nil)
    }

    @Test("a directory document keeps the documents below it across its own versions")
    func directoryDocument() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(Self.info("Documents/d/inner", version: 1))
        tree.apply(Self.info("Documents/d", version: 1, kind: .directory, size: 0, chunks: 0))
        tree.apply(Self.info("Documents/d", version: 2, kind: .directory, size: 0, chunks: 0))
        #expect(number(tree, "Documents/d/inner") != nil)
        tree.apply(Self.info("Documents/d", version: 3, state: .deleted, kind: .directory))
        #expect(number(tree, "Documents/d/inner") != nil)
    }

    @Test("a file's upload told of an older version than the feed did meanwhile: the newer shows")
    func fileNewerWhileUploading() {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.stage("Documents/f", mode: 0o644, size: 1, mtimeNanoseconds: 1)
        tree.apply(Self.info("Documents/f", version: 5, size: 55))
        let ours = Self.info("Documents/f", version: 4, size: 1)
        tree.settle(ours, current: ours)
        #expect(tree[number(tree, "Documents/f")!]?.size == 55)
        // Deleted meanwhile: it goes.
        tree.stage("Documents/g", mode: 0o644, size: 1, mtimeNanoseconds: 1)
        tree.apply(Self.info("Documents/g", version: 7, state: .deleted))
        let mine = Self.info("Documents/g", version: 6, size: 1)
        tree.settle(mine, current: mine)
        #expect(number(tree, "Documents/g") == nil)
    }
}

@Suite("FileChunks")
struct FileChunksTests {
    let chunks = FileChunks(
        [4, 3, 5].enumerated().map { index, length in
            Manifest.ChunkReference(id: ChunkID.of([UInt8(index)]), length: length)
        })
    let plains: [[UInt8]] = [Array(0..<4), Array(4..<7), Array(7..<12)]

    @Test("a read covers only the chunks that hold its bytes")
    func covering() {
        #expect(chunks.size == 12)
        #expect(chunks.covering(offset: 0, length: 4) == 0..<1)
        #expect(chunks.covering(offset: 3, length: 2) == 0..<2)
        #expect(chunks.covering(offset: 7, length: 100) == 2..<3)
        #expect(chunks.covering(offset: 12, length: 5).isEmpty)
        #expect(chunks.following(0..<1, bytes: 4) == 1..<3)
        #expect(chunks.following(0..<1, bytes: 1) == 1..<2)
    }

    @Test("a read's bytes are cut from its chunks, clamped to the file")
    func bytes() {
        for offset in 0..<13 {
            for length in 0..<14 {
                let range = chunks.covering(offset: Int64(offset), length: length)
                let got = chunks.bytes(offset: Int64(offset), length: length, from: Array(plains[range]))
                #expect(got == Array(UInt8(offset)..<UInt8(min(12, max(offset, offset + length)))))
            }
        }
    }
}

@Suite("MountTable")
struct MountTableTests {
    let table = """
        22 1 0:21 / /proc rw,nosuid - proc proc rw
        90 22 0:50 / /home/me/box rw,nosuid,nodev,relatime - fuse.xfer xfer:box rw,user_id=0,group_id=0
        91 22 0:51 / /home/me/with\\040space rw - fuse.xfer xfer:team\\040a rw
        92 22 0:52 / /mnt/other rw - fuse.sshfs me@host: rw
        """

    @Test("a path inside an xfer mount names its container and document; other mounts are not xfer's")
    func locate() {
        let found = MountTable.locate("/home/me/box/Documents/a.pdf", table: table)
        #expect(found?.mount == MountTable.Entry(point: "/home/me/box", container: "box"))
        #expect(found?.document == "Documents/a.pdf")
        #expect(MountTable.locate("/home/me/box", table: table)?.document == "")
        #expect(MountTable.locate("/home/me/boxes/x", table: table) == nil)
        #expect(MountTable.locate("/mnt/other/x", table: table) == nil)
        let spaced = MountTable.locate("/home/me/with space/Data/x", table: table)
        #expect(spaced?.mount.container == "team a" && spaced?.document == "Data/x")
    }
}
