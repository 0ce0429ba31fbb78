import Foundation
import HTTPTypes
import Hummingbird
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// After its first full listing, a pass brings the kept view of the server up to date from the
/// change feed: an unchanged container costs one feed request, a change one request per path.
@Suite struct FollowFeedTests {
    /// Counts requests by route (the last path component: `documents`, `changes`, `document`).
    final class Requests: Sendable {
        let counts = Locked([String: Int]())
        func count(_ request: Request) -> Response? {
            let route = String(request.uri.path.split(separator: "/").last ?? "")
            counts.withLock { $0[route, default: 0] += 1 }
            return nil
        }
        func take() -> [String: Int] {
            counts.withLock { counts in
                let taken = counts
                counts = [:]
                return taken
            }
        }
    }

    /// After a pass that found nothing to do, a pass only confirms nothing changed (the feed
    /// empty, every stamp the recorded one) instead of planning every document; any change on
    /// either side, or a failure left behind, brings the full plan back.
    @Test func aSettledDirectoryIsConfirmedWithoutPlanningAndStillSeesEveryChange() async throws {
        let failing = Locked(false)
        try await LiveServer.run(intercept: { request in
            guard failing.value,
                request.uri.path.hasSuffix("/manifests") || request.uri.path.hasSuffix("/manifest")
                    || request.uri.path.hasSuffix("/chunks/download")
            else { return nil }
            return Response(status: .badGateway)
        }) { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<10 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            #expect(try await deviceA.syncOnce().uploaded == 10)
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            #expect(try await deviceB.syncOnce().downloaded == 10)
            // The first pass that finds nothing to do plans; the next ones only confirm.
            #expect(try await deviceA.syncOnce().confirmed == false)
            #expect(try await deviceA.syncOnce().confirmed == true)

            // A local edit, a new file and a deletion are each seen.
            try Files.write(a + "/Documents/file3.txt", Array("edited".utf8))
            let edited = try await deviceA.syncOnce()
            #expect(edited.uploaded == 1 && !edited.confirmed)
            _ = try await deviceA.syncOnce()
            try Files.write(a + "/Documents/new.txt", Array("new".utf8))
            #expect(try await deviceA.syncOnce().uploaded == 1)
            _ = try await deviceA.syncOnce()
            try FileManager.default.removeItem(atPath: a + "/Documents/file7.txt")
            #expect(try await deviceA.syncOnce().removedRemotely == 1)
            _ = try await deviceA.syncOnce()
            // The same bytes and mtime written again (only the ctime moves): planned, nothing sent.
            var info = stat()
            #expect(lstat(a + "/Documents/file2.txt", &info) == 0)
            try Files.write(a + "/Documents/file2.txt", Array("content 2".utf8))
            var times = [info.st_atim, info.st_mtim]
            #expect(utimensat(AT_FDCWD, a + "/Documents/file2.txt", &times, 0) == 0)
            let touched = try await deviceA.syncOnce()
            #expect(touched.uploaded == 0 && !touched.confirmed, "\(touched)")
            #expect(try await deviceA.syncOnce().confirmed == true)

            // A remote change is seen through the feed.
            #expect(try await deviceB.syncOnce().downloaded == 2)
            try Files.write(b + "/Documents/file5.txt", Array("from b".utf8))
            #expect(try await deviceB.syncOnce().uploaded == 1)
            let pulled = try await deviceA.syncOnce()
            #expect(pulled.downloaded == 1 && !pulled.confirmed)
            #expect(Files.read(a + "/Documents/file5.txt") == Array("from b".utf8))
            _ = try await deviceA.syncOnce()
            #expect(try await deviceA.syncOnce().confirmed == true)

            // A pull that failed is tried again by the next pass, not confirmed away.
            try Files.write(b + "/Documents/file6.txt", Array("again from b".utf8))
            #expect(try await deviceB.syncOnce().uploaded == 1)
            failing.withLock { $0 = true }
            let failed = try await deviceA.syncOnce()
            #expect(failed.failed == 1 && failed.downloaded == 0, "\(failed)")
            let stillFailing = try await deviceA.syncOnce()
            #expect(!stillFailing.confirmed && stillFailing.failed == 1, "\(stillFailing)")
            failing.withLock { $0 = false }
            #expect(try await deviceA.syncOnce().downloaded == 1)
            #expect(Files.read(a + "/Documents/file6.txt") == Array("again from b".utf8))
        }
    }

    @Test func passesAfterTheFirstFollowTheFeedAndStillSeeEveryChange() async throws {
        let requests = Requests()
        try await LiveServer.run(limits: ListingPagesTests.smallPages(4), intercept: requests.count) { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<20 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            try Files.write(a + "/Documents/Deck.pkg/1.txt", Array("slide".utf8))
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            #expect(try await deviceA.syncOnce().uploaded == 21)
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            _ = requests.take()
            #expect(try await deviceB.syncOnce().downloaded == 21)
            #expect((requests.take()["documents"] ?? 0) >= 6, "the first pass lists every page")

            // Nothing changed: one feed request, no listing, no per-document question.
            let idle = try await deviceB.syncOnce()
            #expect(idle.downloaded == 0 && idle.uploaded == 0 && idle.removedLocally == 0)
            let quiet = requests.take()
            #expect(quiet["documents"] == nil && quiet["document"] == nil && quiet["changes"] == 1, "\(quiet)")

            // An edit, a new file, a deletion and a package edit on A reach B from the feed.
            try Files.write(a + "/Documents/file3.txt", Array("edited".utf8))
            try Files.write(a + "/Documents/new.txt", Array("new".utf8))
            try FileManager.default.removeItem(atPath: a + "/Documents/file7.txt")
            try Files.write(a + "/Documents/Deck.pkg/2.txt", Array("two".utf8))
            let fromA = try await deviceA.syncOnce()
            #expect(fromA.uploaded == 3 && fromA.removedRemotely == 1)
            _ = requests.take()
            let toB = try await deviceB.syncOnce()
            #expect(toB.downloaded == 3 && toB.removedLocally == 1, "\(toB)")
            #expect(requests.take()["documents"] == nil, "no listing")
            #expect(FileManager.default.contents(atPath: b + "/Documents/file3.txt") == Data("edited".utf8))
            #expect(FileManager.default.contents(atPath: b + "/Documents/Deck.pkg/2.txt") == Data("two".utf8))
            #expect(!FileManager.default.fileExists(atPath: b + "/Documents/file7.txt"))

            // B's own changes travel back; the view B keeps holds them, so its next pass is idle.
            try Files.write(b + "/Documents/file4.txt", Array("from b".utf8))
            #expect(try await deviceB.syncOnce().uploaded == 1)
            let settled = try await deviceB.syncOnce()
            #expect(
                settled.uploaded == 0 && settled.downloaded == 0 && settled.removedLocally == 0
                    && settled.removedRemotely == 0)
            #expect(try await deviceA.syncOnce().downloaded == 1)
            #expect(FileManager.default.contents(atPath: a + "/Documents/file4.txt") == Data("from b".utf8))
            #expect(
                Set(try FileManager.default.contentsOfDirectory(atPath: a + "/Documents"))
                    == Set(try FileManager.default.contentsOfDirectory(atPath: b + "/Documents")))
        }
    }

    /// A document question that fails while the view is brought up to date stops the pass
    /// before it decides anything: the remote deletion is not acted on until it can be confirmed.
    @Test func aFailedQuestionWhileFollowingDeletesNothing() async throws {
        let failing = Locked(false)
        try await LiveServer.run(intercept: { request in
            failing.value && request.method == .get && request.uri.path.hasSuffix("/document")
                ? Response(status: .badGateway) : nil
        }) { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<3 { try Files.write(a + "/Documents/file\(index).txt", Array("content \(index)".utf8)) }
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            _ = try await deviceA.syncOnce()
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            #expect(try await deviceB.syncOnce().downloaded == 3)
            try FileManager.default.removeItem(atPath: a + "/Documents/file1.txt")
            #expect(try await deviceA.syncOnce().removedRemotely == 1)
            failing.withLock { $0 = true }
            await #expect(throws: XferError.self) { _ = try await deviceB.syncOnce() }
            #expect(FileManager.default.fileExists(atPath: b + "/Documents/file1.txt"))
            failing.withLock { $0 = false }
            #expect(try await deviceB.syncOnce().removedLocally == 1)
        }
    }

    @Test func aStaleKeptViewIsListedAgain() async throws {
        let requests = Requests()
        try await LiveServer.run(intercept: requests.count) { server in
            let a = server.root + "/a"
            try Files.write(a + "/Documents/one.txt", Array("1".utf8))
            var options = SyncOptions()
            options.fullListingInterval = .zero
            let device = try SyncEngine(directory: a, remote: server.otherDevice("a"), options: options)
            _ = try await device.syncOnce()
            _ = requests.take()
            _ = try await device.syncOnce()
            #expect(requests.take()["documents"] == 1, "a view older than the interval is not followed")
        }
    }

    /// A file changed without its size or mtime changing (same-length write, mtime put back)
    /// still counts as changed: its ctime moved, so it is compared with the synced manifest.
    @Test func aSameSizeEditWithTheOldMtimeIsStillPushed() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let path = a + "/Documents/same.txt"
            try Files.write(path, Array("aaaa".utf8))
            let device = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            _ = try await device.syncOnce()
            var info = stat()
            #expect(lstat(path, &info) == 0)
            try Files.write(path, Array("bbbb".utf8))
            var times = [info.st_atim, info.st_mtim]
            #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
            #expect(try await device.syncOnce().uploaded == 1)
        }
    }

    /// A reader following the feed while others write sees every change: a page's cursor never
    /// passes a change that page did not carry (on PostgreSQL each statement of a transaction
    /// reads a newer snapshot, so the head must be read before the rows).
    @Test(LiveServer.plainOnly("writes plain key-value entries through the protocol"))
    func theFeedMissesNoChangeCommittedWhileItIsRead() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            let writers = 4
            let writes = 30
            let reader = Task {
                var seen: Set<String> = []
                var cursor: Int64 = 0
                var idle = 0
                // Until every key arrived, or the writers are done and the feed has been quiet a while.
                while seen.count < writers * writes && idle < 40 {
                    let page = try await connection.changes(container: .default, after: cursor, wait: 0)
                    #expect(page.cursor >= cursor)
                    seen.formUnion(page.keys.map(\.key))
                    idle = page.keys.isEmpty ? idle + 1 : 0
                    cursor = page.cursor
                    try await Task.sleep(for: .milliseconds(page.keys.isEmpty ? 50 : 1))
                }
                return seen
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<writers {
                    group.addTask {
                        for index in 0..<writes {
                            let write = KeyValueWrite(
                                key: "w\(writer)-\(index)", value: .int(Int64(index)),
                                timestampNs: Int64(Date().timeIntervalSince1970 * 1e9), device: "d\(writer)")
                            let result = try await connection.setValue(container: .default, write)
                            #expect(result.applied)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let seen = try await reader.value
            let written = Set((0..<writers).flatMap { writer in (0..<writes).map { "w\(writer)-\($0)" } })
            #expect(written.subtracting(seen).isEmpty, "never seen on the feed: \(written.subtracting(seen).sorted())")
        }
    }
}
