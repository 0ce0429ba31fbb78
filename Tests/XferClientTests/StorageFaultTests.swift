import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

@testable import XferServer

#if canImport(Glibc)
    import Glibc
#endif

/// Storage faults at the seam (``StorageFaults`` for chunk writes, a page cap for SQLite):
/// every one is a clear error, leaves nothing half-visible, and a retry converges.
/// Serialized: the fault seam is process-wide.
@Suite(.serialized) struct StorageFaultTests {
    /// Each fault, scoped to one server's pack directory (other suites run at the same time).
    static let faults: [(name: String, fault: @Sendable (String) -> StorageFaults.Fault)] = [
        ("ENOSPC on write", { .init(.write, .fail(ENOSPC), pathContains: $0 + "/data/packs/") }),
        ("EIO on write", { .init(.write, .fail(EIO), pathContains: $0 + "/data/packs/") }),
        (
            "short write then ENOSPC",
            { .init(.write, .shortWrite(1000, then: ENOSPC), pathContains: $0 + "/data/packs/") }
        ),
        ("EIO on rename", { .init(.rename, .fail(EIO), pathContains: $0 + "/data/packs/") }),
        ("EIO on a pack's fdatasync", { .init(.fsync, .fail(EIO), pathContains: $0 + "/data/packs/") })
    ]

    @Test(.enabled(if: Backends.environment["XFER_S3_ENDPOINT"] == nil), arguments: 0..<5)
    func chunkWriteFaultsFailCleanlyAndARetryConverges(_ index: Int) async throws {
        let (name, fault) = Self.faults[index]
        try await LiveServer.run { server in
            let file = server.root + "/doc.bin"
            try Files.write(file, Files.random(count: 300_000, seed: UInt64(index + 20)))
            let before = try await server.remote.connection.account().used
            StorageFaults.arm(fault(server.root))
            do {
                _ = try await server.push(file, "doc")
                Issue.record("\(name): the push succeeded through a storage fault")
            } catch let error as XferError {
                // A full disk is its own code (507), never found by reading a message.
                #expect(
                    name.contains("ENOSPC")
                        ? error.code == .storageFull : (error.code == .io || error.code == .internal),
                    "\(name): \(error)")
                let expected = name.contains("ENOSPC") ? "storage is full" : "could not read or write its storage"
                #expect(error.message.contains(expected), "\(name): \(error.message)")
            }
            StorageFaults.disarm(pathContains: server.root)
            // Nothing recorded, nothing visible: no quota use, no committed version, no temporary files.
            #expect(try await server.remote.connection.account().used == before, "\(name)")
            let info = try? await server.client().stat("doc")
            #expect(info == nil || info?.state == .uploading, "\(name)")
            // Every chunk the store names is whole.
            let store = server.data.chunks
            for shard in UInt8.min...UInt8.max {
                for chunk in try await store.list(shard: shard) { _ = try await store.verify(chunk.id) }
            }
            // The retry converges to the exact bytes.
            _ = try await server.push(file, "doc")
            _ = try await server.pull("doc", server.root + "/copy.bin")
            let same = Files.read(server.root + "/copy.bin") == Files.read(file)
            #expect(same, "\(name)")
            #expect(try await Maintenance(data: server.data).verify().ok, "\(name)")
        }
    }

    /// SQLite's page cap is the seam; PostgreSQL has none (its disk-full code, 53100, maps to the same message).
    @Test(.enabled(if: Backends.environment["XFER_POSTGRES_URL"] == nil))
    func aFullMetadataDiskRefusesTheCommitAndChangesNothing() async throws {
        try await LiveServer.run { server in
            let file = server.root + "/doc.bin"
            try Files.write(file, Files.random(count: 200_000, seed: 30))
            _ = try await server.push(file, "doc")
            let committed = try await server.client().stat("doc")
            let metadata = server.data.metadata as! SQLiteMetadataStore
            try await metadata.limitGrowth(extraPages: 0)
            // Many new documents until the database needs a page it may not have.
            var failure: XferError? = nil
            for index in 0..<200 where failure == nil {
                let other = server.root + "/d\(index).bin"
                try Files.write(other, Files.random(count: 2_000, seed: UInt64(100 + index)))
                do {
                    _ = try await server.push(other, "d\(index)")
                } catch let error as XferError {
                    failure = error
                }
            }
            try await metadata.limitGrowth(extraPages: nil)
            let error = try #require(failure)
            #expect(error.code == .storageFull && error.message.contains("storage is full"), "\(error)")
            // What was committed stays as it was, and the store is consistent.
            let after = try await server.client().stat("doc")
            #expect(after.version == committed.version && after.manifestDigest == committed.manifestDigest)
            let report = try await Maintenance(data: server.data).verify()
            #expect(report.ok, "\(report.problems)")
            // With space again the same push goes through.
            _ = try await server.push(server.root + "/d0.bin", "d0")
        }
    }

    /// The client's side of the seam (``Syscall``): each write-side call of a pull, faulted where
    /// it builds the new version, fails the pull with a clear error and publishes nothing; the
    /// copy in place stays the old version, and the next pull completes.
    static let pullFaults: [(name: String, fault: @Sendable (String) -> StorageFaults.Fault, code: XferError.Code)] = [
        (
            "ENOSPC writing the staging copy",
            { .init(.write, .fail(ENOSPC), pathContains: $0 + "/out/.doc.bin.xfer-") }, .storageFull
        ),
        (
            "a short write, then ENOSPC",
            { .init(.write, .shortWrite(4096, then: ENOSPC), pathContains: $0 + "/out/.doc.bin.xfer-") }, .storageFull
        ),
        (
            "EIO on fsync of the staging copy", { .init(.fsync, .fail(EIO), pathContains: $0 + "/out/.doc.bin.xfer-") },
            .io
        ),
        ("EIO renaming it into place", { .init(.rename, .fail(EIO), pathContains: $0 + "/out/doc.bin") }, .io),
        (
            "ENOSPC keeping the old copy in the trash",
            { .init(.link, .fail(ENOSPC), pathContains: $0 + "/a/.xfer-trash/") }, .storageFull
        )
    ]

    @Test(arguments: 0..<5)
    func pullWriteFaultsPublishNothingAndTheNextPullCompletes(_ index: Int) async throws {
        let (name, fault, code) = Self.pullFaults[index]
        try await LiveServer.run { server in
            let source = server.root + "/doc.bin"
            let target = server.root + "/out/doc.bin"
            let first = Files.random(count: 200_000, seed: 1)
            let second = Files.random(count: 300_000, seed: 2)
            try Files.write(source, first)
            _ = try await server.push(source, "doc.bin")
            if name.contains("trash") {
                // A synced folder keeps what a pull replaces in its trash (a hard link).
                let a = try SyncTests.Device(server, "a")
                _ = try await a.engine.syncOnce()
                try Files.write(source, second)
                _ = try await server.push(source, "doc.bin")
                StorageFaults.arm(fault(server.root))
                let pass = try await a.engine.syncOnce()
                StorageFaults.disarm(pathContains: server.root)
                #expect(pass.failed == 1 && pass.downloaded == 0, "\(name): \(pass)")
                #expect(Files.read(a.path("doc.bin")) == first, "\(name): the old version stays in place")
                #expect(try await a.engine.syncOnce().downloaded == 1)
                #expect(Files.read(a.path("doc.bin")) == second)
                return
            }
            _ = try await server.pull("doc.bin", target)
            try Files.write(source, second)
            _ = try await server.push(source, "doc.bin")
            StorageFaults.arm(fault(server.root))
            do {
                _ = try await server.pull("doc.bin", target)
                Issue.record("\(name): the pull succeeded through a fault")
            } catch let error as XferError {
                #expect(error.code == code, "\(name): \(error)")
            }
            StorageFaults.disarm(pathContains: server.root)
            #expect(Files.read(target) == first, "\(name): the old version stays in place, whole")
            _ = try await server.pull("doc.bin", target)
            #expect(Files.read(target) == second)
            let names = try FileManager.default.contentsOfDirectory(atPath: server.root + "/out")
            #expect(names == ["doc.bin"], "\(name): nothing left beside it: \(names)")
        }
    }

    /// A package of many files is made durable by one syncfs of its staging copy's file
    /// system, not an fsync per file: that call failing fails the pull the same way, with
    /// nothing published, and the per-file fsyncs are not made. The writebacks started on the
    /// way (``EarlyWriteback``: the package is 5 MiB, past its 2 MiB) change none of that.
    @Test func aFailedSyncOfAManyFilePackagePublishesNothing() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/pkg"
            let target = server.root + "/out/pkg"
            for index in 0..<80 {
                try Files.write(
                    source + "/d\(index % 4)/f\(index).txt",
                    Array("file \(index)\n".utf8) + Files.random(count: 64 << 10, seed: UInt64(index)))
            }
            _ = try await server.push(source, "pkg")
            let fsynced = Locked<[String]>([])
            StorageFaults.observe { operation, path in
                if operation == .fsync, path.hasPrefix(server.root + "/out") { fsynced.withLock { $0.append(path) } }
            }
            defer { StorageFaults.observe(nil) }
            StorageFaults.arm(.init(.fsync, .fail(EIO), pathContains: server.root + "/out/.pkg.xfer-"))
            do {
                _ = try await server.pull("pkg", target)
                Issue.record("the pull succeeded through a failed syncfs")
            } catch let error as XferError {
                #expect(error.code == .io, "\(error)")
            }
            StorageFaults.disarm(pathContains: server.root)
            #expect(!FileManager.default.fileExists(atPath: target), "nothing is published")
            // One flush for the staging copy, not one per file (80) and directory.
            #expect(fsynced.value.count == 1, "\(fsynced.value)")
            _ = try await server.pull("pkg", target)
            #expect(try Files.snapshot(target) == Files.snapshot(source))
        }
    }

    /// The client's blocking work (every write, fsync, rename, link and mkdir of a pull and
    /// of a sync pass) runs on ``ClientThreads``, never on the caller's or the cooperative
    /// pool's threads.
    @Test func clientStorageWorkRunsOnTheClientThreads() async throws {
        try await LiveServer.run { server in
            try Files.write(server.root + "/doc.pkg/a.bin", Files.random(count: 300_000, seed: 5))
            try Files.write(server.root + "/doc.pkg/sub/b.bin", Files.random(count: 50_000, seed: 6))
            _ = try await server.push(server.root + "/doc.pkg", "Documents/doc.pkg")
            let device = try SyncTests.Device(server, "device")
            let seen = Locked<[(StorageFaults.Operation, String, Bool)]>([])
            StorageFaults.observe { operation, path in
                guard path.hasPrefix(server.root + "/out") || path.hasPrefix(device.directory) else { return }
                seen.withLock { $0.append((operation, path, ClientThreads.isCurrent)) }
            }
            defer { StorageFaults.observe(nil) }
            #expect(!ClientThreads.isCurrent)
            _ = try await server.pull("Documents/doc.pkg", server.root + "/out/doc.pkg")
            #expect(try await device.engine.syncOnce().downloaded == 1)
            #expect(
                Files.read(device.path("Documents/doc.pkg/sub/b.bin")) == Files.read(server.root + "/doc.pkg/sub/b.bin")
            )
            let calls = seen.value
            for operation in [StorageFaults.Operation.write, .fsync, .rename, .mkdir] {
                #expect(
                    calls.contains { $0.0 == operation && $0.1.hasPrefix(server.root + "/out") },
                    "the pull made no \(operation) call")
                #expect(
                    calls.contains { $0.0 == operation && $0.1.hasPrefix(device.directory) },
                    "the sync pass made no \(operation) call")
            }
            let elsewhere = calls.filter { !$0.2 }
            #expect(elsewhere.isEmpty, "storage calls off the client's threads: \(elsewhere.prefix(5))")
        }
    }
}
