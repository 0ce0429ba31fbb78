import XferCore
import XferProtocol

/// What a pass does with its plans, and in which order (docs/SYNC.md, "One pass"): local
/// changes first, so a pull never has to decide about a local edit; then remote changes, pulls
/// before local deletions. Decides only: ``SyncEngine`` performs the steps. Every function is
/// pure, tested without a server or a disk.
enum SyncPassSteps {
    typealias Plan = SyncDirectory.Plan

    /// The plans a watching pass acts on now, and how long until the ones it holds back may go.
    struct Quiet {
        /// The plans to act on.
        var plans: [Plan]
        /// How many pushes wait for the quiet period.
        var waiting = 0
        /// Nanoseconds until the youngest waiting file has been left alone for the quiet period.
        var wait: Int64 = 0
    }

    /// Holds back the pushes of files changed less than `quiet` nanoseconds before `now`: a
    /// file written a moment ago may be written again (or gone) a moment later, so it waits
    /// until it has been left alone for the quiet period. A stamp from the future is no reason
    /// to wait.
    static func holdingRecent(_ plans: [Plan], now: Int64, quiet: Int64) -> Quiet {
        var result = Quiet(plans: plans)
        result.plans.removeAll { plan in
            guard plan.action == .push, let stamp = plan.local?.stamp else { return false }
            let age = now - max(stamp.ctimeNanoseconds, stamp.mtimeNanoseconds)
            guard age >= 0, age < quiet else { return false }
            result.wait = max(result.wait, quiet - age)
            result.waiting += 1
            return true
        }
        return result
    }

    /// What goes up, in order: small documents in batches (a few requests for hundreds of
    /// documents), then the larger ones alone, then the deletions made here.
    struct Uploads {
        /// Pushed together, a batch at a time.
        var batches: [[Plan]]
        /// Pushed one at a time.
        var alone: [Plan]
        /// Deleted on the server.
        var deletions: [Plan]
    }

    /// The uploads of `plans`, at most `batch` documents a batch.
    static func uploads(_ plans: [Plan], batch: Int) -> Uploads {
        let pushes = plans.filter { $0.action == .push }
        return Uploads(
            batches: pushes.filter(SyncDirectory.isBatched).batched(atMost: batch),
            alone: pushes.filter { !SyncDirectory.isBatched($0) },
            deletions: plans.filter { $0.action == .deleteRemote })
    }

    /// What a committed push counts as, and whether its document comes down afterwards.
    enum Pushed: Equatable {
        /// Nothing was committed: nothing to count.
        case nothing
        /// A version was committed (a directory's or a document's).
        case uploaded(directory: Bool)
        /// A version was committed but lost to a later edit: it is kept as a conflict, and the
        /// winner comes down in this pass.
        case lostToLaterEdit(directory: Bool)
    }

    /// What the push of `plan` reported.
    static func pushed(_ plan: Plan, committed: Bool, state: VersionState?) -> Pushed {
        guard committed else { return .nothing }
        return state == .conflict
            ? .lostToLaterEdit(directory: plan.isDirectory) : .uploaded(directory: plan.isDirectory)
    }

    /// What comes down, in order: the pulls (small ones in batches, the rest alone), then the
    /// local deletions, then the pulls of files taking a directory's place (once the directory
    /// is empty). Pulls come before deletions so a rename's new name can reuse the old one's
    /// chunks.
    struct Downloads {
        /// Pulled together, a batch at a time.
        var batches: [[DocumentPath]]
        /// Pulled one at a time, after the batches.
        var alone: [DocumentPath]
        /// Removed here (or forgotten): files first, then directories deepest first, each
        /// removed once what was in it is gone.
        var deletions: [Plan]
        /// Pulled one at a time, after the deletions.
        var afterDeletions: [DocumentPath]

        /// Whether anything is pulled (then an empty staging directory is removed afterwards).
        var pullsAnything: Bool { !batches.isEmpty || !alone.isEmpty || !afterDeletions.isEmpty }
    }

    /// The downloads of `plans`, with `pullsAfterPush` (documents whose push or deletion lost
    /// to the server's newer version) pulled alone after the planned pulls. A batch holds at
    /// most `batch` documents and `budget` bytes as the server lists them, so the chunks it
    /// holds in memory stay bounded.
    static func downloads(_ plans: [Plan], pullsAfterPush: [DocumentPath], batch: Int, budget: Int) -> Downloads {
        // A file taking a directory's place comes after the deletions, once the directory is empty.
        func replacesDirectory(_ plan: Plan) -> Bool {
            plan.local?.kind == .directory && plan.remote?.kind != .directory
        }
        let pullPlans = plans.filter { $0.action == .pull }
        let pulls = pullPlans.filter { !replacesDirectory($0) }.map(\.path) + pullsAfterPush
        let small = Set(pullPlans.filter(SyncDirectory.isBatched).map(\.path))
        let remoteSize = Dictionary(
            plans.compactMap { plan in plan.remote.map { (plan.path, $0.size) } },
            uniquingKeysWith: { first, _ in first })
        let removals: Set<SyncDirectory.Action> = [.deleteLocal, .exclude]
        let files = plans.filter {
            (removals.contains($0.action) || $0.action == .forget) && $0.local?.kind != .directory
        }
        let directories = plans.filter { removals.contains($0.action) && $0.local?.kind == .directory }
        return Downloads(
            batches: pulls.filter { small.contains($0) }.batched(
                atMost: batch, budget: budget, cost: { Int(remoteSize[$0] ?? 0) }),
            alone: pulls.filter { !small.contains($0) },
            deletions: files + directories.reversed(),
            afterDeletions: pullPlans.filter(replacesDirectory).map(\.path))
    }

    /// Whether a pass with `summary` changed anything, here or on the server: then the view it
    /// keeps for the next pass is fetched again (this pass's own changes included).
    static func changedAnything(_ summary: SyncSummary) -> Bool {
        summary.uploaded + summary.downloaded + summary.removedLocally + summary.removedRemotely
            + summary.directories > 0
    }

    /// The documents in conflict in the view a pass ends with, by path.
    static func conflicts(_ documents: [String: DocumentInfo]) -> [DocumentInfo] {
        documents.values.filter { $0.conflicts?.isEmpty == false }.sorted { $0.path.value < $1.path.value }
    }

    /// Whether a pass found nothing to do and left nothing behind (no server change, no invalid
    /// or unreadable names, nothing counted): then the next pass may only confirm that.
    static func settles(serverChanged: Bool, _ pass: SyncDirectory.PassPlan, _ summary: SyncSummary) -> Bool {
        !serverChanged && pass.invalid.isEmpty && pass.unreadable.isEmpty && summary == SyncSummary()
    }
}
