import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing
import XferCore
import XferProtocol
import XferServer

@testable import XferClient

/// A client knows which server it talks to: a fresh server at the same address (an empty data
/// directory, a wrong `--data`, a new database) is a new deployment, and nothing local is
/// deleted or overwritten on its word.
@Suite struct ServerIdentityTests {
    /// Two servers behind one address: `second` says which answers.
    /// - Parameter restored: The second server is a copy of the first's data directory taken
    ///   when the account was new (a restore from an old backup: the same deployment, an older
    ///   history), instead of an empty one.
    static func withSwappableServer(
        restored: Bool = false,
        _ body:
            @escaping @Sendable (
                _ root: String, _ remote: Remote, _ second: Locked<Bool>,
                _ servers: [ServerData]
            ) async throws -> Void
    ) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-identity-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let first = try await ServerData.open(root + "/data1")
        let token = try await first.createAccount(name: "tester", quota: nil).token!
        let replacement: ServerData
        if restored {
            try FileManager.default.copyItem(atPath: root + "/data1", toPath: root + "/data2")
            replacement = try await ServerData.open(root + "/data2")
        } else {
            replacement = try await ServerData.open(root + "/data2")
            _ = try await replacement.metadata.createAccount(
                name: try AccountName("tester"), quota: 5 << 30, tokenHash: TokenHash.hash(token))
        }
        let one = XferServer.router(data: first).buildResponder()
        let two = XferServer.router(data: replacement).buildResponder()
        let second = Locked(false)
        var logger = Logger(label: "xfer.test")
        logger.logLevel = .warning
        let app = Application(
            responder: CallbackResponder<XferRequestContext> { request, context in
                second.value
                    ? try await two.respond(to: request, context: context)
                    : try await one.respond(to: request, context: context)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        try await app.test(.live) { client in
            let connection = ServerConnection(server: "http://127.0.0.1:\(client.port!)", token: token)
            defer { Task { await connection.shutdown() } }
            try await body(
                root, Remote(connection: connection, container: .default, stateDirectory: root + "/state"), second,
                [first, replacement])
        }
    }

    /// The reasons of the `serverChanged` events `engine` emits until it is closed.
    static func serverChanges(of engine: SyncEngine) -> Task<[String], Never> {
        Task {
            var seen: [String] = []
            for await event in engine.events {
                if case .serverChanged(let reason) = event { seen.append(reason) }
            }
            return seen
        }
    }

    /// `xfer push` of a root unchanged since it synced sends nothing only if the server still
    /// holds that version: a fresh server at the same address (or one restored from a backup
    /// taken before the push) gets the whole push, and the user's files are then really there.
    @Test(arguments: [false, true])
    func anUnchangedPushToAServerThatLacksItsVersionSendsEverything(restored: Bool) async throws {
        try await Self.withSwappableServer(restored: restored) { root, remote, second, _ in
            let tree = root + "/tree"
            for index in 0..<4 {
                try Files.write(
                    tree + "/dir\(index % 2)/file\(index).bin", Files.random(count: 30_000 + index, seed: UInt64(index))
                )
            }
            let name = try DocumentPath("Documents/tree")
            let first = try await PushEngine(remote: remote).push(tree, as: name)
            #expect(first.committed && first.chunksSent > 0)
            let again = try await PushEngine(remote: remote).push(tree, as: name)
            #expect(!again.committed && again.chunksSent == 0, "the same server holds it: nothing to do")

            #expect(try await PushEngine(remote: remote).plan(tree, as: name).action == .unchanged)
            second.withLock { $0 = true }
            let plan = try await PushEngine(remote: remote).plan(tree, as: name)
            #expect(plan.action == .create && plan.filesToRead == 4, "--dry-run says the same: \(plan.reason)")
            let moved = try await PushEngine(remote: remote).push(tree, as: name)
            #expect(moved.committed, "the server at this address lacks the version this root synced")
            #expect(moved.chunksSent == first.chunksSent)
            let pulled = root + "/pulled"
            _ = try await PullEngine(
                remote: Remote(
                    connection: remote.connection, container: remote.container, stateDirectory: root + "/state-pull")
            )
            .pull(name, into: pulled)
            for index in 0..<4 {
                let path = "/dir\(index % 2)/file\(index).bin"
                #expect(Files.read(pulled + path) == Files.read(tree + path))
            }
            let settled = try await PushEngine(remote: remote).push(tree, as: name)
            #expect(!settled.committed && settled.chunksSent == 0, "and once it holds it, a push does nothing again")
        }
    }

    /// A batch push (what a sync pass does with small documents) has the single push's rule: a
    /// document unchanged since it synced here, or read again and found as it was, makes no
    /// version only if the server confirms it holds the synced one; else it goes in full.
    @Test(arguments: [false, true])
    func anUnchangedBatchPushToAServerThatLacksItsVersionsSendsThem(restored: Bool) async throws {
        try await Self.withSwappableServer(restored: restored) { root, remote, second, _ in
            var items: [PushItem] = []
            var contents: [[UInt8]] = []
            for index in 0..<3 {
                let path = root + "/files/f\(index).bin"
                contents.append(Files.random(count: 2_000 + index, seed: UInt64(40 + index)))
                try Files.write(path, contents[index])
                items.append(
                    PushItem(
                        path: path, name: try DocumentPath("Documents/f\(index).bin"),
                        state: try ClientState(root: path, stateDirectory: root + "/state")))
            }
            let engine = PushEngine(remote: remote)
            #expect(try await engine.pushMany(items).allSatisfy { (try? $0.get().committed) == true })
            #expect(
                try await engine.pushMany(items).allSatisfy { (try? $0.get().committed) == false },
                "the same server holds them")

            second.withLock { $0 = true }
            // f1's stamp moves (the same bytes written again): it is read again and found as it was.
            try Files.write(items[1].path, contents[1])
            let moved = try await engine.pushMany(items)
            for result in moved {
                let report = try result.get()
                #expect(report.committed && report.chunksSent == 1, "the server at this address lacks it: \(report)")
            }
            for index in 0..<3 {
                let pulled = root + "/pulled\(index).bin"
                _ = try await PullEngine(
                    remote: Remote(
                        connection: remote.connection, container: remote.container, stateDirectory: root + "/state-pull"
                    )
                )
                .pull(items[index].name, into: pulled)
                #expect(Files.read(pulled) == contents[index])
            }
            #expect(
                try await engine.pushMany(items).allSatisfy { (try? $0.get().committed) == false },
                "once it holds them, nothing again")
        }
    }

    /// `xfer evict` removes a document's local data only once the server confirms it holds the
    /// version synced here: not on a fresh server at the same address, nor on one restored from
    /// a backup taken before that version.
    @Test(arguments: [false, true])
    func evictKeepsTheLocalCopyWhenTheServerLacksItsVersion(restored: Bool) async throws {
        try await Self.withSwappableServer(restored: restored) { root, remote, second, _ in
            let directory = root + "/synced"
            let content = Files.random(count: 200_000, seed: 5)
            try Files.write(directory + "/Documents/only-copy.bin", content)
            try Files.write(directory + "/Documents/other.bin", Files.random(count: 1_000, seed: 6))
            let engine = try SyncEngine(directory: directory, remote: remote)
            #expect(try await engine.syncOnce().uploaded == 2)
            await engine.close()

            second.withLock { $0 = true }
            await #expect(throws: XferError.self) {
                try await engine.directory.evict(try DocumentPath("Documents/only-copy.bin"))
            }
            #expect(Files.read(directory + "/Documents/only-copy.bin") == content, "the only copy stays")
            second.withLock { $0 = false }
            try await engine.directory.evict(try DocumentPath("Documents/other.bin"))
            #expect(
                !FileManager.default.fileExists(atPath: directory + "/Documents/other.bin"),
                "the server that holds it: evicted")
        }
    }

    @Test func aFreshServerAtTheSameAddressDeletesNothing() async throws {
        try await Self.withSwappableServer { root, remote, second, servers in
            let directory = root + "/synced"
            var contents: [String: [UInt8]] = [:]
            for index in 0..<5 {
                let name = "Documents/note\(index).txt"
                contents[name] = Files.random(count: 10_000 + index, seed: UInt64(index))
                try Files.write(directory + "/" + name, contents[name]!)
            }
            // A copy pulled from the old server, kept outside the synced directory.
            let pulls = try ContainerName("pulls")
            let oldDevice = Remote(connection: remote.connection, container: pulls, stateDirectory: root + "/state-c")
            let puller = Remote(connection: remote.connection, container: pulls, stateDirectory: root + "/state")
            try Files.write(root + "/old.txt", Array("the old server's content".utf8))
            _ = try await PushEngine(remote: oldDevice).push(
                root + "/old.txt", as: try DocumentPath("Documents/only-old.txt"))
            _ = try await PullEngine(remote: puller).pull(
                try DocumentPath("Documents/only-old.txt"), into: root + "/pulled.txt")

            let engine = try SyncEngine(directory: directory, remote: remote)
            #expect(try await engine.syncOnce().uploaded == 5)
            #expect(try await engine.syncOnce().uploaded == 0)

            // The server is replaced by an empty one at the same address.
            second.withLock { $0 = true }
            let status = try await engine.directory.status()
            #expect(
                status.documents.count == 6 && status.documents.allSatisfy { $0.state == .pendingUpload },
                "status plans uploads, not deletions: \(status.documents.map(\.state))")
            let events = Self.serverChanges(of: engine)
            let pass = try await engine.syncOnce()
            await engine.close()
            #expect(pass.removedLocally == 0 && pass.removedRemotely == 0)
            #expect(pass.uploaded == 5)
            #expect(await events.value.first?.contains("different deployment") == true)
            for (name, bytes) in contents { #expect(Files.read(directory + "/" + name) == bytes, "\(name) is intact") }
            #expect(
                try await servers[1].metadata.list(account: 1, container: .default, prefix: "", after: nil, limit: 100)
                    .documents.count == 6)
            #expect(try engine.directory.notices().first?.contains("Nothing local was deleted") == true)
            // And it settles: the next pass does nothing.
            let settled = try await engine.syncOnce()
            #expect(settled.uploaded == 0 && settled.downloaded == 0 && settled.removedLocally == 0)

            // A pull into a copy pulled from the old server, of a name the new server holds with
            // other content under the same version number: fetched whole, not patched against a
            // base it never had (before: invalid_manifest, "the delta was made against base …").
            let newDevice = Remote(connection: remote.connection, container: pulls, stateDirectory: root + "/state-b")
            let other = root + "/other.txt"
            try Files.write(other, Array("the new server's content".utf8))
            _ = try await PushEngine(remote: newDevice).push(other, as: try DocumentPath("Documents/only-old.txt"))
            #expect(Files.read(root + "/pulled.txt") == Array("the old server's content".utf8))
            _ = try await PullEngine(remote: puller).pull(
                try DocumentPath("Documents/only-old.txt"), into: root + "/pulled.txt")
            #expect(Files.read(root + "/pulled.txt") == Array("the new server's content".utf8))
        }
    }

    /// A server restored from an older copy hands out the change numbers this directory saw
    /// again. Once other devices wrote new documents there, its feed is past the view's cursor
    /// and no version number this directory knows has changed: following the feed from the
    /// cursor would miss the new documents numbered below it. The last change the view saw is
    /// no longer at its number, so the pass lists everything and takes the server as a new one.
    @Test func aRestoredServerWithOnlyNewDocumentsIsNoticedAndListed() async throws {
        try await Self.withSwappableServer(restored: true) { root, remote, second, _ in
            let directory = root + "/synced"
            for name in ["a", "b", "c"] { try Files.write(directory + "/Documents/\(name).txt", Array(name.utf8)) }
            let engine = try SyncEngine(directory: directory, remote: remote)
            #expect(try await engine.syncOnce().uploaded == 3)
            #expect(try await engine.syncOnce().uploaded == 0)  // the view is kept; the next pass follows the feed

            second.withLock { $0 = true }
            let other = Remote(connection: remote.connection, container: .default, stateDirectory: root + "/state-b")
            let elsewhere = root + "/b"
            for index in 0..<8 { try Files.write(elsewhere + "/Documents/new\(index).txt", Array("new \(index)".utf8)) }
            let b = try SyncEngine(directory: elsewhere, remote: other)
            #expect(try await b.syncOnce().uploaded == 8)
            await b.close()

            let events = Self.serverChanges(of: engine)
            let pass = try await engine.syncOnce()
            await engine.close()
            #expect(await events.value.first?.contains("no longer holds change") == true)
            #expect(pass.removedLocally == 0 && pass.removedRemotely == 0)
            for index in 0..<8 {
                #expect(
                    Files.read(directory + "/Documents/new\(index).txt") == Array("new \(index)".utf8),
                    "new\(index).txt")
            }
            for name in ["a", "b", "c"] {
                #expect(Files.read(directory + "/Documents/\(name).txt") == Array(name.utf8))
            }
        }
    }

    /// A device that adopted the restored server uploads again what it holds, so the newest
    /// document this directory saw is likely among the feed's changes (here with the same
    /// content, as version 1 again). The history is checked by the newest document the feed
    /// did not report changed, and found broken.
    @Test func aRestoredServerIsNoticedWhenItsNewestDocumentWasUploadedAgain() async throws {
        try await Self.withSwappableServer(restored: true) { root, remote, second, _ in
            let directory = root + "/synced"
            for name in ["a", "b", "c"] { try Files.write(directory + "/Documents/\(name).txt", Array(name.utf8)) }
            let engine = try SyncEngine(directory: directory, remote: remote)
            #expect(try await engine.syncOnce().uploaded == 3)
            #expect(try await engine.syncOnce().uploaded == 0)

            second.withLock { $0 = true }
            let other = Remote(connection: remote.connection, container: .default, stateDirectory: root + "/state-b")
            let elsewhere = root + "/b"
            for index in 0..<4 { try Files.write(elsewhere + "/Documents/new\(index).txt", Array("new \(index)".utf8)) }
            let b = try SyncEngine(directory: elsewhere, remote: other)
            #expect(try await b.syncOnce().uploaded == 4)
            try Files.write(elsewhere + "/Documents/c.txt", Array("c".utf8))  // numbered past this directory's cursor
            #expect(try await b.syncOnce().uploaded == 1)
            await b.close()

            let events = Self.serverChanges(of: engine)
            let pass = try await engine.syncOnce()
            await engine.close()
            #expect(await events.value.first?.contains("no longer holds change") == true)
            #expect(pass.removedLocally == 0 && pass.removedRemotely == 0)
            for index in 0..<4 {
                #expect(Files.read(directory + "/Documents/new\(index).txt") == Array("new \(index)".utf8))
            }
            for name in ["a", "b", "c"] {
                #expect(Files.read(directory + "/Documents/\(name).txt") == Array(name.utf8))
            }
        }
    }

    /// A version that changes state takes a new number on the feed. When that happens between
    /// the pass following the feed and asking for the newest change its view knows (another
    /// device deletes that document just then), the number is empty but the server is the same:
    /// it is not taken for a restored one (which would upload this directory's documents again
    /// and bring the deleted one back).
    @Test func aVersionMovedOnAfterTheFeedWasFollowedIsNoBrokenHistory() async throws {
        try await Self.withSwappableServer { root, remote, _, _ in
            let directory = root + "/synced"
            for name in ["a", "b"] { try Files.write(directory + "/Documents/\(name).txt", Array(name.utf8)) }
            let engine = try SyncEngine(directory: directory, remote: remote)
            #expect(try await engine.syncOnce().uploaded == 2)
            let sync = engine.directory
            let kept = try #require(try sync.state.remoteView())
            let anchor = try #require(kept.documents.values.max { $0.sequence < $1.sequence })

            let other = Remote(connection: remote.connection, container: .default, stateDirectory: root + "/state-b")
            let elsewhere = root + "/b"
            try Files.write(elsewhere + "/Documents/c.txt", Array("c".utf8))
            let b = try SyncEngine(directory: elsewhere, remote: other)
            #expect(try await b.syncOnce().uploaded == 1)
            let followed = try #require(
                try await sync.following(
                    SyncDirectory.Listing(
                        documents: kept.documents, cursor: kept.cursor, deployment: try sync.state.meta("deployment"),
                        changed: [], listedAt: kept.listedAt)))
            #expect(followed.changed?.contains(anchor.path.value) == false)

            try FileManager.default.removeItem(atPath: elsewhere + "/" + anchor.path.value)
            #expect(try await b.syncOnce().removedRemotely == 1)
            await b.close()
            #expect(try await sync.brokenHistory(anchor, followed: followed) == nil)
            await engine.close()
        }
    }

    /// A server restored from an older copy keeps its deployment identity, and once other
    /// devices have written to it its feed may be past the position this directory saw, so
    /// neither tells. A document at a version number this directory saw, with other content,
    /// does: the server is taken as a new one (nothing deleted, both contents kept).
    @Test func aRestoredServerWhoseFeedMovedOnIsNoticed() async throws {
        try await Self.withSwappableServer(restored: true) { root, remote, second, servers in
            let directory = root + "/synced"
            try Files.write(directory + "/Documents/a.txt", Array("one".utf8))
            try Files.write(directory + "/Documents/gone.txt", Array("gone".utf8))
            var options = SyncOptions()
            options.fullListingInterval = .zero  // as after an hour: this pass lists everything
            let engine = try SyncEngine(directory: directory, remote: remote, options: options)
            #expect(try await engine.syncOnce().uploaded == 2)
            // Deleted here while the server is away; the restored copy never had it.
            try FileManager.default.removeItem(atPath: directory + "/Documents/gone.txt")

            // The restored copy: another device writes a.txt there (version 1 again, other
            // content) and enough besides that its feed passes the position seen here.
            second.withLock { $0 = true }
            let other = Remote(connection: remote.connection, container: .default, stateDirectory: root + "/state-b")
            let elsewhere = root + "/b"
            try Files.write(elsewhere + "/Documents/a.txt", Array("three".utf8))
            for index in 0..<4 {
                try Files.write(elsewhere + "/Documents/more\(index).txt", Array("more \(index)".utf8))
            }
            let b = try SyncEngine(directory: elsewhere, remote: other)
            #expect(try await b.syncOnce().uploaded == 5)
            await b.close()

            let events = Self.serverChanges(of: engine)
            let pass = try await engine.syncOnce()
            await engine.close()
            #expect(await events.value.first?.contains("another version 1 of Documents/a.txt") == true)
            #expect(pass.removedLocally == 0 && pass.removedRemotely == 0)
            // Both contents are kept: the current version and a conflict version.
            let info = try await servers[1].metadata.list(
                account: 1, container: .default, prefix: "Documents/a.txt", after: nil, limit: 10
            ).documents
            #expect(info.first?.conflicts?.isEmpty == false, "\(info)")
            #expect(Files.read(directory + "/Documents/more0.txt") == Array("more 0".utf8))
            // Held nowhere any more: its record is dropped, not shown pending for ever.
            let status = try await engine.directory.status().documents
            #expect(!status.contains { $0.path == "Documents/gone.txt" }, "\(status.map { ($0.path, $0.state) })")
            #expect(
                status.allSatisfy { $0.state == .synced || $0.state == .conflict },
                "\(status.map { ($0.path, $0.state) })")
            for version in [1, 2] {
                _ = try await PullEngine(remote: other).pull(
                    try DocumentPath("Documents/a.txt"), into: root + "/v\(version).txt",
                    version: Int64(version))
            }
            let pulled = Set(
                [Files.read(root + "/v1.txt"), Files.read(root + "/v2.txt")].compactMap { $0 }.map {
                    String(decoding: $0, as: UTF8.self)
                })
            #expect(pulled == ["one", "three"], "\(pulled)")
        }
    }
}
