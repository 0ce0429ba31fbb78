import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// The pure half of a batch push: what the server's answers make of each document, what is
/// read and sent first, and what goes again once the commits are answered.
@Suite struct BatchPushDecisionsTests {
    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        PushDecisionsTests.chunk(byte, length)
    }

    static func info(_ version: Int64, _ state: VersionState) throws -> DocumentInfo {
        try PushDecisionsTests.info(version, state)
    }

    @Test func theServersAnswersSortDocumentsIntoHeldLackingAndFailedInOrder() {
        let sorted = BatchPushDecisions.sortByHolds(
            ["a", "b", "c", "d", "e"],
            answers: [
                .success(true), .success(false), .failure(XferError(.io, "the answer")), .success(true), .success(false)
            ])
        #expect(sorted.held == ["a", "d"], "no version for those")
        #expect(sorted.lacking == ["b", "e"], "sent in full, as if new there")
        #expect(sorted.failed.map(\.document) == ["c"])
        #expect((sorted.failed.first?.error as? XferError)?.message == "the answer")
        let none = BatchPushDecisions.sortByHolds([Int](), answers: [])
        #expect(none.held.isEmpty && none.lacking.isEmpty && none.failed.isEmpty)
    }

    @Test func documentsThatMissedChunksGoAgainInOrderWithEveryChunkTheyMissed() throws {
        let a = Self.chunk(1).id
        let b = Self.chunk(2).id
        let c = Self.chunk(3).id
        let missing: [Int: Result<DocumentInfo, XferError>] = [
            0: .success(try Self.info(2, .current)),
            7: .failure(XferError(.missingChunks, "lacks two", cause: MissingChunksDetail(ids: [a, b]))),
            3: .failure(XferError(.missingChunks, "lacks two", cause: MissingChunksDetail(ids: [b, c]))),
            5: .failure(XferError(.conflict, "stale base")),
            6: .failure(XferError(.missingChunks, "no detail"))
        ]
        let again = BatchPushDecisions.missingChunks(missing)
        #expect(again.documents == [3, 6, 7], "by document number, whatever the answers' order")
        #expect(again.chunks == [a, b, c])
        let none = BatchPushDecisions.missingChunks([
            1: .success(try Self.info(1, .current)), 2: .failure(XferError(.conflict, "x"))
        ])
        #expect(none.documents.isEmpty && none.chunks.isEmpty)
    }

    @Test func aSealedCommitMadeCurrentIsSeenAndOneRefusedAsAConflictGoesAlone() throws {
        let outcomes: [Int: Result<DocumentInfo, XferError>] = [
            0: .success(try Self.info(5, .current)),
            1: .success(try Self.info(3, .conflict)),  // kept as a conflict version: not current
            2: .failure(XferError(.conflict, "version 4 was taken meanwhile")),
            3: .failure(XferError(.quotaExceeded, "full")),
            5: .success(try Self.info(9, .current)),
            6: .failure(XferError(.conflict, "version 2 was taken meanwhile"))
        ]
        let after = BatchPushDecisions.afterSealedCommit([6, 0, 1, 2, 3, 4, 5], outcomes: outcomes)
        #expect(after.current.map(\.document) == [0, 5])
        #expect(after.current.map(\.version) == [5, 9])
        #expect(after.refused == [6, 2], "in the order committed")
        let outside = BatchPushDecisions.afterSealedCommit(
            [0], outcomes: [0: .failure(XferError(.conflict, "x")), 2: .success(try Self.info(1, .current))])
        #expect(outside.current.isEmpty && outside.refused == [0], "only the documents committed count")
    }

    /// Two documents on disk: a package whose file `x` was read before (its chunk list known)
    /// and whose `y` is new, and a file `b` read before. The known chunks go first, each once
    /// across the batch and never one of a basis; `y` is the one file read.
    @Test func aBatchReadsOnlyUnknownFilesAndSendsEachKnownChunkOnceAcrossItsDocuments() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-batch-plan-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: root + "/a", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(FileManager.default.createFile(atPath: root + "/a/x", contents: Data(repeating: 1, count: 30)))
        #expect(FileManager.default.createFile(atPath: root + "/a/y", contents: Data(repeating: 2, count: 5)))
        #expect(FileManager.default.createFile(atPath: root + "/b", contents: Data(repeating: 3, count: 20)))
        let c1 = Self.chunk(1)
        let c2 = Self.chunk(2)
        let c3 = Self.chunk(3)
        let cy = Self.chunk(4, 5)

        /// The document at `path` whose files `known` gives a chunk list for (by relative path) were read before.
        func document(_ item: Int, _ path: String, known: (String) -> [Manifest.ChunkReference]?) throws
            -> BatchDocument
        {
            let state = try ClientState(root: path, stateDirectory: root + "/state")
            let first = try LocalSnapshot(path: path, state: state)
            var lists = FileChunkLists(files: first.tree.count)
            var read: [Int] = []
            for index in first.tree.indices where first.tree.kind(at: index) == .file {
                guard let list = known(first.tree.relativePath(at: index)) else { continue }
                lists[index] = list
                read.append(index)
            }
            try state.record(files: PushEngine.knownFiles(first, lists, only: read))
            let snapshot = try LocalSnapshot(path: path, state: state)
            return BatchDocument(
                item: item, snapshot: snapshot, chunkLists: try snapshot.knownChunks(state), synced: nil, basis: nil)
        }
        var package = try document(4, root + "/a") { $0 == "x" ? [c1, c2, c2] : nil }
        let synced = SyncedDocument(
            version: 2,
            manifest: try Manifest(
                kind: .package, chunker: .default,
                entries: [
                    Manifest.Entry(path: "x", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [c1]),
                    Manifest.Entry(path: "y", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [cy])
                ]))
        package.synced = synced
        package.basis = synced
        let file = try document(9, root + "/b") { _ in [c2, c3] }
        let tree = package.snapshot.tree
        #expect(package.snapshot.toHash.map { tree.relativePath(at: $0) } == ["y"] && file.snapshot.toHash.isEmpty)

        let reading = BatchPushDecisions.reading([package, file], sendAgainst: true)
        #expect(
            reading.onServer.contains(c1.id) && !reading.onServer.contains(c2.id),
            "the basis' chunks are never asked about")
        #expect(reading.initial.map(\.id) == [c2.id, c3.id], "c1 is on the server, c2 goes once for both documents")
        #expect(reading.initial.map(\.owner) == [0, 1], "each counted as its document's, by number")
        #expect(reading.initial.map(\.file) == [root + "/a/x", root + "/b"])
        #expect(reading.initial.map(\.offset) == [10, 10])
        #expect(reading.queued.contains(c2.id) && reading.queued.contains(c3.id) && !reading.queued.contains(c1.id))
        #expect(
            reading.files.map(\.document) == [0] && reading.files.map { tree.relativePath(at: $0.entry) } == ["y"],
            "y alone is read")
        #expect(reading.totalBytes == 55)
        #expect(reading.knownBytes == 50, "x and b count as hashed from the start")
        #expect(
            reading.previous.reference(forChunkAt: 0, in: root + "/a/y") == cy.id, "y goes against its synced chunks")

        let plain = BatchPushDecisions.reading([package, file], sendAgainst: false)
        #expect(plain.previous.reference(forChunkAt: 0, in: root + "/a/y") == nil)
        let fresh = BatchPushDecisions.reading([file, package], sendAgainst: false)
        #expect(
            fresh.initial.map(\.id) == [c2.id, c3.id] && fresh.initial.map(\.owner) == [0, 0],
            "the first document to name a chunk sends it")
    }
}
