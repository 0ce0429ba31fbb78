import Testing
import XferCore
import XferProtocol

@testable import XferMount

@Suite("MountTree: packages changed here")
struct MountTreePackagesTests {
    /// Package `Documents/P.pkg` at `version`.
    func packageInfo(_ version: Int64, _ state: VersionState = .current) -> DocumentInfo {
        MountTreeTests.info("Documents/P.pkg", version: version, state: state, kind: .package, size: 3)
    }

    func number(_ tree: MountTree, _ path: String) -> UInt64? { MountTreeTests().number(tree, path) }

    /// A tree showing package `Documents/P.pkg` version 1 with `dir/f` and `ln` in it.
    func filled() throws -> (MountTree, UInt64) {
        var tree = MountTree(mountedAtNanoseconds: 5)
        tree.apply(packageInfo(1))
        let package = number(tree, "Documents/P.pkg")!
        let filled = tree.fill(package, with: try MountTreeTests.packageManifest(), version: 1)
        #expect(filled)
        return (tree, package)
    }

    func entry(_ path: String, _ kind: MountTree.Kind, size: Int64 = 0) -> MountTree.LocalEntry {
        MountTree.LocalEntry(path: path, kind: kind, mode: 0o644, size: size, mtimeNanoseconds: 9)
    }

    @Test("checked out, a package shows its directory: paths of the same kind keep their inodes, the rest go")
    func staging() throws {
        var (tree, package) = try filled()
        let file = number(tree, "Documents/P.pkg/dir/f")!
        let link = number(tree, "Documents/P.pkg/ln")!
        tree.stagePackage(
            package, base: 1, entries: [entry("dir", .directory), entry("dir/f", .file, size: 5), entry("ln", .file)])
        #expect(number(tree, "Documents/P.pkg/dir/f") == file && tree[file]!.origin == .local && tree[file]!.size == 5)
        #expect(number(tree, "Documents/P.pkg/ln") != link && tree[number(tree, "Documents/P.pkg/ln")!]!.kind == .file)
        #expect(tree.packageBase(package) == 1 && tree.package(containing: file) == package)
        #expect(tree.manifests[package] == nil && tree.needsManifest(package) == nil)
    }

    @Test("a package changed here keeps its view while other devices' versions arrive; its upload settles it")
    func settling() throws {
        var (tree, package) = try filled()
        tree.stagePackage(package, base: 1, entries: [entry("dir", .directory), entry("new", .file)])
        #expect(tree.apply(packageInfo(2)).isEmpty)
        #expect(number(tree, "Documents/P.pkg/new") != nil)
        tree.rebasePackage("Documents/P.pkg", on: 3)
        #expect(tree.packageBase(package) == 3)
        // Ours became a conflict version: the other (version 4) shows, its entries from its manifest.
        let ours = packageInfo(3, .conflict)
        tree.settlePackage(ours, current: packageInfo(4))
        #expect(number(tree, "Documents/P.pkg") == package && tree.needsManifest(package)?.version == 4)
        #expect(number(tree, "Documents/P.pkg/new") == nil && tree.packageBase(package) == nil)
        #expect(tree.apply(packageInfo(2)).isEmpty)  // older: nothing
    }

    @Test("a version the feed told of while the package was being uploaded is what shows once it settles")
    func newerWhileUploading() throws {
        var (tree, package) = try filled()
        tree.stagePackage(package, base: 1, entries: [entry("new", .file)])
        // The upload made version 2; before it settled, the feed told of another device's 3.
        tree.apply(packageInfo(3))
        tree.settlePackage(packageInfo(2), current: packageInfo(2))
        #expect(tree.needsManifest(package)?.version == 3)
        #expect(tree.apply(packageInfo(3)).isEmpty)
    }

    @Test("a directory renamed inside a package takes what is below it, under the same inodes")
    func moving() throws {
        var (tree, package) = try filled()
        tree.stagePackage(
            package, base: 1, entries: [entry("dir", .directory), entry("dir/f", .file), entry("ln", .symlink)])
        let (directory, file) = (number(tree, "Documents/P.pkg/dir")!, number(tree, "Documents/P.pkg/dir/f")!)
        tree.moveLocal("Documents/P.pkg/dir", to: "Documents/P.pkg/moved")
        #expect(number(tree, "Documents/P.pkg/moved") == directory && number(tree, "Documents/P.pkg/moved/f") == file)
        #expect(number(tree, "Documents/P.pkg/dir") == nil && tree.number(of: "Documents/P.pkg/dir/f") == nil)
        #expect(tree.number(of: "Documents/P.pkg/moved/f") == file && tree.path(of: file) == "Documents/P.pkg/moved/f")
        let link = number(tree, "Documents/P.pkg/ln")!
        tree.moveLocal("Documents/P.pkg/moved/f", to: "Documents/P.pkg/ln")  // over another: it goes
        #expect(number(tree, "Documents/P.pkg/ln") == file && tree.nodes[link] == nil)
    }
}
