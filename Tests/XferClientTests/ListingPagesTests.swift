import Foundation
import HTTPTypes
import Hummingbird
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// Listings come in pages; nothing is decided from a listing that was not read to its end.
@Suite struct ListingPagesTests {
    static func smallPages(_ size: Int = 3) -> ServerLimits {
        var limits = ServerLimits()
        limits.listPage = size
        return limits
    }

    @Test func aContainerLargerThanOnePageSyncsWithoutLosingAFile() async throws {
        try await LiveServer.run(limits: Self.smallPages()) { server in
            let a = server.root + "/a", b = server.root + "/b"
            for index in 0..<11 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            #expect(try await deviceA.syncOnce().uploaded == 11)
            let page = try await server.remote.connection.listPage(container: .default, prefix: "", page: nil)
            #expect(page.documents.count == 3 && page.more && page.next != nil, "the server pages")
            #expect(try await server.remote.connection.list(container: .default, prefix: "").documents.count == 11)

            // A second pass, and a new file, on a container of four pages: every local file stays.
            try Files.write(a + "/Documents/zz-new.txt", Array("new".utf8))
            let second = try await deviceA.syncOnce()
            #expect(second.uploaded == 1 && second.removedLocally == 0 && second.removedRemotely == 0)
            let third = try await deviceA.syncOnce()
            #expect(third.removedLocally == 0 && third.removedRemotely == 0)
            for index in 0..<11 { #expect(FileManager.default.fileExists(atPath: a + "/Documents/file\(index).txt")) }

            // A second device gets every document; deletions on either side still travel.
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            #expect(try await deviceB.syncOnce().downloaded == 12)
            try FileManager.default.removeItem(atPath: b + "/Documents/file10.txt")
            #expect(try await deviceB.syncOnce().removedRemotely == 1)
            try FileManager.default.removeItem(atPath: a + "/Documents/file0.txt")
            let fromA = try await deviceA.syncOnce()
            #expect(fromA.removedLocally == 1 && fromA.removedRemotely == 1)
            #expect(!FileManager.default.fileExists(atPath: a + "/Documents/file10.txt"))
            #expect(try await deviceB.syncOnce().removedLocally == 1)
            #expect(!FileManager.default.fileExists(atPath: b + "/Documents/file0.txt"))
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: b + "/Documents"))
                    == Set(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents")))
        }
    }

    /// A listing whose later page fails (a broken proxy, a server restarting), or a change feed
    /// or document request that fails while a kept view is brought up to date: the pass stops
    /// before deciding anything, so nothing local or remote is deleted. Device A lists every
    /// pass; device B follows the feed after its first.
    @Test func aFailedListingPageDeletesNothing() async throws {
        let failing = Locked(false)
        try await LiveServer.run(limits: Self.smallPages(), intercept: { request in
            guard failing.value else { return nil }
            let path = request.uri.path
            if path.hasSuffix("/documents") && request.uri.queryParameters.get("page") != nil { return Response(status: .badGateway) }
            if path.hasSuffix("/changes") { return Response(status: .badGateway) }
            return nil
        }) { server in
            let a = server.root + "/a", b = server.root + "/b"
            for index in 0..<8 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            var listEveryPass = SyncOptions()
            listEveryPass.followFeed = false
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"), options: listEveryPass)
            _ = try await deviceA.syncOnce()
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            #expect(try await deviceB.syncOnce().downloaded == 8)
            // B deletes one (a pending remote delete), then every later page fails.
            try FileManager.default.removeItem(atPath: b + "/Documents/file1.txt")
            failing.withLock { $0 = true }
            for device in [deviceA, deviceB] {
                await #expect(throws: XferError.self) { _ = try await device.syncOnce() }
            }
            for index in 0..<8 { #expect(FileManager.default.fileExists(atPath: a + "/Documents/file\(index).txt")) }
            #expect(try await server.remote.connection.stat(container: .default, path: try DocumentPath("Documents/file1.txt")).state == .current)
            // Once the server answers again, the delete travels and nothing else is lost.
            failing.withLock { $0 = false }
            #expect(try await deviceB.syncOnce().removedRemotely == 1)
            let after = try await deviceA.syncOnce()
            #expect(after.removedLocally == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents").count == 7)
        }
    }
}
