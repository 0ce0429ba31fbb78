import Foundation
import HTTPTypes
import Hummingbird
import Testing
import XferClient
import XferCore
import XferProtocol

/// Many small documents go in batches. Up: one hashing run, one question about missing chunks,
/// shared upload bodies and one batch commit (`POST …/commits`). Down: one manifest request
/// (`POST …/manifests`) and shared chunk downloads. Each document still succeeds or fails on
/// its own, with the single transfer's rules. Runs on every backend (tools/suites/backend-tests.sh).
@Suite struct BatchTests {
    /// A one-file manifest for `bytes` and the chunk that holds them.
    static func document(_ bytes: [UInt8], mtime: Int64 = 1_700_000_000_000_000_000) throws -> (
        manifest: Manifest, chunk: EncodedChunk
    ) {
        let id = ChunkID.of(bytes)
        let manifest = try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: mtime,
                    chunks: [Manifest.ChunkReference(id: id, length: bytes.count)])
            ])
        return (manifest, EncodedChunk(id: id, length: bytes.count, encoding: .raw, payload: bytes))
    }

    static func commit(
        _ path: String, _ manifest: Manifest, base: Int64? = nil, mtime: Int64 = 1_700_000_000_000_000_000
    ) throws -> DirectCommit {
        DirectCommit(
            announce: AnnounceRequest(
                path: try DocumentPath(path), kind: .file, size: manifest.totalSize, mtimeNs: mtime,
                mode: 0o644, baseVersion: base),
            manifest: manifest.encoded(), manifestDigest: manifest.digest)
    }

    @Test(LiveServer.plainOnly("commits plain manifests through the protocol"))
    func eachDocumentOfABatchCommitSucceedsOrFailsAlone() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            let good = try Self.document(Array("good".utf8))
            let lacking = try Self.document(Array("never uploaded".utf8))
            let nested = try Self.document(Array("under a file".utf8))
            _ = try await connection.upload([good.chunk, nested.chunk])
            var badDigest = try Self.commit("Documents/bad-digest.txt", good.manifest)
            badDigest.manifestDigest = String(repeating: "0", count: 64)
            let outcomes = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/good.txt", good.manifest),
                    try Self.commit("Documents/lacking.txt", lacking.manifest),
                    badDigest,
                    try Self.commit("Documents/good.txt/inside.txt", nested.manifest),
                    try Self.commit("Documents/second.txt", good.manifest)
                ]))
            #expect(outcomes.count == 5)
            #expect(outcomes[0].document?.state == .current && outcomes[0].document?.version == 1)
            #expect(outcomes[1].error?.code == "missing_chunks" && outcomes[1].error?.missing == [lacking.chunk.id.hex])
            #expect(outcomes[2].error?.code == "invalid_manifest")
            #expect(
                outcomes[3].error?.code == "conflict", "a document inside another is refused, as a single commit is")
            #expect(outcomes[4].document?.state == .current)
            // The failed ones left no trace: no document, no pending version.
            let listed = try await server.client().list().documents.map(\.path.value)
            #expect(listed == ["Documents/good.txt", "Documents/second.txt"])
            let feed = try await connection.changes(container: .default, after: 0)
            #expect(Set(feed.changes.map(\.path.value)) == ["Documents/good.txt", "Documents/second.txt"])
        }
    }

    @Test func aBatchIsRefusedWholeWhenItBreaksTheProtocolsLimits() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            let one = try Self.document(Array("x".utf8))
            _ = try await connection.upload([one.chunk])
            await #expect {
                _ = try await connection.commit(
                    container: .default,
                    batch: BatchCommitRequest(documents: [
                        try Self.commit("Documents/twice.txt", one.manifest),
                        try Self.commit("Documents/twice.txt", one.manifest)
                    ]))
            } throws: { ($0 as? XferError)?.code == .badRequest }
            let many = try (0...ProtocolLimits.maximumBatchDocuments).map {
                try Self.commit("Documents/f\($0).txt", one.manifest)
            }
            await #expect {
                _ = try await connection.commit(container: .default, batch: BatchCommitRequest(documents: many))
            } throws: { ($0 as? XferError)?.code == .tooLarge }
            #expect(try await server.client().list().documents.isEmpty)
        }
    }

    /// A batch commit's document may name the version it must become (what an end-to-end
    /// encrypted manifest, sealed to its version, needs): another is refused and leaves nothing.
    @Test(LiveServer.plainOnly("commits plain manifests through the protocol"))
    func aBatchCommitNamingAnotherVersionIsRefused() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            #expect(await connection.features().contains(.batchCommitVersions))
            let good = try Self.document(Array("good".utf8))
            _ = try await connection.upload([good.chunk])
            var wrong = try Self.commit("Documents/a.txt", good.manifest)
            wrong.version = 2
            var right = try Self.commit("Documents/b.txt", good.manifest)
            right.version = 1
            let outcomes = try await connection.commit(
                container: .default, batch: BatchCommitRequest(documents: [wrong, right]))
            #expect(
                outcomes[0].error?.code == "conflict"
                    && outcomes[0].error?.message.contains("would be version 1, not 2") == true)
            #expect(outcomes[1].document?.version == 1 && outcomes[1].document?.state == .current)
            // The refused one took no version: its next is still 1.
            right.path = try DocumentPath("Documents/a.txt")
            let again = try await connection.commit(container: .default, batch: BatchCommitRequest(documents: [right]))
            #expect(again[0].document?.version == 1, "\(again)")
            #expect(
                try await server.client().list().documents.map(\.path.value) == ["Documents/a.txt", "Documents/b.txt"])
        }
    }

    @Test(LiveServer.plainOnly("commits plain manifests through the protocol"))
    func aStaleBaseInABatchIsKeptAsAConflictAndTheLaterEditWins() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            let first = try Self.document(Array("first".utf8))
            let edit = try Self.document(Array("edit".utf8))
            let other = try Self.document(Array("other device".utf8))
            _ = try await connection.upload([first.chunk, edit.chunk, other.chunk])
            let made = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/a.txt", first.manifest, mtime: 1)
                ]))
            #expect(made[0].document?.version == 1)
            _ = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/a.txt", edit.manifest, base: 1, mtime: 3)
                ]))
            // Another device edited version 1 too, earlier: kept, as a conflict.
            let late = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/a.txt", other.manifest, base: 1, mtime: 2)
                ]))
            #expect(late[0].document?.state == .conflict)
            let info = try await server.client().stat("Documents/a.txt")
            #expect(info.version == 2 && info.conflicts == [3])
        }
    }

    @Test func aSyncPassPushesManySmallFilesInBatchesAndAnotherDeviceGetsThemAll() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<700 {
                try Files.write(
                    a + "/Documents/d\(index / 100)/f\(index).txt",
                    Files.random(count: 50 + index, seed: UInt64(index)),
                    mode: index % 7 == 0 ? 0o600 : 0o644)
            }
            // Two files with the same bytes share a chunk; a symlink goes in a batch too.
            try Files.write(a + "/Documents/same-1.txt", Array("same".utf8))
            try Files.write(a + "/Documents/same-2.txt", Array("same".utf8))
            try FileManager.default.createSymbolicLink(atPath: a + "/Documents/link", withDestinationPath: "d0/f1.txt")
            // One large file goes alone, announced first.
            try Files.write(a + "/Documents/large.bin", Files.random(count: 5 << 20, seed: 99))
            let engineA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            let first = try await engineA.syncOnce()
            #expect(first.uploaded == 704 && first.failed == 0 && first.retried == 0, "\(first)")
            // Nothing changed: nothing is sent again.
            let again = try await engineA.syncOnce()
            #expect(again.uploaded == 0 && again.failed == 0, "\(again)")
            // An edit of two small files goes in one small batch.
            try Files.write(a + "/Documents/d3/f300.txt", Array("edited".utf8))
            try Files.write(a + "/Documents/d5/f512.txt", Array("edited too".utf8))
            let edit = try await engineA.syncOnce()
            #expect(edit.uploaded == 2 && edit.failed == 0, "\(edit)")
            #expect(try await server.client().stat("Documents/d3/f300.txt").version == 2)

            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let engineB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            let pulled = try await engineB.syncOnce()
            #expect(pulled.downloaded == 704 && pulled.failed == 0, "\(pulled)")
            // Every file and link arrived with its bytes, mode and time (directories' times are the puller's).
            // (The folder's marker, .xfer-folder, is each device's own.)
            func synced(_ root: String) throws -> [String: String] {
                try Files.snapshot(root).filter { !$0.value.hasPrefix("directory") && $0.key.hasPrefix("Documents/") }
            }
            let (left, right) = (try synced(a), try synced(b))
            #expect(left.count == 704)
            #expect(
                left == right,
                "differ: \(Array(Set(left.keys).symmetricDifference(right.keys)).prefix(5)) \(left.keys.filter { right[$0] != left[$0] }.prefix(5))"
            )
        }
    }

    @Test func aBatchPushCountsEachDocumentsOwnBytesAndSkipsWhatItCannotRead() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/files"
            var items: [PushItem] = []
            for index in 0..<5 {
                let path = directory + "/f\(index).txt"
                try Files.write(path, Files.random(count: 1000, seed: UInt64(index)))
                items.append(
                    PushItem(
                        path: path, name: try DocumentPath("Documents/f\(index).txt"),
                        state: try ClientState(root: path, stateDirectory: server.stateDirectory)))
            }
            let gone = directory + "/gone.txt"
            items.append(
                PushItem(
                    path: gone, name: try DocumentPath("Documents/gone.txt"),
                    state: try ClientState(root: gone, stateDirectory: server.stateDirectory)))
            let engine = PushEngine(remote: server.remote)
            let results = try await engine.pushMany(items)
            for result in results.prefix(5) {
                let report = try result.get()
                #expect(report.committed && report.chunksSent == 1 && report.bytesReused == 0, "\(report)")
            }
            #expect(throws: XferError.self) { try results[5].get() }
            if case .failure(let error as XferError) = results[5] { #expect(error.isVanished) }
            // Pushed again unchanged: no version is made.
            let again = try await engine.pushMany(Array(items.prefix(5)))
            #expect(again.allSatisfy { (try? $0.get().committed) == false })
            #expect(try await server.client().list().documents.count == 5)
        }
    }

    @Test(LiveServer.plainOnly("commits plain manifests through the protocol"))
    func manifestsOfManyDocumentsComeInOneAnswerEachOnItsOwn() async throws {
        try await LiveServer.run { server in
            let connection = server.remote.connection
            let one = try Self.document(Array("one".utf8))
            let two = try Self.document(Array("two".utf8))
            _ = try await connection.upload([one.chunk, two.chunk])
            _ = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/a.txt", one.manifest),
                    try Self.commit("Documents/gone.txt", one.manifest)
                ]))
            _ = try await connection.commit(
                container: .default,
                batch: BatchCommitRequest(documents: [
                    try Self.commit("Documents/a.txt", two.manifest, base: 1)
                ]))
            _ = try await server.client().delete("Documents/gone.txt")
            let items = try await connection.manifests(
                container: .default,
                [
                    .init(path: try DocumentPath("Documents/a.txt")),
                    .init(path: try DocumentPath("Documents/a.txt"), version: 1),
                    .init(path: try DocumentPath("Documents/gone.txt")),
                    .init(path: try DocumentPath("Documents/never.txt"))
                ])
            #expect(
                items[0].document?.version == 2
                    && items[0].manifest.map { try? Base64.decode($0) } == two.manifest.encoded())
            #expect(
                items[1].document?.version == 1
                    && items[1].manifest.map { try? Base64.decode($0) } == one.manifest.encoded())
            #expect(items[2].error?.code == "not_found" && items[2].manifest == nil)
            #expect(items[3].error?.code == "not_found")
            let tooMany = try (0...ProtocolLimits.maximumBatchDocuments).map {
                ManifestBatchRequest.Wanted(path: try DocumentPath("Documents/f\($0)"))
            }
            await #expect { _ = try await connection.manifests(container: .default, tooMany) } throws: {
                ($0 as? XferError)?.code == .tooLarge
            }
        }
    }

    /// A server without the batch routes (an older one) answers "no such route": each document
    /// then goes alone, and nothing is lost or failed.
    @Test func aServerWithoutBatchRoutesIsSyncedOneDocumentAtATime() async throws {
        let refused = Locked(0)
        try await LiveServer.run(intercept: { request in
            guard request.method == .post,
                request.uri.path.hasSuffix("/commits") || request.uri.path.hasSuffix("/manifests")
            else { return nil }
            refused.withLock { $0 += 1 }
            return Response(
                status: .notFound, headers: [.contentType: "application/json"],
                body: ResponseBody(
                    byteBuffer: ByteBuffer(
                        bytes: WireJSON.encode(ErrorBody(code: "not_found", message: "no such route")))))
        }) { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<20 { try Files.write(a + "/Documents/f\(index).txt", Array("file \(index)".utf8)) }
            let pushed = try await SyncEngine(directory: a, remote: server.otherDevice("a")).syncOnce()
            #expect(pushed.uploaded == 20 && pushed.failed == 0, "\(pushed)")
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let pulled = try await SyncEngine(directory: b, remote: server.otherDevice("b")).syncOnce()
            #expect(pulled.downloaded == 20 && pulled.failed == 0, "\(pulled)")
            #expect(Files.read(b + "/Documents/f7.txt") == Array("file 7".utf8))
            #expect(refused.value >= 2)
        }
    }

    /// Pulled in a batch, a document edited here since it was synced is still never replaced:
    /// the remote edit waits as a conflict, as with a single pull.
    @Test func aBatchedPullNeverReplacesALocalEdit() async throws {
        try await LiveServer.run { server in
            let a = server.root + "/a"
            let b = server.root + "/b"
            for index in 0..<10 { try Files.write(a + "/Documents/f\(index).txt", Array("first \(index)".utf8)) }
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            _ = try await deviceA.syncOnce()
            try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            #expect(try await deviceB.syncOnce().downloaded == 10)
            for index in 0..<10 { try Files.write(a + "/Documents/f\(index).txt", Array("second \(index)".utf8)) }
            #expect(try await deviceA.syncOnce().uploaded == 10)
            // B edits f3 meanwhile: its pass pushes that edit first (kept as a conflict version or
            // winning), and never overwrites the bytes written here without keeping them.
            try Files.write(b + "/Documents/f3.txt", Array("edited on b".utf8))
            let pass = try await deviceB.syncOnce()
            #expect(pass.failed == 0, "\(pass)")
            for index in [0, 1, 2, 4, 9] {
                #expect(Files.read(b + "/Documents/f\(index).txt") == Array("second \(index)".utf8))
            }
            let versions = try await server.client().versions("Documents/f3.txt")
            var kept = false
            for version in versions where version.state != .deleted {
                let destination = server.root + "/check-\(version.version)"
                _ = try await server.client().pull("Documents/f3.txt", into: destination, version: version.version)
                if Files.read(destination) == Array("edited on b".utf8) { kept = true }
            }
            #expect(kept, "the local edit is on the server as a version")
        }
    }
}
