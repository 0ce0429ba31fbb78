import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// The order a pass acts in and what it holds back, decided without a server or a disk
/// (``SyncPassSteps``).
@Suite struct SyncPassPlanTests {
    typealias Plan = SyncDirectory.Plan

    static func info(
        _ path: String, _ version: Int64 = 1, kind: DocumentKind = .file, size: Int64 = 10, conflicts: [Int64]? = nil
    ) throws -> DocumentInfo {
        DocumentInfo(
            path: try DocumentPath(path), version: version, state: .current, kind: kind, size: size, mtimeNs: 0,
            mode: 0o644, baseVersion: nil, manifestDigest: nil, files: nil, chunks: nil, device: nil, sequence: 1,
            conflicts: conflicts)
    }

    static func stamp(size: Int64 = 10, changedAt: Int64 = 0) -> FileStamp {
        FileStamp(size: size, mtimeNanoseconds: changedAt, inode: 1, ctimeNanoseconds: changedAt)
    }

    /// A plan for `path`: here as `local` (a kind, with a stamp for a file), there as `remote`.
    static func plan(
        _ path: String, _ action: SyncDirectory.Action, local: DocumentKind? = nil, stamp: FileStamp? = nil,
        remote: DocumentInfo? = nil, synced: Int64? = nil
    ) throws -> Plan {
        Plan(
            path: try DocumentPath(path), action: action, status: nil,
            local: local.map { SyncDirectory.LocalDocument(kind: $0, path: "/d/" + path, stamp: stamp) },
            synced: synced, remote: remote)
    }

    @Test func aWatchingPassHoldsBackPushesOfFilesChangedWithinTheQuietPeriod() throws {
        let second: Int64 = 1_000_000_000
        let now = 100 * second
        let plans = [
            try Self.plan("old", .push, local: .file, stamp: Self.stamp(changedAt: now - 5 * second)),
            try Self.plan("young", .push, local: .file, stamp: Self.stamp(changedAt: now - second / 10)),
            try Self.plan("younger", .push, local: .file, stamp: Self.stamp(changedAt: now - second / 100)),
            try Self.plan("future", .push, local: .file, stamp: Self.stamp(changedAt: now + second)),
            try Self.plan(
                "pulled", .pull, local: .file, stamp: Self.stamp(changedAt: now), remote: try Self.info("pulled")),
            try Self.plan("package", .push, local: .package)
        ]
        let quiet = SyncPassSteps.holdingRecent(plans, now: now, quiet: second / 5)
        #expect(quiet.plans.map(\.path.value) == ["old", "future", "pulled", "package"])
        #expect(quiet.waiting == 2)
        #expect(quiet.wait == second / 5 - second / 100, "until the youngest has been left alone long enough")
        let none = SyncPassSteps.holdingRecent(plans, now: now, quiet: 0)
        #expect(none.plans.count == plans.count && none.waiting == 0 && none.wait == 0)
    }

    @Test func uploadsGoSmallOnesInBatchesThenLargeOnesAloneThenDeletions() throws {
        let big = SyncDirectory.batchedDocumentBytes + 1
        let plans = [
            try Self.plan("a", .push, local: .file, stamp: Self.stamp()),
            try Self.plan("big", .push, local: .file, stamp: Self.stamp(size: big)),
            try Self.plan("dir", .push, local: .directory),
            try Self.plan("gone", .deleteRemote, remote: try Self.info("gone"), synced: 1),
            try Self.plan("pkg", .push, local: .package),
            try Self.plan("pull", .pull, remote: try Self.info("pull")),
            try Self.plan("z", .push, local: .file, stamp: Self.stamp())
        ]
        let uploads = SyncPassSteps.uploads(plans, batch: 2)
        #expect(uploads.batches.map { $0.map(\.path.value) } == [["a", "dir"], ["z"]])
        #expect(uploads.alone.map(\.path.value) == ["big", "pkg"])
        #expect(uploads.deletions.map(\.path.value) == ["gone"])
    }

    @Test func aPushLostToALaterEditIsCountedAndItsWinnerComesDown() throws {
        let file = try Self.plan("f", .push, local: .file, stamp: Self.stamp())
        let directory = try Self.plan("d", .push, local: .directory)
        #expect(SyncPassSteps.pushed(file, committed: false, state: .current) == .nothing)
        #expect(SyncPassSteps.pushed(file, committed: true, state: .current) == .uploaded(directory: false))
        #expect(SyncPassSteps.pushed(directory, committed: true, state: .current) == .uploaded(directory: true))
        #expect(SyncPassSteps.pushed(file, committed: true, state: .conflict) == .lostToLaterEdit(directory: false))
    }

    @Test func downloadsPullBeforeDeletingAndReplaceADirectoryOnlyOnceItIsGone() throws {
        let big = SyncDirectory.batchedDocumentBytes + 1
        let plans = [
            try Self.plan("a", .pull, remote: try Self.info("a", size: 30)),
            try Self.plan("b", .pull, remote: try Self.info("b", size: 30)),
            try Self.plan("c", .pull, remote: try Self.info("c", size: 50)),
            try Self.plan("big", .pull, remote: try Self.info("big", size: big)),
            try Self.plan("d", .deleteLocal, local: .directory, synced: 1),
            try Self.plan("d/e", .deleteLocal, local: .directory, synced: 1),
            try Self.plan("d/e/f", .deleteLocal, local: .file, stamp: Self.stamp(), synced: 1),
            try Self.plan("evicted", .forget, synced: 1),
            try Self.plan("now-a-file", .pull, local: .directory, remote: try Self.info("now-a-file")),
            try Self.plan("pushed", .push, local: .file, stamp: Self.stamp())
        ]
        let downloads = SyncPassSteps.downloads(
            plans, pullsAfterPush: [try DocumentPath("lost")], batch: 10, budget: 64)
        #expect(downloads.batches.map { $0.map(\.value) } == [["a", "b"], ["c"]], "at most 64 bytes a batch")
        #expect(downloads.alone.map(\.value) == ["big", "lost"], "then the large ones and those a push lost")
        #expect(
            downloads.deletions.map(\.path.value) == ["d/e/f", "evicted", "d/e", "d"],
            "files first, then directories deepest first")
        #expect(downloads.afterDeletions.map(\.value) == ["now-a-file"])
        #expect(downloads.pullsAnything)
        let nothing = SyncPassSteps.downloads([plans[4]], pullsAfterPush: [], batch: 10, budget: 64)
        #expect(!nothing.pullsAnything && nothing.deletions.count == 1)
    }

    @Test func aPassThatChangedNothingFoundNothingAndLeftNothingSettles() throws {
        let pass = SyncDirectory.PassPlan(plans: [], held: [], heldCounts: (0, 0, 0), invalid: [])
        #expect(SyncPassSteps.settles(serverChanged: false, pass, SyncSummary()))
        #expect(!SyncPassSteps.settles(serverChanged: true, pass, SyncSummary()), "a new server is never settled")
        // Anything failed, retried, waiting, held, in conflict or rolled back keeps the pass unsettled.
        let unsettling: [WritableKeyPath<SyncSummary, Int>] = [
            \.failed, \.retried, \.waiting, \.deletionsHeld, \.conflicts, \.rolledBack
        ]
        for field in unsettling {
            var summary = SyncSummary()
            summary[keyPath: field] = 1
            #expect(!SyncPassSteps.settles(serverChanged: false, pass, summary), "\(field)")
        }
        var unreadable = pass
        unreadable.unreadable = ["x": "permission denied"]
        #expect(!SyncPassSteps.settles(serverChanged: false, unreadable, SyncSummary()))
        var invalid = pass
        invalid.invalid = ["bad\u{0}name"]
        #expect(!SyncPassSteps.settles(serverChanged: false, invalid, SyncSummary()))
        #expect(!SyncPassSteps.changedAnything(SyncSummary()))
        var directory = SyncSummary()
        directory.directories = 1
        #expect(SyncPassSteps.changedAnything(directory))
    }

    @Test func conflictsAreSaidByPath() throws {
        let documents = [
            "b": try Self.info("b", 3, conflicts: [2]), "a": try Self.info("a", 5, conflicts: [4, 1]),
            "c": try Self.info("c", conflicts: []), "d": try Self.info("d")
        ]
        #expect(SyncPassSteps.conflicts(documents).map(\.path.value) == ["a", "b"])
    }
}

/// What a watching engine decides between passes (``SyncWatchSteps``).
@Suite struct SyncWatchPlanTests {
    @Test func aFailedPassIsRetriedUnlessTheTokenIsRefusedOrTheWatchCancelled() {
        #expect(SyncWatchSteps.afterFailure(XferError(.unavailable, "down")) == .offline)
        #expect(SyncWatchSteps.afterFailure(XferError(.folderMissing, "gone")) == .watchAfresh)
        #expect(SyncWatchSteps.afterFailure(XferError(.unauthorized, "no")) == .stop)
        #expect(SyncWatchSteps.afterFailure(XferError(.cancelled, "stop")) == .stop)
        #expect(SyncWatchSteps.afterFailure(CancellationError()) == .stop)
        #expect(SyncWatchSteps.afterFailure(XferError(.io, "disk")) == .retry)
        #expect(SyncWatchSteps.afterFailure(XferError(.conflict, "bound elsewhere")) == .retry)
        struct Other: Error {}
        #expect(SyncWatchSteps.afterFailure(Other()) == .retry)
    }

    @Test func theBackoffDoublesUpToItsMost() {
        var wait = Duration.seconds(1)
        var waits: [Duration] = []
        for _ in 0..<5 {
            wait = SyncWatchSteps.backoff(after: wait, maximum: .seconds(10))
            waits.append(wait)
        }
        #expect(waits == [.seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
    }

    @Test func unwatchedDirectoriesAreRescannedOftenTheRestOnTheSlowPeriod() {
        let slow = Duration.seconds(600)
        let often = Duration.seconds(30)
        #expect(SyncWatchSteps.rescanPeriod(unwatched: false, rescan: slow, unwatchedRescan: often) == slow)
        #expect(SyncWatchSteps.rescanPeriod(unwatched: true, rescan: slow, unwatchedRescan: often) == often)
        #expect(SyncWatchSteps.rescanPeriod(unwatched: true, rescan: often, unwatchedRescan: slow) == often)
        #expect(SyncWatchSteps.rescansNow(unwatched: true, sinceFull: often, rescan: slow))
        #expect(!SyncWatchSteps.rescansNow(unwatched: false, sinceFull: often, rescan: slow))
        #expect(SyncWatchSteps.rescansNow(unwatched: false, sinceFull: slow, rescan: slow))
    }

    @Test func theFeedCallsForAPassWhenItCarriesChangesOrKeys() throws {
        #expect(!SyncWatchSteps.feedCallsForPass(ChangeList(changes: [], cursor: 5, more: false)))
        let change = try SyncPassPlanTests.info("a")
        #expect(SyncWatchSteps.feedCallsForPass(ChangeList(changes: [change], cursor: 6, more: false)))
    }
}
