import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// What a device holds (``SyncSelection``): the rules alone, then through the engine and a live
/// server. A document left out is never downloaded and never deleted on the server; a local copy
/// goes to the trash only once the server has every byte of it.
@Suite struct SelectiveSyncTests {
    typealias Device = SyncTests.Device

    @Test func theSelectionHoldsWhatItNames() {
        var selection = SyncSelection()
        #expect(selection.includes("a/b.txt", isDirectory: false) && selection.isEverything)
        selection.only = ["Photos/2025"]
        #expect(selection.includes("Photos/2025/x.jpg", isDirectory: false))
        #expect(selection.includes("Photos", isDirectory: true), "a directory above what is held")
        #expect(!selection.includes("Photos/2024/y.jpg", isDirectory: false))
        #expect(!selection.includes("Photos/2025b", isDirectory: false), "a prefix is a folder, not a string")
        selection.exclude("Photos/2025/raw")
        #expect(!selection.includes("Photos/2025/raw/1.cr2", isDirectory: false))
        selection.include("Photos/2025/raw/1.cr2")
        #expect(selection.excluded.isEmpty && selection.includes("Photos/2025/raw/1.cr2", isDirectory: false))

        var folders = SyncSelection()
        folders.noNewFolders = true
        folders.folders = ["Documents"]
        #expect(
            folders.includes("Documents/a.txt", isDirectory: false) && folders.includes("top.txt", isDirectory: false))
        #expect(!folders.includes("Music/a.mp3", isDirectory: false) && !folders.includes("Music", isDirectory: true))
        folders.include("Music")
        #expect(folders.includes("Music/a.mp3", isDirectory: false))
    }

    @Test func aDocumentLeftOutIsNeverDownloadedNorDeletedOnTheServer() {
        let current = DocumentInfo(
            path: try! DocumentPath("a"), version: 3, state: .current, kind: .file, size: 1, mtimeNs: 0, mode: 0o644,
            baseVersion: nil, manifestDigest: nil, files: nil, chunks: nil, device: nil, sequence: 1)
        func leftOut(_ decided: SyncDirectory.Action, local: Bool, changed: Bool = false, synced: Int64?)
            -> SyncDirectory.Action
        {
            SyncDirectory.leftOut(
                (decided, .synced), local: local, changed: changed, synced: synced, remote: current, isDirectory: false
            ).0
        }
        #expect(leftOut(.pull, local: false, synced: nil) == .none, "not downloaded")
        #expect(leftOut(.deleteRemote, local: false, synced: 3) == .forget, "not deleted on the server")
        #expect(leftOut(.push, local: true, changed: true, synced: 3) == .push, "its changes go up first")
        #expect(leftOut(.none, local: true, synced: 3) == .exclude, "every byte on the server: to the trash")
        #expect(leftOut(.pull, local: true, synced: 2) == .none, "an older version than the server's: kept")
    }

    @Test func leavingAFolderOutTrashesItsCopiesKeepsTheServersAndTakingItBackPullsThem() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            for name in ["keep/a.txt", "big/b.txt", "big/c.txt"] { try Files.write(a.path(name), Array(name.utf8)) }
            #expect(try await a.engine.syncOnce().uploaded == 3)
            #expect(try await b.engine.syncOnce().downloaded == 3)

            // An edit here that the server lacks goes up before the folder leaves.
            try Files.write(b.path("big/c.txt"), Array("edited on b".utf8))
            var selection = SyncSelection()
            selection.exclude("big")
            try b.engine.directory.state.setSelection(selection)
            let first = try await b.engine.syncOnce()
            #expect(first.uploaded == 1 && first.removedRemotely == 0)
            let second = try await b.engine.syncOnce()
            #expect(first.leftOut + second.leftOut == 2 && second.removedRemotely == 0)
            #expect(Files.read(b.path("big/b.txt")) == nil && Files.read(b.path("big/c.txt")) == nil)
            let trashed = try b.engine.directory.trash().entries().map(\.path).sorted()
            #expect(trashed == ["big/b.txt", "big/c.txt"], "\(trashed)")
            let listed = try await server.client().list().documents.filter { $0.state == .current }.map(\.path.value)
            #expect(Set(listed).isSuperset(of: ["big/b.txt", "big/c.txt"]), "the server keeps them: \(listed)")

            // Another device's change there is not downloaded; the status says why.
            try Files.write(a.path("big/b.txt"), Array("newer".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            #expect(try await b.engine.syncOnce().downloaded == 0)
            #expect(try await b.status()["big/b.txt"] == .excluded)
            #expect(try await a.engine.syncOnce().removedLocally == 0, "nothing was deleted for device a either")

            // A file saved (or moved) into the folder left out was written here: it is synced, and held.
            try Files.write(b.path("big/new.txt"), Array("made on b".utf8))
            #expect(try await b.engine.syncOnce().uploaded == 1)
            #expect(try await b.engine.syncOnce().leftOut == 0 && Files.read(b.path("big/new.txt")) != nil)
            #expect(try b.engine.directory.state.selection().kept.contains("big/new.txt"))

            selection = try b.engine.directory.state.selection()
            selection.include("big")
            try b.engine.directory.state.setSelection(selection)
            #expect(try await b.engine.syncOnce().downloaded == 2)
            #expect(Files.read(b.path("big/b.txt")) == Array("newer".utf8))
            await a.engine.close()
            await b.engine.close()
        }
    }

    @Test func newTopLevelFoldersStayOutUntilIncluded() async throws {
        try await LiveServer.run { server in
            let a = try Device(server, "a")
            let b = try Device(server, "b")
            try Files.write(a.path("Documents/a.txt"), Array("a".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            #expect(try await b.engine.syncOnce().downloaded == 1)
            var selection = SyncSelection()
            selection.noNewFolders = true
            try b.engine.directory.state.setSelection(selection)
            #expect(try await b.engine.syncOnce().downloaded == 0)

            try Files.write(a.path("Music/song.mp3"), Files.random(count: 3000, seed: 9))
            try Files.write(a.path("Documents/b.txt"), Array("b".utf8))
            _ = try await a.engine.syncOnce()
            let pass = try await b.engine.syncOnce()
            #expect(pass.downloaded == 1 && Files.read(b.path("Documents/b.txt")) == Array("b".utf8))
            #expect(Files.read(b.path("Music/song.mp3")) == nil)
            let music = try await b.status()["Music/song.mp3"]
            #expect(music == .excluded)

            var chosen = try b.engine.directory.state.selection()
            #expect(chosen.folders == ["Documents"])
            chosen.include("Music")
            try b.engine.directory.state.setSelection(chosen)
            #expect(try await b.engine.syncOnce().downloaded == 1)
            await a.engine.close()
            await b.engine.close()
        }
    }
}
