import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// Garbage collection and verification against a live server, and the pull's hardening.
@Suite struct MaintenanceTests {
    /// The chunks in the server's store.
    static func storedChunks(_ server: LiveServer) async throws -> Set<ChunkID> {
        var ids: Set<ChunkID> = []
        for shard in UInt8.min...UInt8.max { ids.formUnion(try await server.data.chunks.list(shard: shard).map(\.id)) }
        return ids
    }

    @Test(LiveServer.plainOnly("counts plain chunks' stored bytes"))
    func gcRemovesWhatNoVersionNeedsAndKeepsLeasesWithinGrace() async throws {
        var policy = StorePolicy()
        policy.keepVersions = 0
        policy.keepDays = 0
        try await LiveServer.run(policy: policy) { server in
            let file = server.root + "/doc.bin"
            try Files.write(file, Files.random(count: 600_000, seed: 1))
            _ = try await server.push(file, "doc")
            let first = try await Self.storedChunks(server)
            // Chunks stored more than a grace of 1 s before `then` are old enough to sweep;
            // what comes after `then` is young.
            try await Task.sleep(for: .milliseconds(2100))
            let then = Date()
            // A new version replaces every chunk; the old version is pruned at once (keep 0).
            try Files.write(file, Files.random(count: 600_000, seed: 2))
            _ = try await server.push(file, "doc")
            let used = try await server.remote.connection.account().used
            #expect(used == 600_000)

            // A chunk uploaded for a commit that has not come yet: a lease.
            let pending = Files.random(count: 100_000, seed: 3)
            let chunk = try pending.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(pending), policy: .default) }
            _ = try await server.remote.connection.upload([chunk])
            #expect(try await server.remote.connection.account().used == 600_000 + 100_000)

            // Within the grace period: the old version's chunks go, the lease stays.
            let maintenance = Maintenance(data: server.data)
            let dry = try await maintenance.collectGarbage(grace: 1, dryRun: true, now: then)
            #expect(dry.chunksRemoved == first.count)
            #expect(try await Self.storedChunks(server).isSuperset(of: first))
            let report = try await maintenance.collectGarbage(grace: 1, now: then)
            #expect(report.chunksRemoved == first.count)
            #expect(report.bytesRemoved > 0)
            #expect(report.leasesExpired == 0)
            #expect(try await Self.storedChunks(server).isDisjoint(with: first))
            #expect(try await Self.storedChunks(server).contains(chunk.id))
            #expect(try await server.remote.connection.account().used == 700_000)

            // Past the grace period the lease is released, its bytes leave the quota and the file goes.
            let late = try await maintenance.collectGarbage(grace: 0)
            #expect(late.leasesExpired == 1)
            #expect(late.quotaReleased == 100_000)
            #expect(late.chunksRemoved == 1)
            #expect(try await !Self.storedChunks(server).contains(chunk.id))
            #expect(try await server.remote.connection.account().used == 600_000)

            // An absurd grace period (found by schemathesis: it used to overflow) keeps everything.
            let forever = try await maintenance.collectGarbage(grace: .max)
            #expect(forever.chunksRemoved == 0 && forever.graceSeconds == Maintenance.maximumGrace)

            // Nothing committed was touched: the document pulls intact, and verify is clean.
            _ = try await server.pull("doc", server.root + "/out.bin")
            let intact = Files.read(server.root + "/out.bin") == Files.read(file)
            #expect(intact)
            let verified = try await maintenance.verify()
            #expect(verified.ok, "\(verified.problems)")
            #expect(verified.versionsChecked == 1)
        }
    }

    @Test func aChunkUploadedAgainDuringTheSweepSurvives() async throws {
        try await LiveServer.run { server in
            let store = server.data.chunks
            let metadata = server.data.metadata
            let plain = Files.random(count: 50_000, seed: 9)
            let chunk = try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain), policy: .default) }
            // A stored chunk no one holds: what a sweep removes.
            #expect(try await store.store([chunk]).allSatisfy { $0 == nil })
            let future = { Int64(Date().timeIntervalSince1970 + 5) * 1_000_000_000 }
            // The sweep asks "held?" at its last moment; an upload of the same chunk lands just
            // before and records it. The chunk must stay.
            let removed = try await store.sweep(
                [chunk.id], modifiedBefore: future(),
                begin: { ids in
                    _ = try await server.remote.connection.upload([chunk])
                    return try await metadata.beginDeletion(ids)
                },
                end: { try await metadata.endDeletion($0) })
            #expect(removed.count == 0)
            #expect(try await store.load(chunk.id) == chunk)
            // Without the upload the same sweep removes one no one holds.
            let other = Files.random(count: 50_000, seed: 10)
            let orphan = try other.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(other), policy: .default) }
            #expect(try await store.store([orphan]).allSatisfy { $0 == nil })
            let swept = try await store.sweep(
                [orphan.id], modifiedBefore: future(),
                begin: { try await metadata.beginDeletion($0) }, end: { try await metadata.endDeletion($0) })
            #expect(swept.count == 1)
            await #expect(throws: XferError.self) { _ = try await store.load(orphan.id) }
            #expect(try await store.load(chunk.id) == chunk, "the held chunk shares nothing with the swept one")
        }
    }

    /// The guard object stores need (they cannot rename): an upload that started before a
    /// deletion finished, or while it runs, does not record the chunk, so the account never
    /// holds a chunk whose stored copy is gone; the client's commit finds it missing and the
    /// upload after that is recorded. Works the same on every metadata backend.
    @Test func uploadsRacingADeletionAreNotRecorded() async throws {
        try await LiveServer.run { server in
            let metadata = server.data.metadata
            let account = try await metadata.principal(tokenHash: TokenHash.hash(server.token))!.accountID
            let plain = Files.random(count: 30_000, seed: 12)
            let id = ChunkID.of(plain)
            let chunk = [OwnedChunk(id: id, length: plain.count)]
            let before = try await metadata.clock()
            #expect(try await metadata.beginDeletion([id]) == [id], "no one holds it: marked")
            #expect(
                try await metadata.addChunks(account: account, chunk, uploadStartedAt: try await metadata.clock()).count
                    == 0,
                "refused while the deletion runs")
            try await metadata.endDeletion([id])
            #expect(
                try await metadata.addChunks(account: account, chunk, uploadStartedAt: before).count == 0,
                "refused: the upload began before the deletion finished")
            let after = try await metadata.clock()
            #expect(
                try await metadata.addChunks(account: account, chunk, uploadStartedAt: after).count == 1,
                "recorded: it began after")
            #expect(try await metadata.beginDeletion([id]).isEmpty, "held now: not marked")
            try await metadata.forgetDeletions(before: Int64.max)
        }
    }

    @Test(LiveServer.plainOnly("counts plain chunks' stored bytes")) func verifyFindsCorruptAndMissingChunks()
        async throws
    {
        try await LiveServer.run { server in
            let file = server.root + "/doc.bin"
            try Files.write(file, Files.random(count: 400_000, seed: 4))
            _ = try await server.push(file, "doc")
            let maintenance = Maintenance(data: server.data)
            let clean = try await maintenance.verify()
            #expect(clean.ok)
            #expect(clean.chunksChecked > 1)
            #expect(clean.bytesChecked == 400_000)
            let store = server.data.chunks as! PackedChunkStore
            let ids = try await Self.storedChunks(server).sorted { $0.hex < $1.hex }
            // Flip the last payload byte of one chunk in its pack (rewritten whole, as a
            // damaged disk or bucket would hand it back); lose another's location.
            let damaged = try await store.index.locations([ids[0]])[0]
            var bytes = try #require(try await store.storage.get(damaged.pack, limit: 64 << 20))
            bytes[Int(damaged.offset) + damaged.length - 1] ^= 0x40
            try await store.storage.put(damaged.pack, bytes)
            _ = try await store.index.removeLocations([ids[1]])
            let report = try await maintenance.verify()
            #expect(!report.ok)
            #expect(report.problems.contains { $0.contains(ids[0].hex) && $0.contains("corrupt") })
            #expect(report.problems.contains { $0.contains(ids[1].hex) && $0.contains("missing") })
            // Through the admin route the answer is the same.
            let admin = try String(contentsOfFile: server.data.adminTokenPath, encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let connection = ServerConnection(server: server.remote.connection.server, token: admin)
            let remote = try await connection.verifyServer()
            await connection.shutdown()
            #expect(remote.problemCount == report.problemCount)
            // An account's token may not.
            await #expect(throws: XferError.self) { _ = try await server.remote.connection.verifyServer() }
        }
    }

    @Test func localVerifyReadsEveryUnchangedFile() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/synced"
            try Files.write(directory + "/a.txt", Array("alpha".utf8))
            try Files.write(directory + "/b.bin", Files.random(count: 200_000, seed: 5))
            let engine = try SyncEngine(directory: directory, remote: server.remote)
            _ = try await engine.syncOnce()
            var report = try LocalVerifier.verify(directory: directory, stateDirectory: server.stateDirectory)
            #expect(report.ok)
            #expect(report.filesChecked == 2)
            #expect(report.bytesChecked == 200_005)
            // An edit is not damage.
            try Files.write(directory + "/a.txt", Array("alphabet".utf8))
            // Damage the file system did not report: the bytes change while the file still
            // looks as recorded (here: change a byte, then record the new stamp with the old chunks).
            let path = directory + "/b.bin"
            let fd = open(path, O_WRONLY)
            var byte: UInt8 = 0xff
            _ = pwrite(fd, &byte, 1, 1000)
            close(fd)
            let state = try SyncState(directory: directory, stateDirectory: server.stateDirectory).clientState(
                for: try DocumentPath("b.bin"))
            var known = try state.files()[""]!
            known.stamp = FileStamp.of(path)!
            try state.record(files: [known])
            report = try LocalVerifier.verify(directory: directory, stateDirectory: server.stateDirectory)
            #expect(report.modified == ["a.txt"])
            #expect(report.damaged == ["b.bin"])
            #expect(!report.ok)
            try FileManager.default.removeItem(atPath: directory + "/a.txt")
            report = try LocalVerifier.verify(directory: directory, stateDirectory: server.stateDirectory)
            #expect(report.missing == ["a.txt"])
            #expect(!report.ok)
        }
    }

    @Test func revokedTokensAreRefusedAtOnce() async throws {
        try await LiveServer.run { server in
            let admin = try String(contentsOfFile: server.data.adminTokenPath, encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let adminConnection = ServerConnection(server: server.remote.connection.server, token: admin)
            defer { Task { await adminConnection.shutdown() } }
            let second = try await adminConnection.newToken(account: "tester")
            let other = ServerConnection(server: server.remote.connection.server, token: second.token)
            #expect(try await other.account().name == "tester")
            #expect(
                try await adminConnection.revokeToken(RevokeTokenRequest(token: second.token, account: nil)).revoked
                    == 1)
            await #expect(throws: XferError.self) { _ = try await other.account() }
            await other.shutdown()
            // The first token still works; revoking the account's tokens ends it too.
            #expect(try await server.remote.connection.account().name == "tester")
            #expect(
                try await adminConnection.revokeToken(RevokeTokenRequest(token: nil, account: "tester")).revoked == 1)
            do {
                _ = try await server.remote.connection.account()
                Issue.record("a revoked token was accepted")
            } catch let error as XferError {
                #expect(error.code == .unauthorized)
            }
            // The last admin token cannot be revoked (the server would be unmanageable).
            await #expect(throws: XferError.self) {
                _ = try await adminConnection.revokeToken(RevokeTokenRequest(token: admin, account: nil))
            }
            // Tokens are stored hashed: the database never holds the token's text.
            if server.data.metadata is SQLiteMetadataStore {
                let database = try Data(contentsOf: URL(fileURLWithPath: server.data.directory + "/metadata.sqlite"))
                #expect(database.range(of: Data(admin.utf8)) == nil)
            }
        }
    }

    @Test func pullDropsSetuidAndNeverWritesThroughASymlink() async throws {
        try await LiveServer.run { server in
            let package = server.root + "/app.pkg"
            try Files.write(package + "/bin/tool", Array("#!/bin/sh\n".utf8), mode: 0o6755)
            try Files.write(package + "/data/x", Array("inside".utf8))
            _ = try await server.push(package, "app.pkg")
            // A staging copy left by an interrupted pull, tampered with: its "data" is a
            // symlink to a directory outside the destination.
            let destination = server.root + "/out/app.pkg"
            let outside = server.root + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            let version = try await server.client().stat("app.pkg").version
            let staging = server.root + "/out/.app.pkg.xfer-\(version).partial"
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
            #expect(symlink(outside, staging + "/data") == 0)
            _ = try await server.pull("app.pkg", destination)
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
            #expect(Files.read(destination + "/data/x") == Array("inside".utf8))
            var info = stat()
            stat(destination + "/bin/tool", &info)
            #expect(info.st_mode & 0o7777 == 0o755)
        }
    }
}
