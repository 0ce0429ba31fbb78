import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

/// A synced folder's directories are documents of their own (`directory`: a name and a mode):
/// empty ones travel, renames and deletions too, and one is removed on another device only
/// once it is empty there. Runs on every backend (tools/suites/backend-tests.sh).
@Suite struct DirectoryTests {
    typealias Device = SyncTests.Device

    /// Every directory, file and symlink under `root` with its mode (`.xfer*` names aside).
    static func tree(_ root: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for entry in try DirectoryWalker.walk(root) where !entry.relativePath.hasPrefix(".xfer") {
            // End to end a directory document's mode is each device's own (EndToEndKeys).
            result[entry.relativePath] =
                entry.kind == .directory && LiveServer.endToEnd
                ? "directory" : "\(entry.kind) \(String(entry.mode, radix: 8))"
        }
        return result
    }

    static func names(_ server: LiveServer) async throws -> [String: DocumentKind] {
        Dictionary(
            uniqueKeysWithValues: try await server.client().list().documents.filter { $0.state == .current }.map {
                ($0.path.value, $0.kind)
            })
    }

    @Test func theNamespaceHoldsDocumentsBelowADirectoryOnly() async throws {
        try await LiveServer.run { server in
            let folder = server.root + "/folder"
            let file = server.root + "/file.txt"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            try Files.write(file, Array("text".utf8))
            let engine = PushEngine(remote: server.remote)
            let report = try await engine.push(folder, as: try DocumentPath("dir"), directoryItself: true)
            #expect(report.committed && report.files == 0)
            #expect(try await server.client().stat("dir").kind == .directory)
            // Documents below a directory: files, packages, other directories.
            _ = try await engine.push(file, as: try DocumentPath("dir/a.txt"))
            _ = try await engine.push(folder, as: try DocumentPath("dir/sub"), directoryItself: true)
            _ = try await engine.push(file, as: try DocumentPath("dir/sub/b.txt"))
            // Nothing below a file, and no file where documents lie below.
            _ = try await engine.push(file, as: try DocumentPath("plain"))
            await #expect {
                _ = try await engine.push(folder, as: try DocumentPath("plain/inner"), directoryItself: true)
            } throws: {
                ($0 as? XferError)?.code == .conflict
            }
            await #expect { _ = try await engine.push(file, as: try DocumentPath("dir/sub"), state: nil) } throws: {
                ($0 as? XferError)?.code == .conflict
            }
            #expect(
                try await Self.names(server) == [
                    "dir": .directory, "dir/a.txt": .file, "dir/sub": .directory,
                    "dir/sub/b.txt": .file, "plain": .file
                ])
            // A pull of a directory makes it, or keeps the one there with what it holds.
            let pulled = try await PullEngine(remote: server.remote).pull(
                try DocumentPath("dir/sub"), into: server.root + "/out/sub")
            #expect(pulled.kind == .directory && pulled.files == 0)
            var info = stat()
            #expect(lstat(server.root + "/out/sub", &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)
        }
    }

    @Test func emptyDirectoriesAreMadeRenamedAndRemovedOnTheOtherDevice() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try FileManager.default.createDirectory(atPath: a.path("empty"), withIntermediateDirectories: true)
            try FileManager.default.createDirectory(
                atPath: a.path("nested/deeper/deepest"), withIntermediateDirectories: true)
            try Files.write(a.path("nested/note.txt"), Array("note".utf8))
            #expect(chmod(a.path("nested/deeper"), 0o750) == 0)
            let first = try await a.engine.syncOnce()
            #expect(first.uploaded == 1 && first.directories == 4, "\(first)")
            let arrived = try await b.engine.syncOnce()
            #expect(arrived.downloaded == 1 && arrived.directories == 4, "\(arrived)")
            #expect(try Self.tree(b.directory) == Self.tree(a.directory))
            #expect(
                try Self.tree(b.directory)["nested/deeper"] == (LiveServer.endToEnd ? "directory" : "directory 750"))
            // Settled: the next passes only confirm.
            _ = try await a.engine.syncOnce()
            #expect(try await a.engine.syncOnce().confirmed)

            // Renamed, a mode changed, one removed.
            try FileManager.default.moveItem(atPath: a.path("empty"), toPath: a.path("renamed"))
            #expect(chmod(a.path("nested/deeper"), 0o700) == 0)
            try FileManager.default.removeItem(atPath: a.path("nested/deeper/deepest"))
            let changed = try await a.engine.syncOnce()
            #expect(changed.directories == 4 && changed.deletionsHeld == 0, "\(changed)")
            let followed = try await b.engine.syncOnce()
            #expect(followed.directories == 4, "\(followed)")
            #expect(try Self.tree(b.directory) == Self.tree(a.directory))
            #expect(
                try Self.tree(b.directory)["renamed"] == (LiveServer.endToEnd ? "directory" : "directory 755")
                    && Self.tree(b.directory)["empty"] == nil)
            #expect(
                try Self.tree(b.directory)["nested/deeper"] == (LiveServer.endToEnd ? "directory" : "directory 700"))

            // A whole tree removed on B: files first, then each directory once empty.
            try FileManager.default.removeItem(atPath: b.path("nested"))
            _ = try await b.engine.syncOnce()
            _ = try await a.engine.syncOnce()
            #expect(!FileManager.default.fileExists(atPath: a.path("nested")))
            #expect(try await Self.names(server) == ["renamed": .directory])
        }
    }

    @Test func aDirectoryDeletedElsewhereStaysWhileItHoldsAnything() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("project/old.txt"), Array("old".utf8))
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            // B makes a file in it while A removes the whole directory.
            try Files.write(b.path("project/new.txt"), Array("made on B".utf8))
            try Files.write(b.path("project/.new.txt.swp"), Array("an ignored file".utf8))
            try FileManager.default.removeItem(atPath: a.path("project"))
            let removed = try await a.engine.syncOnce()
            #expect(removed.removedRemotely == 1 && removed.directories == 1, "\(removed)")
            let kept = try await b.engine.syncOnce()
            #expect(kept.uploaded == 1 && kept.removedLocally == 1, "\(kept)")
            #expect(Files.read(b.path("project/new.txt")) == Array("made on B".utf8))
            #expect(Files.read(b.path("project/.new.txt.swp")) == Array("an ignored file".utf8))
            // A few passes each and both hold the directory with B's file in it.
            for _ in 0..<2 {
                _ = try await a.engine.syncOnce()
                _ = try await b.engine.syncOnce()
            }
            #expect(Files.read(a.path("project/new.txt")) == Array("made on B".utf8))
            #expect(!FileManager.default.fileExists(atPath: a.path("project/old.txt")))
            #expect(try await Self.names(server) == ["project": .directory, "project/new.txt": .file])
            #expect(try await b.status()["project"] == .synced)
            #expect(try await a.status()["project"] == .synced)

            // Only an ignored file left: the directory stays on B, and A's removal stands there.
            try FileManager.default.removeItem(atPath: a.path("project"))
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            #expect(Files.read(b.path("project/.new.txt.swp")) == Array("an ignored file".utf8))
            #expect(!FileManager.default.fileExists(atPath: b.path("project/new.txt")))
            #expect(try await Self.names(server).isEmpty)
            _ = try await a.engine.syncOnce()
            #expect(!FileManager.default.fileExists(atPath: a.path("project")))
        }
    }

    /// While a document downloads, nothing of it shows among the folder's files: it is built
    /// in the hidden `.xfer-staging` at the root and renamed into place whole.
    @Test func aDownloadIsBuiltOutOfSightAndRenamedIntoPlace() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let content = Files.random(count: 6_000_000, seed: 9)
            try Files.write(a.path("Documents/big.bin"), content)
            _ = try await a.engine.syncOnce()
            try FileManager.default.createDirectory(atPath: server.root + "/c", withIntermediateDirectories: true)
            var options = PullOptions()
            options.downloadBatchBytes = 256 << 10
            options.downloadsInFlight = 1
            var syncOptions = SyncOptions()
            syncOptions.pull = options
            let engine = try SyncEngine(
                directory: server.root + "/c", remote: server.otherDevice("c"), options: syncOptions)
            let seen = Locked<[[String]]>([])
            let staging = server.root + "/c/" + SyncDirectory.stagingName
            _ = try await engine.directory.fetch(try DocumentPath("Documents/big.bin")) { _ in
                let beside = (try? FileManager.default.contentsOfDirectory(atPath: server.root + "/c/Documents")) ?? []
                let building = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
                seen.withLock { $0.append(beside + building.map { "staging:" + $0 }) }
            }
            let during = seen.value
            #expect(during.count > 3)
            #expect(
                during.allSatisfy { $0.allSatisfy { $0.hasPrefix("staging:") } },
                "nothing beside the target: \(during.prefix(3))")
            #expect(during.contains { $0.contains { $0.hasPrefix("staging:") && $0.hasSuffix(".partial") } })
            #expect(Files.read(server.root + "/c/Documents/big.bin") == content)
            #expect(try FileManager.default.contentsOfDirectory(atPath: staging).isEmpty)
            #expect(try Self.tree(server.root + "/c")["Documents/big.bin"] != nil)
            #expect(try Self.tree(server.root + "/c").keys.allSatisfy { !$0.contains("partial") })
            await engine.close()
        }
    }

    @Test func aFileAndADirectoryTakeEachOthersPlace() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("thing"), Array("a file".utf8))
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            #expect(Files.read(b.path("thing")) == Array("a file".utf8))

            // The file becomes a directory with a file in it.
            try FileManager.default.removeItem(atPath: a.path("thing"))
            try Files.write(a.path("thing/inside.txt"), Array("inside".utf8))
            for _ in 0..<2 { _ = try await a.engine.syncOnce() }
            for _ in 0..<2 { _ = try await b.engine.syncOnce() }
            #expect(Files.read(b.path("thing/inside.txt")) == Array("inside".utf8))
            #expect(try Self.tree(b.directory) == Self.tree(a.directory))
            let replaced = try b.engine.directory.trash().entries()
            #expect(replaced.map(\.path) == ["thing"], "the file replaced on B is in its trash")

            // And back: the directory (emptied) becomes a file again.
            try FileManager.default.removeItem(atPath: a.path("thing"))
            try Files.write(a.path("thing"), Array("a file again".utf8))
            for _ in 0..<3 { _ = try await a.engine.syncOnce() }
            for _ in 0..<3 { _ = try await b.engine.syncOnce() }
            #expect(Files.read(b.path("thing")) == Array("a file again".utf8))
            #expect(try Self.tree(b.directory) == Self.tree(a.directory))
            #expect(try await Self.names(server) == ["thing": .file])
        }
    }
}
