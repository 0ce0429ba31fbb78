import Testing
import XferCore
import XferProtocol

@testable import XferMount

/// An end-to-end encrypted container's listing seals sizes, modes, times and symlinks: the
/// tree shows defaults until a document's manifest is read, then what the manifest says.
@Suite("MountTree, sealed")
struct MountTreeSealedTests {
    func single(_ kind: EntryKind, mode: UInt32, chunks: [Manifest.ChunkReference] = [], target: String? = nil)
        throws -> Manifest
    {
        try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: kind, mode: mode, mtimeNanoseconds: 7, chunks: chunks, symlinkTarget: target)
            ])
    }

    @Test("a sealed document shows defaults until revealed; a file, a symlink and a lie")
    func reveal() throws {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.sealedAttributes = true
        for name in ["f", "ln", "liar"] { tree.apply(MountTreeTests.info("Documents/\(name)", size: 196)) }
        tree.apply(MountTreeTests.info("Documents/P.pkg", kind: .package, size: 338))
        let number = { (name: String) in MountTreeTests().number(tree, "Documents/" + name)! }
        let file = number("f")
        #expect(tree[file]!.size == 0 && tree[file]!.mode == 0o644 && tree[file]!.mtimeNanoseconds == 5)
        #expect(tree.children(of: number("")).allSatisfy { $0.kind == nil })
        #expect(tree[MountTreeTests().number(tree, "Documents")!]!.mtimeNanoseconds == 5)  // not the sealed 0

        let chunk = Manifest.ChunkReference(id: ChunkID.of(Array("abc".utf8)), length: 3)
        #expect(!tree.reveal(file, from: try single(.file, mode: 0o600, chunks: [chunk]), version: 2))  // stale
        #expect(tree.reveal(file, from: try single(.file, mode: 0o600, chunks: [chunk]), version: 1))
        #expect(tree.needsAttributes(file) == nil)
        #expect(tree[file]!.size == 3 && tree[file]!.mode == 0o600 && tree[file]!.mtimeNanoseconds == 7)
        tree.reveal(number("ln"), from: try single(.symlink, mode: 0o777, target: "f"), version: 1)
        #expect(tree[number("ln")]!.kind == .symlink)
        let package = try Manifest(
            kind: .package, chunker: .default,
            entries: [Manifest.Entry(path: "d", kind: .directory, mode: 0o700, mtimeNanoseconds: 1)])
        tree.reveal(number("liar"), from: package, version: 1)
        #expect(tree[number("liar")]!.kind == .file && tree.needsAttributes(number("liar")) == nil)
        #expect(tree[number("P.pkg")]!.kind == .directory && tree[number("P.pkg")]!.mode == 0o755)
        // A new version is sealed again.
        tree.apply(MountTreeTests.info("Documents/f", version: 2, size: 196))
        #expect(tree.needsAttributes(number("f")) != nil)
    }
}
