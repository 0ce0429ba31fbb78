import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

/// `.xferignore`, `--exclude` and the defaults through the real engine and a live server: an
/// ignored path is never uploaded, never pulled over and never deleted.
@Suite struct IgnoreSyncTests {
    typealias Device = SyncTests.Device

    static func names(_ server: LiveServer) async throws -> [String] {
        try await server.client().list().documents.filter { $0.state == .current }.map(\.path.value).sorted()
    }

    @Test func anIgnoredFileIsNeitherUploadedNorTouchedByRemoteChanges() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let object = Files.random(count: 50_000, seed: 1)
            try Files.write(a.path(".xferignore"), Array("# build products\nbuild/\n*.log\n!important.log\n".utf8))
            try Files.write(a.path("build/out.o"), object)
            try Files.write(a.path("debug.log"), Array("local log".utf8))
            try Files.write(a.path("important.log"), Array("kept".utf8))
            try Files.write(a.path("notes.txt"), Array("notes".utf8))
            try Files.write(a.path("sub/.xferignore"), Array("!debug.log\n".utf8))
            try Files.write(a.path("sub/debug.log"), Array("re-included below sub".utf8))
            try Files.write(a.path(".notes.txt.swp"), Array("vim".utf8))
            try Files.write(a.path("sub/.DS_Store"), Array("finder".utf8))

            let first = try await a.engine.syncOnce()
            #expect(first.uploaded == 5 && first.failed == 0)
            #expect(
                try await Self.names(server) == [
                    ".xferignore", "important.log", "notes.txt", "sub", "sub/.xferignore", "sub/debug.log"
                ])
            #expect(try await a.status()["build/out.o"] == nil)

            // Another device pushes documents at A's ignored paths: A does not pull them over its files.
            let elsewhere = server.root + "/elsewhere.bin"
            try Files.write(elsewhere, Files.random(count: 10_000, seed: 2))
            _ = try await server.push(elsewhere, "build/out.o", from: server.otherDevice("b"))
            _ = try await server.push(elsewhere, "debug.log", from: server.otherDevice("b"))
            _ = try await server.push(elsewhere, "fresh.txt", from: server.otherDevice("b"))
            let second = try await a.engine.syncOnce()
            #expect(second.downloaded == 1 && second.uploaded == 0 && second.failed == 0)
            #expect(Files.read(a.path("build/out.o")) == object)
            #expect(Files.read(a.path("debug.log")) == Array("local log".utf8))
            #expect(Files.read(a.path("fresh.txt")) == Files.random(count: 10_000, seed: 2))

            // Remote deletions at ignored paths delete nothing here.
            _ = try await server.client().delete("build/out.o")
            _ = try await server.client().delete("debug.log")
            let third = try await a.engine.syncOnce()
            #expect(third.removedLocally == 0 && third.removedRemotely == 0)
            #expect(Files.read(a.path("build/out.o")) == object)
            #expect(Files.read(a.path("debug.log")) == Array("local log".utf8))

            // A synced file that becomes ignored is left alone both ways: not deleted on the
            // server, its edits not pushed, a remote deletion not applied.
            try Files.write(a.path(".xferignore"), Array("build/\n*.log\n!important.log\nnotes.txt\n".utf8))
            let ignoring = try await a.engine.syncOnce()
            #expect(ignoring.uploaded == 1 && ignoring.removedRemotely == 0)
            #expect(try await server.client().stat("notes.txt").state == .current)
            try Files.write(a.path("notes.txt"), Array("edited while ignored".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 0)
            _ = try await server.client().delete("notes.txt")
            #expect(try await a.engine.syncOnce().removedLocally == 0)
            #expect(Files.read(a.path("notes.txt")) == Array("edited while ignored".utf8))

            // A second device gets the rules with the files, and keeps to them too.
            let b = try Device(server, "b2")
            try await b.engine.syncOnce()
            #expect(Files.read(b.path("sub/debug.log")) == Array("re-included below sub".utf8))
            #expect(!FileManager.default.fileExists(atPath: b.path("build/out.o")))
            try Files.write(b.path("build/b.o"), [1, 2, 3])
            try Files.write(b.path("x.log"), [4])
            #expect(try await b.engine.syncOnce().uploaded == 0)
        }
    }

    @Test func excludeOptionsAndRulesInsidePackages() async throws {
        try await LiveServer.run { server in
            var options = SyncOptions()
            options.exclude = ["*.tmp", "cache/"]
            let a = try Device(server, "a", options: options)
            try Files.write(a.path("keep.txt"), Array("keep".utf8))
            try Files.write(a.path("scratch.tmp"), Array("tmp".utf8))
            try Files.write(a.path("cache/blob.bin"), Files.random(count: 5000, seed: 3))
            try Files.write(a.path("Draft.pkg/index.json"), Array("{}".utf8))
            try Files.write(a.path("Draft.pkg/.DS_Store"), Array("finder".utf8))
            try Files.write(a.path("Draft.pkg/.xferignore"), Array("render/\n".utf8))
            try Files.write(a.path("Draft.pkg/render/frame.raw"), Files.random(count: 5000, seed: 4))
            try Files.write(a.path("Draft.pkg/.index.json.swp"), Array("vim".utf8))

            let first = try await a.engine.syncOnce()
            #expect(first.uploaded == 2 && first.failed == 0)
            #expect(try await Self.names(server) == ["Draft.pkg", "keep.txt"])
            // What the package push left out does not make it look changed on the next pass.
            #expect(try await a.engine.syncOnce().uploaded == 0)
            #expect(try await a.status()["Draft.pkg"] == .synced)
            let pulled = server.root + "/pulled.pkg"
            _ = try await server.pull("Draft.pkg", pulled)
            #expect(try Files.snapshot(pulled).keys.sorted() == [".xferignore", "index.json"])

            // `xfer push DIR.pkg --exclude`: the package's rules, the defaults and the extra patterns.
            let package = server.root + "/Report.pkg"
            try Files.write(package + "/report.md", Array("# report".utf8))
            try Files.write(package + "/report.md~", Array("backup".utf8))
            try Files.write(package + "/figures/plot.png", Files.random(count: 3000, seed: 5))
            try Files.write(package + "/figures/plot.bak", [1])
            try Files.write(package + "/figures/.xferignore", Array("!keep.bak\n".utf8))
            try Files.write(package + "/figures/keep.bak", [2])
            var pushOptions = PushOptions()
            pushOptions.exclude = ["*.bak"]
            let report = try await PushEngine(remote: server.remote, options: pushOptions).push(
                package, as: DocumentPath("Report.pkg"))
            #expect(report.files == 4)
            let copy = server.root + "/copy.pkg"
            _ = try await server.pull("Report.pkg", copy)
            #expect(
                try Files.snapshot(copy).filter { $0.value.hasPrefix("file") }.keys.sorted()
                    == ["figures/.xferignore", "figures/keep.bak", "figures/plot.png", "report.md"])
        }
    }
}

extension IgnoreSyncTests {
    @Test func theWatcherAsksTheRulesOnDiskAlongThePath() async throws {
        try await LiveServer.run { server in
            var options = SyncOptions()
            options.exclude = ["*.tmp"]
            let a = try Device(server, "a", options: options)
            try Files.write(a.path(".xferignore"), Array("build/\n".utf8))
            try Files.write(a.path("sub/.xferignore"), Array("*.o\n!*.tmp\n".utf8))
            let sync = a.engine.directory
            #expect(sync.isIgnored("build", isDirectory: true))
            #expect(sync.isIgnored("build/deep/x.c", isDirectory: false))
            #expect(!sync.isIgnored("build", isDirectory: false))
            #expect(sync.isIgnored("sub/deeper/a.o", isDirectory: false))
            #expect(!sync.isIgnored("a.o", isDirectory: false))
            #expect(sync.isIgnored("a.tmp", isDirectory: false))
            #expect(!sync.isIgnored("sub/a.tmp", isDirectory: false))
            #expect(sync.isIgnored("sub/.a.txt.xfer-2.partial", isDirectory: false))
            #expect(sync.isIgnored("sub/.a.txt.swp", isDirectory: false))
            #expect(!sync.isIgnored(".xferignore", isDirectory: false))
        }
    }
}

extension IgnoreSyncTests {
    @Test func aPackageHoldingIgnoredFilesIsUpdatedAroundThemAndNotRemoved() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("Draft.pkg/index.json"), Array("{}".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            #expect(try await b.engine.syncOnce().downloaded == 1)
            // Finder drops metadata into A's copy: never pushed, and it keeps the package as it is.
            try Files.write(a.path("Draft.pkg/.DS_Store"), Array("finder".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 0)

            try Files.write(b.path("Draft.pkg/index.json"), Array("{\"v\": 2}".utf8))
            #expect(try await b.engine.syncOnce().uploaded == 1)
            // The newer version comes down; the ignored file goes on in it.
            let replaced = try await a.engine.syncOnce()
            #expect(replaced.downloaded == 1 && replaced.failed == 0, "\(replaced)")
            #expect(Files.read(a.path("Draft.pkg/.DS_Store")) == Array("finder".utf8))
            #expect(Files.read(a.path("Draft.pkg/index.json")) == Array("{\"v\": 2}".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 0, "carrying it over is not a change")

            // A whole ignored directory, by the package's own rules, too.
            try Files.write(a.path("Draft.pkg/.xferignore"), Array("cache/\n".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            #expect(try await b.engine.syncOnce().downloaded == 1)
            try Files.write(a.path("Draft.pkg/cache/deep/thumb.png"), Array("png".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 0)
            try Files.write(b.path("Draft.pkg/index.json"), Array("{\"v\": 3}".utf8))
            #expect(try await b.engine.syncOnce().uploaded == 1)
            #expect(try await a.engine.syncOnce().downloaded == 1)
            #expect(Files.read(a.path("Draft.pkg/cache/deep/thumb.png")) == Array("png".utf8))
            #expect(Files.read(a.path("Draft.pkg/.DS_Store")) == Array("finder".utf8))
            #expect(Files.read(a.path("Draft.pkg/index.json")) == Array("{\"v\": 3}".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 0)

            _ = try await server.client().delete("Draft.pkg")
            let removed = try await a.engine.syncOnce()
            #expect(removed.removedLocally == 0)
            #expect(Files.read(a.path("Draft.pkg/.DS_Store")) == Array("finder".utf8))
            // Once the ignored files are gone, the remote deletion goes through.
            try FileManager.default.removeItem(atPath: a.path("Draft.pkg/.DS_Store"))
            try FileManager.default.removeItem(atPath: a.path("Draft.pkg/cache"))
            #expect(try await a.engine.syncOnce().removedLocally == 1)
            #expect(!FileManager.default.fileExists(atPath: a.path("Draft.pkg")))
        }
    }
}
