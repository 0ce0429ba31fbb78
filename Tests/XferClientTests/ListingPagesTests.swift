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
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<11 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            #expect(try await deviceA.syncOnce().uploaded == 11)
            let page = try await server.remote.connection.listPage(container: .default, prefix: "", page: nil)
            #expect(page.documents.count == 3 && page.more && page.next != nil, "the server pages")
            // and Documents
            #expect(try await server.remote.connection.list(container: .default, prefix: "").documents.count == 12)

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
            #expect(
                Set(try FileManager.default.contentsOfDirectory(atPath: b + "/Documents"))
                    == Set(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents")))
        }
    }

    /// A listing whose later page fails (a broken proxy, a server restarting), or a change feed
    /// or document request that fails while a kept view is brought up to date: the pass stops
    /// before deciding anything, so nothing local or remote is deleted. Device A lists every
    /// pass; device B follows the feed after its first.
    @Test func aFailedListingPageDeletesNothing() async throws {
        let failing = Locked(false)
        try await LiveServer.run(
            limits: Self.smallPages(),
            intercept: { request in
                guard failing.value else { return nil }
                let path = request.uri.path
                if path.hasSuffix("/documents") && request.uri.queryParameters.get("page") != nil {
                    return Response(status: .badGateway)
                }
                if path.hasSuffix("/changes") { return Response(status: .badGateway) }
                return nil
            }
        ) { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
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
            #expect(try await server.client().stat("Documents/file1.txt").state == .current)
            // Once the server answers again, the delete travels and nothing else is lost.
            failing.withLock { $0 = false }
            #expect(try await deviceB.syncOnce().removedRemotely == 1)
            let after = try await deviceA.syncOnce()
            #expect(after.removedLocally == 1)
            #expect(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents").count == 7)
        }
    }
}

extension ListingPagesTests {
    /// Past the real default page (10,000): a container of 10,050 documents lists whole, in
    /// two pages, and a pass that lists it (not following the feed) keeps every local file.
    /// The page size is the server's, not the store's: run once, on the embedded stores (the
    /// backend suite covers the stores' paging with small pages above).
    @Test(
        .enabled(if: ProcessInfo.processInfo.environment["XFER_POSTGRES_URL"] == nil),
        LiveServer.plainOnly("writes documents by plain names through the protocol"))
    func theRealDefaultPageIsReadToItsEnd() async throws {
        try await LiveServer.run { server in
            let count = ServerLimits().listPage + 50
            let connection = server.remote.connection
            let manifest = try Manifest(
                kind: .file, chunker: .default,
                entries: [Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [])])
            // Empty documents, announced and committed sixteen at a time.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    if index >= 16 { try await group.next() }
                    group.addTask {
                        let path = try DocumentPath(String(format: "Data/d%02d/f%05d", index / 1000, index))
                        let announced = try await connection.announce(
                            container: .default,
                            AnnounceRequest(
                                path: path, kind: .file, size: 0, mtimeNs: 0, mode: 0o644, baseVersion: nil))
                        _ = try await connection.commit(
                            container: .default,
                            CommitRequest(
                                path: path, version: announced.version, baseVersion: nil, deltaBase: nil,
                                manifestDelta: manifest.delta(against: nil), manifestDigest: manifest.digest))
                    }
                }
                try await group.waitForAll()
            }
            let first = try await connection.listPage(container: .default, prefix: "", page: nil)
            #expect(first.documents.count == ServerLimits().listPage && first.more)
            #expect(try await connection.list(container: .default, prefix: "").documents.count == count)

            // A device whose only local file sorts after the first page: listing every pass,
            // it is pushed once and kept, and nothing of the server's is deleted.
            let a = server.root + "/a"
            try Files.write(a + "/Data/zz-last.txt", Array("mine".utf8))
            var options = SyncOptions()
            options.followFeed = false
            let device = try SyncEngine(directory: a, remote: server.otherDevice("a"), options: options)
            let status = try await device.directory.status()
            #expect(status.documents.count == count + 2)
            let preview = try await device.directory.preview()
            #expect(preview.steps.filter { $0.action == .upload }.map(\.path) == ["Data", "Data/zz-last.txt"])
            #expect(preview.steps.filter { $0.action == .download }.count == count)
            #expect(preview.steps.allSatisfy { $0.action != .deleteLocal && $0.action != .deleteRemote })
        }
    }
}
