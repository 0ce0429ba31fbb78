import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

/// The sync engine with two devices (two directories, two state directories) and one server.
@Suite struct SyncTests {
    /// A device: its directory and engine.
    struct Device {
        let directory: String
        let engine: SyncEngine

        init(_ server: LiveServer, _ name: String, options: SyncOptions = SyncOptions()) throws {
            directory = server.root + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            engine = try SyncEngine(directory: directory, remote: server.otherDevice(name), options: options)
        }

        func path(_ relative: String) -> String { directory + "/" + relative }

        func status() async throws -> [String: DocumentSyncState] {
            Dictionary(uniqueKeysWithValues: try await engine.directory.status().documents.map { ($0.path, $0.state) })
        }
    }

    @Test func editsDeletesAndRenamesTravelBothWays() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("Documents/notes.txt"), Files.random(count: 200_000, seed: 1))
            try Files.write(a.path("Documents/Draft.pkg/index.json"), Array("{}".utf8))
            try Files.write(a.path("Documents/Draft.pkg/media/photo.raw"), Files.random(count: 300_000, seed: 2))
            try Files.write(a.path("Data/state.bin"), Files.random(count: 1000, seed: 3))
            try Files.write(a.path("Documents/.notes.txt.swp"), Array("editor junk".utf8))

            let first = try await a.engine.syncOnce()
            #expect(first.uploaded == 3 && first.failed == 0)
            let fetched = try await b.engine.syncOnce()
            #expect(fetched.downloaded == 3)
            for name in [
                "Documents/notes.txt", "Documents/Draft.pkg/index.json", "Documents/Draft.pkg/media/photo.raw",
                "Data/state.bin"
            ] {
                #expect(Files.read(b.path(name)) == Files.read(a.path(name)), "\(name)")
            }
            #expect(!FileManager.default.fileExists(atPath: b.path("Documents/.notes.txt.swp")))
            #expect(try await b.status().values.allSatisfy { $0 == .synced })

            // An edit on B comes to A; nothing else moves.
            try Files.write(b.path("Documents/Draft.pkg/index.json"), Array("{\"title\": 1}".utf8))
            #expect(try await b.status()["Documents/Draft.pkg"] == .pendingUpload)
            #expect(try await b.engine.syncOnce().uploaded == 1)
            #expect(try await a.status()["Documents/Draft.pkg"] == .pendingDownload)
            let edit = try await a.engine.syncOnce()
            #expect(edit.downloaded == 1 && edit.uploaded == 0)
            #expect(Files.read(a.path("Documents/Draft.pkg/index.json")) == Array("{\"title\": 1}".utf8))

            // A rename on A: the new name is pushed without data, B gets it without downloading.
            try FileManager.default.moveItem(
                atPath: a.path("Documents/notes.txt"), toPath: a.path("Documents/renamed.txt"))
            let renamed = try await a.engine.syncOnce()
            #expect(renamed.uploaded == 1 && renamed.removedRemotely == 1 && renamed.bytesSent == 0)
            let arrived = try await b.engine.syncOnce()
            #expect(arrived.downloaded == 1 && arrived.removedLocally == 1 && arrived.bytesFetched == 0)
            #expect(Files.read(b.path("Documents/renamed.txt")) == Files.random(count: 200_000, seed: 1))
            #expect(!FileManager.default.fileExists(atPath: b.path("Documents/notes.txt")))

            // A delete on B reaches A.
            try FileManager.default.removeItem(atPath: b.path("Data/state.bin"))
            #expect(try await b.engine.syncOnce().removedRemotely == 1)
            #expect(try await a.engine.syncOnce().removedLocally == 1)
            #expect(!FileManager.default.fileExists(atPath: a.path("Data/state.bin")))
            #expect(
                try await server.client().list().documents.map(\.path.value).sorted()
                    == ["Data", "Documents", "Documents/Draft.pkg", "Documents/renamed.txt"])

            // One engine per directory.
            #expect(throws: XferError.self) {
                _ = try SyncEngine(directory: a.directory, remote: server.otherDevice("a"))
            }
        }
    }

    @Test func aNameThatIsNotADocumentPathIsReportedAndSkipped() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            try Files.write(a.path("good.txt"), Array("ok".utf8))
            try Files.write(a.path("bad\u{7}name.txt"), Array("bell".utf8))
            let pass = try await a.engine.syncOnce()
            #expect(pass.uploaded == 1 && pass.failed == 1)
            #expect(try await server.client().list().documents.map(\.path.value) == ["good.txt"])
        }
    }

    @Test func offlineEditsOnBothDevicesEndAsAConflictNotALostUpdate() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("shared.txt"), Array("base".utf8))
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            // Both edit while apart; B's edit is the later one.
            try Files.write(a.path("shared.txt"), Array("edit from a".utf8))
            try Files.setMtime(a.path("shared.txt"), 1_000_000)
            try Files.write(b.path("shared.txt"), Array("edit from b".utf8))
            try Files.setMtime(b.path("shared.txt"), 2_000_000)
            #expect(try await a.status()["shared.txt"] == .pendingUpload)

            _ = try await a.engine.syncOnce()
            let bPass = try await b.engine.syncOnce()
            #expect(bPass.uploaded == 1 && bPass.conflicts == 1)
            let aPass = try await a.engine.syncOnce()
            #expect(aPass.downloaded == 1 && aPass.conflicts == 1)
            // Both show the winner (the later edit), and the loser is kept on the server.
            #expect(Files.read(a.path("shared.txt")) == Array("edit from b".utf8))
            #expect(try await a.status()["shared.txt"] == .conflict)
            #expect(try await b.status()["shared.txt"] == .conflict)
            let versions = try await server.client().versions("shared.txt")
            let loser = try #require(versions.first { $0.state == .conflict })
            let kept = server.root + "/kept.txt"
            _ = try await server.client().pull("shared.txt", into: kept, version: loser.version)
            #expect(Files.read(kept) == Array("edit from a".utf8))

            // Resolving for A's edit brings it to both.
            _ = try await server.client().resolve("shared.txt", keep: loser.version)
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            #expect(Files.read(a.path("shared.txt")) == Array("edit from a".utf8))
            #expect(Files.read(b.path("shared.txt")) == Array("edit from a".utf8))
            #expect(try await b.status()["shared.txt"] == .synced)

            // A remote edit wins over a local delete.
            try Files.write(a.path("shared.txt"), Array("newer".utf8))
            _ = try await a.engine.syncOnce()
            try FileManager.default.removeItem(atPath: b.path("shared.txt"))
            let restored = try await b.engine.syncOnce()
            #expect(restored.downloaded == 1 && restored.removedRemotely == 0)
            #expect(Files.read(b.path("shared.txt")) == Array("newer".utf8))
        }
    }

    @Test func evictKeepsMetadataAndFetchBringsDataBack() async throws {
        try await LiveServer.run { server in
            var options = SyncOptions()
            let a = try Device(server, "a")
            let content = Files.random(count: 500_000, seed: 9)
            try Files.write(a.path("Documents/big.bin"), content)
            try Files.write(a.path("Documents/small.txt"), Array("small".utf8))
            _ = try await a.engine.syncOnce()

            try await a.engine.directory.evict(DocumentPath("Documents/big.bin"))
            #expect(!FileManager.default.fileExists(atPath: a.path("Documents/big.bin")))
            let status = try await a.engine.directory.status().documents.first { $0.path == "Documents/big.bin" }
            #expect(status?.state == .evicted && status?.size == 500_000)
            // A pass leaves an evicted document alone (it is not a local delete).
            let pass = try await a.engine.syncOnce()
            #expect(pass.removedRemotely == 0)
            #expect(try await server.client().stat("Documents/big.bin").state == .current)

            let report = try await a.engine.directory.fetch(DocumentPath("Documents/big.bin"))
            #expect(report.version == 1)
            #expect(Files.read(a.path("Documents/big.bin")) == content)
            #expect(try await a.status()["Documents/big.bin"] == .synced)

            // A document with unsynced changes is never evicted.
            try Files.write(a.path("Documents/small.txt"), Array("changed".utf8))
            await #expect(throws: XferError.self) {
                try await a.engine.directory.evict(DocumentPath("Documents/small.txt"))
            }
            #expect(Files.read(a.path("Documents/small.txt")) == Array("changed".utf8))

            // A local size limit evicts the least recently used synced documents first.
            options.localLimit = 100_000
            let c = try Device(server, "c", options: options)
            let limited = try await c.engine.syncOnce()
            #expect(limited.downloaded == 2 && limited.evicted == 1)
            #expect(try await c.status()["Documents/big.bin"] == .evicted)
            #expect(FileManager.default.fileExists(atPath: c.path("Documents/small.txt")))
        }
    }

    /// A symlink, alone or in a package, arrives with its version's mtime: the device that
    /// pulled it does not take it for a local edit and send it back, and neither does the
    /// first device after that (before: new versions back and forth, never quiet).
    @Test func aPulledSymlinkIsNotSentBack() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try FileManager.default.createDirectory(
                atPath: a.path("Documents/Deck.pkg"), withIntermediateDirectories: true)
            try Files.write(a.path("Documents/Deck.pkg/slide.txt"), Array("slide".utf8))
            try FileManager.default.createSymbolicLink(
                atPath: a.path("Documents/Deck.pkg/latest"), withDestinationPath: "slide.txt")
            try FileManager.default.createSymbolicLink(
                atPath: a.path("Documents/link"), withDestinationPath: "../elsewhere")
            #expect(try await a.engine.syncOnce().uploaded == 2)
            #expect(try await b.engine.syncOnce().downloaded == 2)
            #expect(
                try FileManager.default.destinationOfSymbolicLink(atPath: b.path("Documents/link")) == "../elsewhere")
            for device in [b, a, b] {
                let pass = try await device.engine.syncOnce()
                #expect(pass.uploaded == 0 && pass.downloaded == 0, "\(device.directory): \(pass)")
            }
            #expect(try await b.status().values.allSatisfy { $0 == .synced })
        }
    }

    @Test func watchPicksUpALocalSaveAndARemoteChange() async throws {
        try await LiveServer.run { server in
            var options = SyncOptions()
            options.feedWait = 10
            let a = try Device(server, "a", options: options)
            let b = try Device(server, "b")
            let watching = Task { try await a.engine.watch() }
            defer { watching.cancel() }
            // Watching once the first pass is over: the watcher is set up before it.
            #expect(
                await a.engine.awaitEvent {
                    if case .passFinished = $0 { return true }
                    return false
                })

            // A local save goes up.
            async let uploaded = a.engine.awaitEvent {
                if case .uploaded(let path, _, _) = $0 { return path.value == "saved.txt" }
                return false
            }
            try Files.write(a.path("saved.txt"), Array("hello".utf8))
            #expect(await uploaded)
            #expect(try await server.client().stat("saved.txt").state == .current)

            // A remote change comes down without polling.
            async let downloaded = a.engine.awaitEvent {
                if case .downloaded(let path, _, _) = $0 { return path.value == "remote.txt" }
                return false
            }
            try Files.write(b.path("remote.txt"), Array("from b".utf8))
            _ = try await b.engine.syncOnce()
            #expect(await downloaded)
            #expect(Files.read(a.path("remote.txt")) == Array("from b".utf8))
            watching.cancel()
        }
    }

    /// Where inotify cannot watch (here a limit of two directories stands in for the per-user
    /// limit), the engine says so once and finds changes there by rescanning.
    @Test func directoriesBeyondTheWatchLimitAreRescanned() async throws {
        try await LiveServer.run { server in
            var options = SyncOptions()
            options.feedWait = 10
            options.maximumWatches = 2
            options.unwatchedRescanInterval = .milliseconds(300)
            let a = try Device(server, "a", options: options)
            for name in ["one", "two", "three", "four"] {
                try Files.write(a.path("\(name)/seed.txt"), Array(name.utf8))
            }
            let events = Task {
                var limited = false
                var late = 0
                for await event in a.engine.events {
                    if case .watchLimited(let count, _, _) = event { limited = count >= 2 }
                    if case .uploaded(let path, _, _) = event, path.value.hasSuffix("late.txt") { late += 1 }
                    if late == 4 { return limited }
                }
                return false
            }
            let timeout = Task {
                try await Task.sleep(for: .seconds(90))
                events.cancel()
            }
            defer { timeout.cancel() }
            let watching = Task { try await a.engine.watch() }
            defer { watching.cancel() }
            try await Task.sleep(for: .milliseconds(800))
            // Directories are watched in the order they are found: at most two of five are.
            for name in ["one", "two", "three", "four"] {
                try Files.write(a.path("\(name)/late.txt"), Array("late".utf8))
            }
            #expect(await events.value, "every late file goes up, and the limit was reported")
            for name in ["one", "two", "three", "four"] {
                #expect(try await server.client().stat("\(name)/late.txt").state == .current)
            }
            watching.cancel()
        }
    }
}
