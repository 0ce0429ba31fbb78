import Foundation
import XferCore
import XferProtocol

// One pass, as steps: ready the folder, take the server's view, plan (``SyncDirectory/planPass(_:serverChanged:)``),
// then act in the order ``SyncPassSteps`` gives, and keep the view for the next pass.
extension SyncEngine {
    typealias Plan = SyncDirectory.Plan

    /// One pass: push local changes and deletions, pull remote ones, apply remote deletions,
    /// then evict for the local limit.
    func pass() async throws -> SyncSummary {
        let started = ContinuousClock.now
        let sync = directory
        if try await ready() {
            // Confirmed unchanged on both sides since a pass that found nothing to do.
            var summary = SyncSummary()
            summary.confirmed = true
            summary.seconds = (ContinuousClock.now - started).seconds
            continuation.yield(.passFinished(summary))
            return summary
        }
        let (listing, change) = try await view()
        let pass = try await sync.planPass(listing, serverChanged: change != nil)
        var summary = SyncSummary()
        let plans = holdingRecent(pass.plans, &summary)
        try reportHeld(pass, &summary)
        try sync.raiseSeen(listing)
        reportSkipped(pass, &summary)
        // Local changes first, so a pull never has to decide about a local edit.
        let pullsAfterPush = try await upload(SyncPassSteps.uploads(plans, batch: Self.pushBatch), &summary)
        // At most 32 MiB a batch of pulls: the chunks a batch holds in memory stay bounded.
        let downloads = SyncPassSteps.downloads(
            plans, pullsAfterPush: pullsAfterPush, batch: Self.pushBatch, budget: 32 << 20)
        try await download(downloads, &summary)
        let afterView = try await keepView(listing, changed: SyncPassSteps.changedAnything(summary))
        // Conflicts, as the server now sees them.
        for info in SyncPassSteps.conflicts(afterView.documents) {
            summary.conflicts += 1
            continuation.yield(.conflict(info.path, current: info.version, conflicts: info.conflicts ?? []))
        }
        try await evictForLocalLimit(afterView.documents, &summary)
        // Found nothing to do and left nothing behind: the next pass may only confirm that.
        if SyncPassSteps.settles(serverChanged: change != nil, pass, summary) {
            try sync.state.setMeta(SyncDirectory.settledKey, "\(afterView.cursor) \(afterView.listedAt)")
        }
        summary.seconds = (ContinuousClock.now - started).seconds
        continuation.yield(.passFinished(summary))
        return summary
    }

    /// Readies a pass: the folder is there, the container's key is this engine's, old trash and
    /// staging copies go.
    /// - Returns: Whether both sides are confirmed unchanged since a pass that found nothing to do
    ///   (then there is nothing more to do).
    private func ready() async throws -> Bool {
        let sync = directory
        try sync.checkFolder()
        // Whether the container is end-to-end encrypted under the key this engine's remote holds.
        let now = ContinuousClock.now
        let fresh = keyCheckedAt.map { sync.remote.endToEnd == nil || now - $0 < Self.keyCheckInterval } ?? false
        if !fresh {
            try await checkKey()
            keyCheckedAt = now
        }
        if sync.options.trashDays > 0 {
            // Old trash goes at the start of a pass; failing to tidy it is no reason to stop.
            let cutoff = Int64((Date().timeIntervalSince1970 - Double(sync.options.trashDays) * 86_400) * 1e9)
            _ = try? sync.trash().empty(trashedBefore: cutoff)
        }
        try? sync.tidyStaging(olderThan: .seconds(86_400))
        if try await sync.nothingChanged() { return true }
        if try sync.state.meta(SyncDirectory.settledKey)?.isEmpty == false {
            try sync.state.setMeta(SyncDirectory.settledKey, "")  // this pass may change something
        }
        return false
    }

    /// The server's view for this pass, and why the server is not the one this directory
    /// synced with, if it is not (then the directory adopts it as a new one, and the change
    /// feed starts again from its cursor).
    private func view() async throws -> (listing: SyncDirectory.Listing, change: String?) {
        let sync = directory
        let listing = try await sync.serverView()
        let change = try sync.serverChange(listing)
        if let reason = change {
            try sync.adopt(listing, because: reason)
            feedReset = listing.cursor
            continuation.yield(.serverChanged(reason))
        } else if let deployment = listing.deployment, try sync.state.meta("deployment") == nil {
            try sync.state.setMeta("deployment", deployment)
        }
        return (listing, change)
    }

    /// While watching, a file written a moment ago may be written again (or gone) a moment
    /// later: its push waits until it has been left alone for the quiet period, and
    /// ``quietWait`` says how long until the youngest may go.
    private func holdingRecent(_ plans: [Plan], _ summary: inout SyncSummary) -> [Plan] {
        guard holdsRecentChanges else { return plans }
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        let quiet = Int64(directory.options.quietPeriod.seconds * 1e9)
        let held = SyncPassSteps.holdingRecent(plans, now: now, quiet: quiet)
        summary.waiting += held.waiting
        quietWait = held.waiting > 0 ? .nanoseconds(held.wait) : nil
        return held.plans
    }

    /// Progress events for a document's transfer.
    nonisolated var progress: @Sendable (DocumentPath) -> @Sendable (TransferProgress) -> Void {
        { [continuation] path in { continuation.yield(.progress(path, $0)) } }
    }

    /// Pushes and deletes on the server, in the order `uploads` gives.
    /// - Returns: The documents to pull after all: a push or a deletion that lost to a later
    ///   edit on the server.
    private func upload(_ uploads: SyncPassSteps.Uploads, _ summary: inout SyncSummary) async throws
        -> [DocumentPath]
    {
        let sync = directory
        let progress = progress
        var pullsAfterPush: [DocumentPath] = []
        for group in uploads.batches {
            let results = try await sync.pushMany(group, progress: progress(group[0].path))
            for (plan, result) in zip(group, results) {
                switch result {
                case .success(let report): pushed(plan, report, &summary, &pullsAfterPush)
                case .failure(let error): try settle(error, &summary, plan.path)
                }
            }
        }
        for plan in uploads.alone {
            guard
                let report = try await attempt(
                    &summary, plan.path, { try await sync.push(plan, progress: progress(plan.path)) })
            else {
                continue
            }
            pushed(plan, report, &summary, &pullsAfterPush)
        }
        for plan in uploads.deletions {
            guard let deleted = try await attempt(&summary, plan.path, { try await sync.deleteRemote(plan) }) else {
                continue
            }
            if deleted {
                if plan.isDirectory { summary.directories += 1 } else { summary.removedRemotely += 1 }
                continuation.yield(.removedRemotely(plan.path))
            } else {
                pullsAfterPush.append(plan.path)  // changed on the server since: the remote edit wins
            }
        }
        return pullsAfterPush
    }

    /// Counts and reports one push; a version lost to a later edit is kept as a conflict, and
    /// the winner comes down (`pullsAfterPush`).
    private func pushed(
        _ plan: Plan, _ report: PushReport, _ summary: inout SyncSummary, _ pullsAfterPush: inout [DocumentPath]
    ) {
        let outcome = SyncPassSteps.pushed(plan, committed: report.committed, state: report.state)
        switch outcome {
        case .nothing: return
        case .uploaded(let directory), .lostToLaterEdit(let directory):
            if directory { summary.directories += 1 } else { summary.uploaded += 1 }
        }
        summary.bytesSent += report.bytesSent
        continuation.yield(.uploaded(plan.path, version: report.version, bytesSent: report.bytesSent))
        if case .lostToLaterEdit = outcome { pullsAfterPush.append(plan.path) }
    }

    /// Pulls and deletes here, in the order `downloads` gives.
    private func download(_ downloads: SyncPassSteps.Downloads, _ summary: inout SyncSummary) async throws {
        let sync = directory
        let progress = progress
        // Every file synced here is a chunk source: found once for all the pass's pulls.
        let sources = ChunkSources(sync.state.clientState(for: try DocumentPath("sources")))
        for group in downloads.batches {
            for (path, result) in zip(group, try await sync.pullMany(group, sources: sources, progress: progress)) {
                try pulled(path, result, &summary)
            }
        }
        for path in downloads.alone {
            try await pullAlone(path, sources: sources, &summary)
        }
        for plan in downloads.deletions {
            guard try await attempt(&summary, plan.path, { try sync.deleteLocal(plan) }) == true,
                plan.action != .forget
            else {
                continue
            }
            if plan.action == .exclude {
                if !plan.isDirectory { summary.leftOut += 1 }
                continuation.yield(.leftOut(plan.path))
                continue
            }
            if plan.isDirectory { summary.directories += 1 } else { summary.removedLocally += 1 }
            continuation.yield(.removedLocally(plan.path))
        }
        for path in downloads.afterDeletions {
            try await pullAlone(path, sources: sources, &summary)
        }
        // An empty staging directory is not left lying about.
        if downloads.pullsAnything, let root = try? sync.root() {
            _ = try? root.removeEmptyDirectory(SyncDirectory.stagingName)
        }
    }

    /// Pulls one document by itself.
    private func pullAlone(_ path: DocumentPath, sources: ChunkSources, _ summary: inout SyncSummary) async throws {
        let sync = directory
        let progress = progress
        let result = try await documentOutcome {
            try await sync.pull(path, sources: sources, progress: progress(path))
        }
        try pulled(path, result, &summary)
    }

    /// Counts and reports one pull.
    private func pulled(_ path: DocumentPath, _ result: Result<PullReport, any Error>, _ summary: inout SyncSummary)
        throws
    {
        switch result {
        case .success(let report):
            if report.kind == .directory { summary.directories += 1 } else { summary.downloaded += 1 }
            summary.bytesFetched += report.bytesFetched
            continuation.yield(.downloaded(path, version: report.version, bytesFetched: report.bytesFetched))
        case .failure(let error as XferError) where error.code == .notFound && error.cause == nil:
            // Deleted or replaced on the server since this pass's view: the feed brings
            // that change, and the next pass acts on it.
            try settle(
                XferError(
                    .notFound, "changed on the server while this pass ran (\(error.message))",
                    cause: ChangedSinceListed()),
                &summary, path)
        case .failure(let error):
            try settle(error, &summary, path)
        }
    }

    /// Keeps the server's view as it is now (this pass's own changes included) for the next
    /// pass: `listing` itself if the pass `changed` nothing, else followed through the feed or
    /// listed again.
    /// - Returns: The view kept.
    private func keepView(_ listing: SyncDirectory.Listing, changed: Bool) async throws -> SyncDirectory.Listing {
        let sync = directory
        var afterView = listing
        if changed {
            if let followed = try await sync.following(listing) {
                afterView = followed
            } else {
                afterView = try await sync.listing()
            }
        }
        try sync.keep(afterView)
        try sync.state.setMeta("cursor", String(afterView.cursor))
        return afterView
    }

    /// Evicts for the local limit, if there is one, over the server's `documents` as the pass
    /// ends.
    private func evictForLocalLimit(_ documents: [String: DocumentInfo], _ summary: inout SyncSummary) async throws {
        guard let limit = directory.options.localLimit else { return }
        let plans = try directory.plan(remote: documents).plans
        for path in try await directory.enforceLocalLimit(limit, plans: plans) {
            summary.evicted += 1
            continuation.yield(.evicted(path))
        }
    }

    /// Throws unless the container is end-to-end encrypted exactly when this engine's remote
    /// holds its key, and under that key: a pass never sends plain names or chunks to an
    /// encrypted container, nor takes sealed names for plain ones.
    /// - Throws: `unauthorized` (the container is encrypted; open the engine with
    ///   ``Remote/unlocked()``'s remote), `encrypted_container` (this device holds a key and
    ///   the server says the container is plain), the server's errors.
    private func checkKey() async throws {
        let remote = directory.remote
        let unlocked = try await remote.unlocked()
        guard unlocked.endToEnd?.keyID == remote.endToEnd?.keyID else {
            throw XferError(
                .unauthorized,
                """
                container \(remote.container) is end-to-end encrypted under key \(unlocked.endToEnd?.keyID ?? "?"), and this engine \
                was opened \(remote.endToEnd.map { "under key \($0.keyID)" } ?? "without its key"): open it with `try await remote.unlocked()`; \
                nothing was synced
                """)
        }
        // A rotation: the same first key, a newer one to seal with.
        if unlocked.endToEnd?.currentKeyID != remote.endToEnd?.currentKeyID { directory.adopt(unlocked) }
    }
}
