import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// Versions and conflicts, retention, quota, the key-value store and the change feed, with
/// two or three devices against a live server.
@Suite struct VersionsAndKeyValueTests {
    @Test(
        LiveServer.plainOnly(
            "the server settles a conflict by modification time, which end to end it does not see (there the later push wins: EndToEndPushPullTests)"
        )) func concurrentEditsKeepBothVersionsUntilResolved() async throws
    {
        try await LiveServer.run { server in
            let a = server.client(device: "a")
            let bRemote = server.otherDevice("b")
            let b = server.client(bRemote, device: "b")
            let fileA = server.root + "/a.txt"
            let fileB = server.root + "/b.txt"
            try Files.write(fileA, Files.random(count: 100_000, seed: 1))
            try Files.setMtime(fileA, 1_000)
            _ = try await a.push(fileA, as: "Documents/n.txt")
            _ = try await b.pull("Documents/n.txt", into: fileB)

            // Both edit from v1; B's edit is later (by mtime) and pushes second: B wins, A's is a conflict.
            try Files.write(fileA, Files.random(count: 100_000, seed: 2))
            try Files.setMtime(fileA, 2_000)
            let first = try await a.push(fileA, as: "Documents/n.txt")
            #expect(first.version == 2 && first.state == .current)
            let usedBefore = try await a.account().used
            try Files.write(fileB, Files.random(count: 100_000, seed: 3))
            try Files.setMtime(fileB, 3_000)
            let second = try await b.push(fileB, as: "Documents/n.txt")
            #expect(second.version == 3 && second.state == .current && second.conflicts == [2])
            // Both sides learn of it: A through stat and the listing.
            #expect(try await a.stat("Documents/n.txt").conflicts == [2])
            #expect(try await a.list(scope: .documents).documents.map(\.conflicts) == [[2]])
            #expect(try await a.list(scope: .data).documents.isEmpty)

            // A third device's edit from v1 with an older mtime loses: kept as a conflict.
            let cRemote = server.otherDevice("c")
            let fileC = server.root + "/c.txt"
            _ = try await server.pull("Documents/n.txt", fileC, from: cRemote)
            let stale = try ClientState(root: fileC, stateDirectory: cRemote.stateDirectory)
            #expect(
                try stale.document(
                    server: cRemote.connection.server, container: .default, path: DocumentPath("Documents/n.txt"))?
                    .version == 3)
            let fileD = server.root + "/d.txt"
            try Files.write(fileD, Files.random(count: 50_000, seed: 4))
            try Files.setMtime(fileD, 1_500)
            let dRemote = server.otherDevice("d")
            let lost = try await server.push(fileD, "Documents/n.txt", from: dRemote)
            #expect(lost.state == .conflict && lost.version == 4 && lost.conflicts == [2, 4])

            let versions = try await a.versions("Documents/n.txt")
            #expect(versions.map(\.version) == [4, 3, 2, 1])
            #expect(versions.map(\.state) == [.conflict, .current, .conflict, .superseded])
            // Conflict versions count against the quota until resolved.
            #expect(try await a.account().used > usedBefore + 100_000)

            // Any kept version can be pulled.
            let pulledConflict = server.root + "/conflict.txt"
            _ = try await a.pull("Documents/n.txt", into: pulledConflict, version: 2)
            #expect(Files.read(pulledConflict) == Files.random(count: 100_000, seed: 2))

            // Resolve keeping A's version: the others are removed and their space given back.
            let resolved = try await a.resolve("Documents/n.txt", keep: 2)
            #expect(resolved.version == 2 && resolved.state == .current && resolved.conflicts == nil)
            #expect(try await a.versions("Documents/n.txt").map(\.version) == [2, 1])
            let usedAfter = try await a.account().used
            #expect(usedAfter < usedBefore + 60_000)
            _ = try await b.pull("Documents/n.txt", into: fileB)
            #expect(Files.read(fileB) == Files.random(count: 100_000, seed: 2))

            // A version that is neither current nor a conflict cannot be kept.
            await #expect(throws: XferError.self) { _ = try await a.resolve("Documents/n.txt", keep: 1) }
        }
    }

    @Test(
        LiveServer.plainOnly(
            "the server settles a conflict by modification time, which end to end it does not see (there the later push wins: EndToEndPushPullTests)"
        )) func resolveCanKeepEveryVersionInHistory() async throws
    {
        try await LiveServer.run { server in
            let file = server.root + "/f"
            try Files.write(file, Array("one".utf8))
            _ = try await server.push(file, "f")
            let other = server.otherDevice("o")
            let otherFile = server.root + "/g"
            try Files.write(otherFile, Array("two".utf8))
            try Files.setMtime(otherFile, 10)
            let conflict = try await server.push(otherFile, "f", from: other)
            #expect(conflict.state == .conflict)
            let kept = try await server.client().resolve("f", keep: conflict.version, keepAll: true)
            #expect(kept.version == conflict.version)
            let states = try await server.client().versions("f").map(\.state)
            #expect(states == [.current, .superseded])
        }
    }

    @Test(
        LiveServer.plainOnly(
            "the server settles a conflict by modification time, which end to end it does not see (there the later push wins: EndToEndPushPullTests)"
        )) func retentionPrunesOnlySupersededVersions() async throws
    {
        var policy = StorePolicy()
        policy.keepVersions = 1
        policy.keepDays = 0
        try await LiveServer.run(policy: policy) { server in
            let file = server.root + "/f"
            for round in 1...4 {
                try Files.write(file, Files.random(count: 20_000, seed: UInt64(round)))
                _ = try await server.push(file, "f")
            }
            let client = server.client()
            #expect(try await client.versions("f").map(\.version) == [4, 3])
            // A conflict version is never pruned, however many versions follow.
            let other = server.otherDevice("o")
            let otherFile = server.root + "/g"
            try Files.write(otherFile, Array("old edit".utf8))
            try Files.setMtime(otherFile, 10)
            #expect(try await server.push(otherFile, "f", from: other).state == .conflict)
            for round in 5...6 {
                try Files.write(file, Files.random(count: 20_000, seed: UInt64(round)))
                _ = try await server.push(file, "f")
            }
            #expect(try await client.versions("f").map(\.state) == [.current, .superseded, .conflict])
            // Pruned versions gave their chunks back: only the kept versions' bytes count.
            #expect(try await client.account().used == 20_000 * 2 + 8)
        }
    }

    @Test func aPushPastTheQuotaCommitsNothing() async throws {
        try await LiveServer.run(quota: 200_000) { server in
            let file = server.root + "/big"
            try Files.write(file, Files.random(count: 1 << 20, seed: 5))
            do {
                _ = try await server.push(file, "Documents/big")
                Issue.record("a push past the quota succeeded")
            } catch let error as XferError {
                #expect(error.code == .quotaExceeded)
                #expect(error.message.contains("quota"))
            }
            let client = server.client()
            #expect(try await client.account().used == 0)
            #expect(try await client.stat("Documents/big").state == .uploading)
            await #expect(throws: XferError.self) {
                _ = try await client.pull("Documents/big", into: server.root + "/out")
            }
            // A push that fits still works.
            try Files.write(file, Files.random(count: 100_000, seed: 6))
            #expect(try await server.push(file, "Documents/big").state == .current)
        }
    }

    @Test(LiveServer.plainOnly("writes plain key-value entries through the protocol, and counts their plain bytes"))
    func keyValueLimitsAndLastWriterWins() async throws {
        var policy = StorePolicy()
        policy.keyValueMaximumKeys = 3
        policy.keyValueMaximumBytes = 200
        try await LiveServer.run(policy: policy) { server in
            let client = server.client()
            let connection = server.remote.connection
            try await client.setValue(.string("dark"), forKey: "theme")
            try await client.setValue(.int(3), forKey: "count")
            try await client.setValue(.object(["a": .bool(true), "b": .double(1.5)]), forKey: "prefs")
            #expect(try await client.value(forKey: "count") == .int(3))
            // Past the key limit: refused, nothing changes.
            do {
                try await client.setValue(.int(1), forKey: "fourth")
                Issue.record("a fourth key was stored")
            } catch let error as XferError {
                #expect(error.code == .quotaExceeded)
            }
            // Past the byte limit: refused, the previous value stays.
            do {
                try await client.setValue(.string(String(repeating: "x", count: 300)), forKey: "theme")
                Issue.record("an oversized value was stored")
            } catch let error as XferError {
                #expect(error.code == .quotaExceeded)
            }
            #expect(try await client.value(forKey: "theme") == .string("dark"))
            // Keys longer than 64 bytes are refused.
            await #expect(throws: XferError.self) {
                try await client.setValue(.int(1), forKey: String(repeating: "k", count: 65))
            }

            // Last writer wins by timestamp, then by device name; an older write changes nothing.
            let write = { (value: Int64, time: Int64, device: String) in
                try await connection.setValue(
                    container: .default,
                    KeyValueWrite(key: "count", value: .int(value), timestampNs: time, device: device))
            }
            let now = Int64(Date().timeIntervalSince1970 * 1e9) + 60_000_000_000
            #expect(try await write(10, now, "m").applied)
            #expect(try await write(11, now - 1, "z").applied == false)
            #expect(try await write(12, now, "a").applied == false)
            let tie = try await write(13, now, "n")
            #expect(tie.applied && tie.entry.value == .int(13))
            #expect(try await client.value(forKey: "count") == .int(13))

            try await client.removeValue(forKey: "prefs")
            #expect(try await client.value(forKey: "prefs") == nil)
            #expect(try await client.values().entries.map(\.key) == ["count", "theme"])
            // Key-value writes are on the change feed, deletions included.
            let feed = try await connection.changes(container: .default, after: 0)
            #expect(
                feed.keys.map(\.key)
                    == ["theme", "count", "prefs"].sorted { a, b in
                        feed.keys.first { $0.key == a }!.sequence < feed.keys.first { $0.key == b }!.sequence
                    })
            #expect(feed.keys.first { $0.key == "prefs" }?.value == nil)
        }
    }

    @Test(LiveServer.plainOnly("announces a document by its plain name through the protocol"))
    func theChangeFeedWakesAWaitingClientAndResumesFromItsCursor() async throws {
        try await LiveServer.run { server in
            let client = server.client()
            let cursorFile = server.root + "/cursor"
            let waiter = Task { () -> DocumentInfo? in
                for try await change in client.changes(cursor: FileCursorStore(path: cursorFile), wait: 60) {
                    if case .document(let info) = change { return info }
                }
                return nil
            }
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            // Metadata first: an announce (before any data) wakes the waiting client as "uploading".
            let size: Int64 = 300_000
            _ = try await server.remote.connection.announce(
                container: .default,
                AnnounceRequest(
                    path: DocumentPath("Documents/doc"), kind: .file, size: size, mtimeNs: 5, mode: 0o644,
                    baseVersion: nil))
            let woke = try #require(try await waiter.value)
            #expect(woke.state == .uploading && woke.size == size && woke.path.value == "Documents/doc")
            // The longest wait the protocol allows, so the margin below its timeout stays wide
            // when the whole suite shares two cores (a wait of 30 s once answered in 20.4 s there).
            #expect(
                ContinuousClock.now - started < .seconds(45),
                "a waiting feed answers when a change arrives, not at its 60 s timeout")

            // A new feed resumes after what was acknowledged: at most the last change handed out
            // (never acknowledged) comes again, never the ones before it.
            let file = server.root + "/doc"
            try Files.write(file, Files.random(count: Int(size), seed: 8))
            _ = try await server.push(file, "Documents/doc")
            try await client.setValue(.bool(true), forKey: "after")
            var iterator = client.changes(cursor: FileCursorStore(path: cursorFile), wait: 5).makeAsyncIterator()
            var documents: [DocumentInfo] = []
            while let change = try await iterator.next() {
                if case .key(let entry) = change {
                    #expect(entry.key == "after")
                    break
                }
                if case .document(let info) = change { documents.append(info) }
            }
            #expect(documents.map(\.state).last == .current)
            #expect(documents.count <= 2)
        }
    }
}
