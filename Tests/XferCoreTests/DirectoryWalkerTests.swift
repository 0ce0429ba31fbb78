import Testing
import XferCore
#if canImport(Glibc)
import Glibc
#endif

@Suite struct DirectoryWalkerTests {
    @Test func walksInBytewiseOrderWithoutFollowingLinks() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        dir.write("b.txt", [1])
        dir.write("a/z", [1, 2])
        dir.write("a.txt", [])
        dir.write("a/b/c", [3])
        symlink("../b.txt", dir.path + "/a/link")
        symlink("/", dir.path + "/root-link")
        let entries = try DirectoryWalker.walk(dir.path)
        #expect(entries.map(\.relativePath) == ["a", "a/b", "a/b/c", "a/link", "a/z", "a.txt", "b.txt", "root-link"])
        let link = try #require(entries.first { $0.relativePath == "a/link" })
        #expect(link.kind == .symlink && link.symlinkTarget == "../b.txt" && link.size == 8)
        #expect(entries.first { $0.relativePath == "a/z" }?.size == 2)
        #expect(entries.first { $0.relativePath == "a" }?.kind == .directory)
    }

    @Test func missingRootIsNotFound() {
        #expect { try DirectoryWalker.walk("/nonexistent/xfer") } throws: { ($0 as? XferError)?.code == .notFound }
    }
}
