import Testing
import XferCore
import XferProtocol
@testable import XferClient

/// The pure half of a push: what it is based on, whether it does anything, what it reads and
/// what it sends, decided without a disk or a server.
@Suite struct PushDecisionsTests {
    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        Manifest.ChunkReference(id: ChunkID.of([byte]), length: length)
    }

    static func synced(_ version: Int64, _ chunks: [Manifest.ChunkReference]) throws -> SyncedDocument {
        SyncedDocument(version: version, manifest: try Manifest(kind: .file, chunker: .default, entries: [
            Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: chunks),
        ]))
    }

    static func info(_ version: Int64, _ state: VersionState) throws -> DocumentInfo {
        DocumentInfo(path: try DocumentPath("d"), version: version, state: state, kind: .file, size: 0, mtimeNs: 0, mode: 0o644,
                     baseVersion: nil, manifestDigest: nil, files: nil, chunks: nil, device: nil, sequence: 1)
    }

    @Test func aForcedPushIsBasedOnWhatIsCurrentOnTheServer() throws {
        #expect(PushDecisions.baseVersion(synced: 3, force: false, serverCurrent: nil) == 3)
        #expect(PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: try Self.info(7, .current)) == 7)
        #expect(PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: try Self.info(7, .deleted)) == nil, "a deleted document is no base")
        #expect(PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: nil) == nil)
    }

    @Test func onlyAnUnchangedUnforcedPushOfTheSyncedVersionDoesNothing() throws {
        let synced = try Self.synced(4, [Self.chunk(1)])
        #expect(PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 4, unchanged: true))
        #expect(!PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 4, unchanged: false))
        #expect(!PushDecisions.isNoOp(force: true, synced: synced, baseVersion: 4, unchanged: true))
        #expect(!PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 5, unchanged: true), "based elsewhere: a new version")
        #expect(!PushDecisions.isNoOp(force: false, synced: nil, baseVersion: nil, unchanged: true))
    }

    @Test func theBaseVersionsChunksAreNeverSentAndTheRestGoOnce() throws {
        let a = Self.chunk(1), b = Self.chunk(2, 20), c = Self.chunk(3, 5)
        let synced = try Self.synced(2, [a])
        #expect(PushDecisions.onServer(baseVersion: 2, synced: synced) == [a.id])
        #expect(PushDecisions.onServer(baseVersion: 3, synced: synced).isEmpty, "another base: nothing is sure")
        // File 0 is [a, b, a, c], file 1 unknown (to be read), file 2 is [b].
        let lists: [[Manifest.ChunkReference]?] = [[a, b, a, c], nil, [b]]
        let (locations, queued) = PushDecisions.initialUpload(lists, path: { "/f\($0)" }, onServer: [a.id])
        #expect(locations.map(\.id) == [b.id, c.id])
        #expect(locations.map(\.file) == ["/f0", "/f0"])
        #expect(locations.map(\.offset) == [10, 40])
        #expect(locations.map(\.length) == [20, 5])
        #expect(queued == [b.id, c.id])
        #expect(PushDecisions.filesToRead(changed: [1], unchanged: [0, 2], chunkLists: [[a], nil, nil]) == [1, 2])
        // The server lacked a chunk it was thought to hold: sent again from where it is.
        let again = PushDecisions.resend([a.id], lists, path: { "/f\($0)" })
        #expect(again.map(\.offset) == [0])
    }
}
