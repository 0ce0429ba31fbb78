import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// No rule of the sync engine destroys a file for good: a mass deletion waits for the user's
/// word, and what sync deletes or replaces goes to the directory's trash first.
@Suite struct SyncSafetyTests {
    @Test(arguments: [
        (51, 100, true), (50, 100, false), (51, 153, false), (51, 152, true), (1000, 1000, true), (3, 3, false)
    ])
    func theMassDeletionRule(_ count: Int, _ total: Int, _ mass: Bool) {
        #expect(MassDeletion.isMass(count, of: total) == mass)
    }

    static func device(_ server: LiveServer, _ name: String, allowMassDelete: Bool = false) throws -> SyncEngine {
        let directory = server.root + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var options = SyncOptions()
        options.allowMassDelete = allowMassDelete
        return try SyncEngine(directory: directory, remote: server.otherDevice(name), options: options)
    }

    @Test func aMassDeletionStopsBeforeTheFirstDeleteAndEveryDeletionIsRestorable() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<60 { try Files.write(a + "/Documents/f\(index).txt", Array("file \(index)".utf8)) }
            #expect(try await Self.device(server, "a").syncOnce().uploaded == 60)
            #expect(try await Self.device(server, "b").syncOnce().downloaded == 60)

            // B loses 55 of its 60 files (a disk not mounted, a script gone wrong): nothing is
            // deleted on the server.
            for index in 0..<55 { try FileManager.default.removeItem(atPath: b + "/Documents/f\(index).txt") }
            let heldB = try await Self.device(server, "b").syncOnce()
            #expect(heldB.removedRemotely == 0 && heldB.deletionsHeld == 55)
            #expect(try await server.client().list().documents.count == 61)  // and Documents

            // Told so, the user lets it go; then A holds back its local side in turn, until told.
            #expect(try await Self.device(server, "b", allowMassDelete: true).syncOnce().removedRemotely == 55)
            let heldA = try await Self.device(server, "a").syncOnce()
            #expect(heldA.removedLocally == 0 && heldA.deletionsHeld == 55)
            #expect(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents").count == 60)
            let engine = try Self.device(server, "a", allowMassDelete: true)
            #expect(try await engine.syncOnce().removedLocally == 55)
            #expect(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents").count == 5)

            // Every local deletion is in the trash, and comes back.
            let trash = try engine.directory.trash()
            let entries = try trash.entries()
            #expect(entries.count == 55 && entries.allSatisfy { $0.reason == "deleted on the server" })
            let seven = try #require(entries.first { $0.path == "Documents/f7.txt" })
            try trash.restore(seven)
            #expect(Files.read(a + "/Documents/f7.txt") == Array("file 7".utf8))
            #expect(try trash.entries().count == 54)
            // The engine never syncs its trash.
            let pass = try await engine.syncOnce()
            #expect(pass.uploaded == 1, "the restored file is pushed as new; the trash is not")
            #expect(try await server.client().list().documents.count == 7)
            #expect(try trash.empty() == 54)
            #expect(try trash.entries().isEmpty)
        }
    }

    /// Renaming a directory of many files deletes as many documents as it creates: nothing is
    /// lost, so the mass-deletion rule lets it through on both devices (the same number simply
    /// deleted is still held).
    @Test func aRenamedDirectoryIsNotAMassDeletion() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<60 { try Files.write(a + "/Documents/old/f\(index).txt", Array("file \(index)".utf8)) }
            #expect(try await Self.device(server, "a").syncOnce().uploaded == 60)
            #expect(try await Self.device(server, "b").syncOnce().downloaded == 60)

            try FileManager.default.moveItem(atPath: a + "/Documents/old", toPath: a + "/Documents/new")
            let renamed = try await Self.device(server, "a").syncOnce()
            #expect(renamed.uploaded == 60 && renamed.removedRemotely == 60 && renamed.deletionsHeld == 0, "\(renamed)")
            let followed = try await Self.device(server, "b").syncOnce()
            #expect(
                followed.downloaded == 60 && followed.removedLocally == 60 && followed.deletionsHeld == 0, "\(followed)"
            )
            #expect(try FileManager.default.contentsOfDirectory(atPath: b + "/Documents/new").count == 60)
            #expect(!FileManager.default.fileExists(atPath: b + "/Documents/old/f1.txt"))

            // The same count deleted outright (nothing arrives under another name) is still held.
            try FileManager.default.removeItem(atPath: a + "/Documents/new")
            let deleted = try await Self.device(server, "a").syncOnce()
            #expect(deleted.removedRemotely == 0 && deleted.deletionsHeld == 60, "\(deleted)")
        }
    }

    @Test func aFileReplacedBySyncIsKeptInTheTrash() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            try Files.write(a + "/Documents/notes.txt", Array("first".utf8))
            let deviceA = try Self.device(server, "a")
            let deviceB = try Self.device(server, "b")
            _ = try await deviceA.syncOnce()
            _ = try await deviceB.syncOnce()
            try Files.write(a + "/Documents/notes.txt", Array("second".utf8))
            _ = try await deviceA.syncOnce()
            #expect(try await deviceB.syncOnce().downloaded == 1)
            #expect(Files.read(b + "/Documents/notes.txt") == Array("second".utf8))
            let entries = try deviceB.directory.trash().entries()
            #expect(entries.count == 1 && entries[0].reason.hasPrefix("replaced by version"))
            let kept = b + "/.xfer-trash/\(entries[0].id)/Documents/notes.txt"
            #expect(Files.read(kept) == Array("first".utf8))
        }
    }
}
