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

    /// An entry carries the stamp of the same `lstat` as its size and time: a push compares
    /// it with the state's record and with the file once read, without looking again.
    @Test func entriesCarryTheirStamps() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        dir.write("a/one", [1, 2, 3])
        dir.write("two", Array(repeating: 7, count: 5000))
        for entry in try DirectoryWalker.walk(dir.path) where entry.kind == .file {
            let stamp = try #require(FileStamp.of(dir.path + "/" + entry.relativePath))
            #expect(entry.stamp == stamp && entry.inode != 0 && entry.ctimeNanoseconds != 0)
        }
    }

    @Test func missingRootIsNotFound() {
        #expect { try DirectoryWalker.walk("/nonexistent/xfer") } throws: { ($0 as? XferError)?.code == .notFound }
    }
}
