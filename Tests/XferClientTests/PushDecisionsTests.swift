import Foundation
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
        SyncedDocument(
            version: version,
            manifest: try Manifest(
                kind: .file, chunker: .default,
                entries: [
                    Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: chunks)
                ]))
    }

    static func info(_ version: Int64, _ state: VersionState) throws -> DocumentInfo {
        DocumentInfo(
            path: try DocumentPath("d"), version: version, state: state, kind: .file, size: 0, mtimeNs: 0, mode: 0o644,
            baseVersion: nil, manifestDigest: nil, files: nil, chunks: nil, device: nil, sequence: 1)
    }

    @Test func aForcedPushIsBasedOnWhatIsCurrentOnTheServer() throws {
        #expect(PushDecisions.baseVersion(synced: 3, force: false, serverCurrent: nil) == 3)
        #expect(PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: try Self.info(7, .current)) == 7)
        #expect(
            PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: try Self.info(7, .deleted)) == nil,
            "a deleted document is no base")
        #expect(PushDecisions.baseVersion(synced: 3, force: true, serverCurrent: nil) == nil)
    }

    @Test func onlyAnUnchangedUnforcedPushOfTheSyncedVersionDoesNothing() throws {
        let synced = try Self.synced(4, [Self.chunk(1)])
        #expect(PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 4, unchanged: true))
        #expect(!PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 4, unchanged: false))
        #expect(!PushDecisions.isNoOp(force: true, synced: synced, baseVersion: 4, unchanged: true))
        #expect(
            !PushDecisions.isNoOp(force: false, synced: synced, baseVersion: 5, unchanged: true),
            "based elsewhere: a new version")
        #expect(!PushDecisions.isNoOp(force: false, synced: nil, baseVersion: nil, unchanged: true))
    }

    @Test func aNoOpNeedsTheServerToHoldTheSyncedVersionAsThisRootKnowsIt() throws {
        let synced = try Self.synced(4, [Self.chunk(1)])
        func held(_ version: Int64, _ state: VersionState, digest: String?) throws -> DocumentInfo {
            var info = try Self.info(version, state)
            info.manifestDigest = digest
            return info
        }
        let digest = synced.manifest.digest.hex
        #expect(synced.isHeld(by: try held(4, .current, digest: digest)))
        #expect(
            synced.isHeld(by: try held(4, .superseded, digest: digest)),
            "another device pushed since: this root's copy is still there")
        #expect(synced.isHeld(by: try held(4, .conflict, digest: digest)))
        #expect(!synced.isHeld(by: nil), "the server has no such version (a fresh server at the same address)")
        #expect(
            !synced.isHeld(by: try held(4, .current, digest: try Self.synced(4, [Self.chunk(2)]).manifest.digest.hex)),
            "the same number with other content (another deployment)")
        #expect(!synced.isHeld(by: try held(4, .current, digest: nil)))
        #expect(!synced.isHeld(by: try held(4, .deleted, digest: digest)))
        #expect(!synced.isHeld(by: try held(4, .uploading, digest: digest)))
        #expect(!synced.isHeld(by: try held(5, .current, digest: digest)))
    }

    @Test func theBaseVersionsChunksAreNeverSentAndTheRestGoOnce() throws {
        let a = Self.chunk(1)
        let b = Self.chunk(2, 20)
        let c = Self.chunk(3, 5)
        let synced = try Self.synced(2, [a])
        let sure = PushDecisions.onServer(baseVersion: 2, synced: synced)
        #expect(sure.count == 1 && sure.contains(a.id) && !sure.contains(b.id))
        #expect(PushDecisions.onServer(baseVersion: 3, synced: synced).isEmpty, "another base: nothing is sure")
        // File 0 is [a, b, a, c], file 1 unknown (to be read), file 2 is [b].
        let lists: FileChunkLists = [[a, b, a, c], nil, [b]]
        let (locations, queued) = PushDecisions.initialUpload(lists, path: { "/f\($0)" }, onServer: [a.id])
        #expect(locations.map(\.id) == [b.id, c.id])
        #expect(locations.map(\.file) == ["/f0", "/f0"])
        #expect(locations.map(\.offset) == [10, 40])
        #expect(locations.map(\.length) == [20, 5])
        #expect(queued.count == 2 && queued.contains(b.id) && queued.contains(c.id) && !queued.contains(a.id))
        #expect(PushDecisions.filesToRead(changed: [1], unchanged: [0, 2], chunkLists: [[a], nil, nil]) == [1, 2])
        // The server lacked a chunk it was thought to hold: sent again from where it is.
        let again = PushDecisions.resend([a.id], lists, path: { "/f\($0)" })
        #expect(again.map(\.offset) == [0])
    }

    @Test func onlyASmallUnforcedPushOfAHeldVersionReadsItsChangedFilesFirst() throws {
        let basis = try Self.synced(2, [Self.chunk(1)])
        let limit = PushEngine.rereadBytes
        #expect(PushDecisions.rereadsFirst(force: false, basis: basis, changedSizes: [10, 20]))
        #expect(
            PushDecisions.rereadsFirst(force: false, basis: basis, changedSizes: [limit - 1, 1]),
            "the limit itself is small")
        #expect(
            PushDecisions.rereadsFirst(force: false, basis: basis, changedSizes: [0]),
            "an empty file changed: still a file to read")
        #expect(
            !PushDecisions.rereadsFirst(force: false, basis: basis, changedSizes: [limit, 1]),
            "larger: announced before it is read")
        #expect(!PushDecisions.rereadsFirst(force: false, basis: basis, changedSizes: []), "nothing to read")
        #expect(!PushDecisions.rereadsFirst(force: true, basis: basis, changedSizes: [10]))
        #expect(
            !PushDecisions.rereadsFirst(force: false, basis: nil, changedSizes: [10]),
            "no version the server holds to be found again")
    }

    @Test func aPushThatReadsNothingKeepsItsSyncedVersionsChunker() throws {
        let other = try ChunkerConfiguration(minimumSize: 4 << 10, averageSize: 16 << 10, maximumSize: 64 << 10)
        let synced = SyncedDocument(
            version: 2,
            manifest: try Manifest(
                kind: .file, chunker: other,
                entries: [
                    Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: [Self.chunk(1)])
                ]))
        #expect(
            PushDecisions.chunker(readAny: false, synced: synced, configured: .default) == other,
            "every list is that version's")
        #expect(PushDecisions.chunker(readAny: true, synced: synced, configured: .default) == .default)
        #expect(PushDecisions.chunker(readAny: false, synced: nil, configured: other) == other)
    }

    @Test func knownFilesCountAsHashedAndTheirChunksAsTheirOwners() {
        let a = Self.chunk(1)
        let b = Self.chunk(2, 20)
        let lists: FileChunkLists = [[a], nil, [], [b, a]]
        #expect(
            PushDecisions.knownBytes(lists, size: { [30, 40, 0, 50][$0] }) == 80, "the file not known is still to read")
        #expect(PushDecisions.knownBytes(lists, size: { _ in nil }) == 0, "a directory has no size")
        let owned = PushDecisions.locations(lists, path: { "/f\($0)" }, owner: 3) { $0 == a.id }
        #expect(owned.map(\.file) == ["/f0", "/f3"] && owned.map(\.offset) == [0, 20])
        #expect(owned.allSatisfy { $0.owner == 3 })
        #expect(
            PushDecisions.locations(lists, path: { "/f\($0)" }) { _ in true }.allSatisfy { $0.owner == 0 },
            "a single push's")
    }

    @Test func packedChunkListsReadBackAsTheyWereSet() {
        let a = Self.chunk(1)
        let b = Self.chunk(2, 20)
        var lists = FileChunkLists(files: 4)
        #expect(lists.indices.allSatisfy { !lists.isKnown($0) && lists[$0] == nil })
        lists[2] = [a, b]
        lists[0] = []
        lists[3] = [b]
        #expect(lists[0] == [] && lists.isKnown(0))
        #expect(lists[1] == nil && !lists.isKnown(1))
        #expect(lists[2] == [a, b] && lists[3] == [b])
        #expect(lists.chunks(at: 3).map(Array.init) == [b])
        #expect(lists.referenceCount == 3)
        lists[2] = nil
        #expect(!lists.isKnown(2) && lists[3] == [b])
    }

    @Test func aPrefixSetTakesIdsAlikeInTheirFirst64BitsForOneAnother() {
        let x = ChunkID(bytes: [UInt8](repeating: 9, count: 8) + [UInt8](repeating: 1, count: 24))!
        let y = ChunkID(bytes: [UInt8](repeating: 9, count: 8) + [UInt8](repeating: 2, count: 24))!
        var ids: ChunkIDPrefixes = [x]
        #expect(ids.contains(x) && ids.contains(y), "y is taken for x: a push then meets missing_chunks and sends it")
        #expect(!ids.insert(y) && ids.count == 1)
        #expect(ids.insert(Self.chunk(1).id) && ids.count == 2)
        #expect(!ChunkIDPrefixes().contains(x))
    }

    @Test func theStateReadsAManifestInEitherStoredForm() throws {
        let manifest = try Manifest(
            kind: .package, chunker: .default,
            entries: (0..<50).map {
                Manifest.Entry(
                    path: "file-\($0).txt", kind: .file, mode: 0o644, mtimeNanoseconds: 1,
                    chunks: [Self.chunk(UInt8($0))])
            })
        let stored = manifest.compressedDelta(against: nil)
        #expect(Manifest.isCompressedDelta(stored), "what is stored now: compressed")
        #expect(try ClientState.storedManifest(stored) == manifest)
        #expect(
            try ClientState.storedManifest(SpillArray(manifest.encoded())) == manifest, "what earlier releases stored")
        #expect(throws: XferError.self) { try ClientState.storedManifest(SpillArray(stored.prefix(20))) }
    }

    /// The hand-off between hashing and asking: a producer waits while every slot is taken,
    /// goes on when one is given back, and once the push stops it waits for nothing.
    @Test func theBatchHandOffHoldsTheProducerUntilASlotIsFreeOrThePushStops() {
        let stop = Locked(false)
        let slots = PushEngine.BatchSlots(2, stop: stop)
        #expect(slots.take() && slots.take())
        let outcome = Locked<Bool?>(nil)
        let returned = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let taken = slots.take()
            outcome.withLock { $0 = taken }
            returned.signal()
        }
        #expect(returned.wait(timeout: .now() + .milliseconds(300)) == .timedOut)  // both slots are taken
        slots.give()
        #expect(returned.wait(timeout: .now() + .seconds(10)) == .success)
        #expect(outcome.value == true)

        DispatchQueue.global().async {
            let taken = slots.take()
            outcome.withLock { $0 = taken }
            returned.signal()
        }
        slots.close()  // the push stopped: it is woken, not left to poll
        #expect(returned.wait(timeout: .now() + .seconds(10)) == .success)
        #expect(outcome.value == false)
        #expect(stop.value, "the pipeline sees the push stopped")
        #expect(!slots.take(), "and a later take waits for nothing")
    }
}
