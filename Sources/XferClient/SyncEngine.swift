import Foundation
import XferCore
import XferProtocol

/// Keeps a directory in sync with a container: `syncOnce()` for one pass, `watch()` to follow
/// local changes (inotify, debounced) and remote ones (the change feed, long-polled) until
/// cancelled. One engine per directory at a time (a lock); everything it does is reported on
/// ``events``.
public actor SyncEngine {
    /// The directory and its state.
    public nonisolated let directory: SyncDirectory
    /// What the engine does, as it does it. Buffers the newest 1024 events.
    public nonisolated let events: AsyncStream<SyncEvent>
    /// Where ``events`` come from (SyncEngine+Outcomes.swift yields there too).
    let continuation: AsyncStream<SyncEvent>.Continuation
    private let lock: DirectoryLock
    /// What `xfer status` shows of this engine (``SyncHealth``), written after every pass.
    private var health = SyncHealth()
    /// Set when a pass found a replaced server: the change feed's new starting point.
    private var feedReset: Int64?
    /// Whether passes hold back files changed within the quiet period (while watching).
    private var holdsRecentChanges = false
    /// How long until the youngest file a pass held back has been quiet long enough.
    private var quietWait: Duration?
    /// Whether the server was asked whether the container is end-to-end encrypted under the
    /// key this engine's remote holds (once an engine).
    private var keyChecked = false

    /// Takes how long until held-back files may go, if the last pass held any.
    private func takeQuietWait() -> Duration? {
        defer { quietWait = nil }
        return quietWait
    }

    /// Takes the feed's new starting point, if a pass set one.
    private func takeFeedReset() -> Int64? {
        defer { feedReset = nil }
        return feedReset
    }

    /// Opens `directory` for syncing with `remote` and takes its lock.
    /// - Throws: `conflict` if another engine holds the directory or it is bound elsewhere.
    public init(directory: String, remote: Remote, options: SyncOptions = SyncOptions()) throws {
        self.directory = try SyncDirectory(directory: directory, remote: remote, options: options)
        lock = try DirectoryLock(
            path: self.directory.state.database.path + ".lock", directory: self.directory.directory)
        (events, continuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let previous = try? self.directory.state.health()
        health.pid = getpid()
        health.startedAt = Date().timeIntervalSince1970
        health.lastPassAt = previous?.lastPassAt
        health.lastPass = previous?.lastPass
        health.lastError = previous?.lastError
        health.lastErrorAt = previous?.lastErrorAt
    }

    /// Ends ``events``.
    public func close() {
        health.phase = .stopped
        directory.state.record(health)
        continuation.finish()
    }

    /// Notes a failed pass in ``SyncHealth``.
    private func noteFailure(_ error: any Error, phase: SyncHealth.Phase) {
        health.phase = phase
        health.lastError = (error as? XferError)?.message ?? "\(error)"
        health.lastErrorAt = Date().timeIntervalSince1970
        health.failuresInARow += 1
        directory.state.record(health)
    }

    /// One pass: push local changes and deletions, pull remote ones, apply remote deletions,
    /// then evict for the local limit.
    /// - Throws: `unavailable` if the server cannot be reached (nothing is lost: the local
    ///   changes stay pending), `unauthorized`; per-document failures are events instead.
    @discardableResult
    public func syncOnce() async throws -> SyncSummary {
        try await ClientThreads.run {
            do {
                let summary = try await pass()
                health.phase = .idle
                health.lastPassAt = Date().timeIntervalSince1970
                health.lastPass = summary
                health.failuresInARow = 0
                directory.state.record(health)
                return summary
            } catch {
                let code = (error as? XferError)?.code
                noteFailure(
                    error, phase: code == .unavailable ? .offline : code == .folderMissing ? .folderMissing : .failing)
                throw error
            }
        }
    }

    private func pass() async throws -> SyncSummary {
        let started = ContinuousClock.now
        let sync = directory
        try sync.checkFolder()
        if !keyChecked {
            try await checkKey()
            keyChecked = true
        }
        if sync.options.trashDays > 0 {
            // Old trash goes at the start of a pass; failing to tidy it is no reason to stop.
            let cutoff = Int64((Date().timeIntervalSince1970 - Double(sync.options.trashDays) * 86_400) * 1e9)
            _ = try? sync.trash().empty(trashedBefore: cutoff)
        }
        try? sync.tidyStaging(olderThan: .seconds(86_400))
        if try await sync.nothingChanged() {
            // Confirmed unchanged on both sides since a pass that found nothing to do.
            var summary = SyncSummary()
            summary.confirmed = true
            summary.seconds = (ContinuousClock.now - started).seconds
            continuation.yield(.passFinished(summary))
            return summary
        }
        if try sync.state.meta(SyncDirectory.settledKey)?.isEmpty == false {
            try sync.state.setMeta(SyncDirectory.settledKey, "")  // this pass may change something
        }
        let listing = try await sync.serverView()
        let change = try sync.serverChange(listing)
        if let reason = change {
            try sync.adopt(listing, because: reason)
            feedReset = listing.cursor
            continuation.yield(.serverChanged(reason))
        } else if let deployment = listing.deployment, try sync.state.meta("deployment") == nil {
            try sync.state.setMeta("deployment", deployment)
        }
        let pass = try await sync.planPass(listing, serverChanged: change != nil)
        var plans = pass.plans
        var summary = SyncSummary()
        if holdsRecentChanges {
            // A file written a moment ago may be written again (or gone) a moment later: it
            // waits until it has been left alone for the quiet period.
            let now = Int64(Date().timeIntervalSince1970 * 1e9)
            let quiet = Int64(sync.options.quietPeriod.seconds * 1e9)
            var wait: Int64 = 0
            plans.removeAll { plan in
                guard plan.action == .push, let stamp = plan.local?.stamp else { return false }
                let age = now - max(stamp.ctimeNanoseconds, stamp.mtimeNanoseconds)
                guard age >= 0, age < quiet else { return false }
                wait = max(wait, quiet - age)
                summary.waiting += 1
                return true
            }
            quietWait = summary.waiting > 0 ? .nanoseconds(wait) : nil
        }
        try reportHeld(pass, &summary)
        try sync.raiseSeen(listing)
        var pullAfterPush: [DocumentPath] = []
        for name in pass.invalid {
            summary.failed += 1
            continuation.yield(
                .failed(
                    nil,
                    XferError(
                        .invalidPath,
                        "\(name) is not a valid document name (see docs/PROTOCOL.md, Names); it is not synced")))
        }
        for (name, why) in pass.unreadable.sorted(by: { $0.key < $1.key }) {
            summary.failed += 1
            continuation.yield(
                .failed(
                    nil,
                    XferError(
                        .io,
                        "cannot read \(sync.directory)/\(name) (\(why)); nothing under it is uploaded, downloaded or deleted until it can be read"
                    )))
        }

        let progress: @Sendable (DocumentPath) -> @Sendable (TransferProgress) -> Void = { [continuation] path in
            { continuation.yield(.progress(path, $0)) }
        }

        // Local changes first, so a pull never has to decide about a local edit.
        func pushed(_ plan: SyncDirectory.Plan, _ report: PushReport) {
            guard report.committed else { return }
            if plan.isDirectory { summary.directories += 1 } else { summary.uploaded += 1 }
            summary.bytesSent += report.bytesSent
            continuation.yield(.uploaded(plan.path, version: report.version, bytesSent: report.bytesSent))
            // Lost to a later edit: this version is kept as a conflict, the winner comes down.
            if report.state == .conflict { pullAfterPush.append(plan.path) }
        }
        // Small documents in batches: a few requests for hundreds of documents.
        let batched = plans.filter { $0.action == .push && SyncDirectory.isBatched($0) }
        for group in batched.batched(atMost: Self.pushBatch) {
            let results = try await sync.pushMany(group, progress: progress(group[0].path))
            for (plan, result) in zip(group, results) {
                switch result {
                case .success(let report): pushed(plan, report)
                case .failure(let error): try settle(error, &summary, plan.path)
                }
            }
        }
        for plan in plans where plan.action == .push && !SyncDirectory.isBatched(plan) {
            guard
                let report = try await attempt(
                    &summary, plan.path, { try await sync.push(plan, progress: progress(plan.path)) })
            else {
                continue
            }
            pushed(plan, report)
        }
        for plan in plans where plan.action == .deleteRemote {
            guard let deleted = try await attempt(&summary, plan.path, { try await sync.deleteRemote(plan) }) else {
                continue
            }
            if deleted {
                if plan.isDirectory { summary.directories += 1 } else { summary.removedRemotely += 1 }
                continuation.yield(.removedRemotely(plan.path))
            } else {
                pullAfterPush.append(plan.path)
            }
        }
        // Remote changes: pulls before deletions, so a rename's new name can reuse the old one's
        // chunks; but a file taking a directory's place comes after, once the directory is empty.
        func replacesDirectory(_ plan: SyncDirectory.Plan) -> Bool {
            plan.local?.kind == .directory && plan.remote?.kind != .directory
        }
        let pulls = plans.filter { $0.action == .pull && !replacesDirectory($0) }.map(\.path) + pullAfterPush
        let pullsAfterDeletions = plans.filter { $0.action == .pull && replacesDirectory($0) }.map(\.path)
        // Every file synced here is a chunk source: found once for all the pass's pulls.
        let sources = ChunkSources(sync.state.clientState(for: try DocumentPath("sources")))
        func pulled(_ path: DocumentPath, _ result: Result<PullReport, any Error>) throws {
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
        // Small documents in batches (manifests and chunks fetched together), the rest alone.
        let remoteInfo = Dictionary(
            plans.compactMap { plan in plan.remote.map { (plan.path, $0) } }, uniquingKeysWith: { first, _ in first })
        let small = Set(plans.filter { $0.action == .pull && SyncDirectory.isBatched($0) }.map(\.path))
        // At most 500 documents and 32 MiB a batch: the chunks a batch holds in memory stay bounded.
        for group in pulls.filter({ small.contains($0) }).batched(
            atMost: Self.pushBatch, budget: 32 << 20,
            cost: { Int(remoteInfo[$0]?.size ?? 0) })
        {
            for (path, result) in zip(group, try await sync.pullMany(group, sources: sources, progress: progress)) {
                try pulled(path, result)
            }
        }
        for path in pulls where !small.contains(path) {
            let result = try await documentOutcome {
                try await sync.pull(path, sources: sources, progress: progress(path))
            }
            try pulled(path, result)
        }
        // Directories last and deepest first: each is removed once what was in it is gone.
        let deletions =
            plans.filter { ($0.action == .deleteLocal || $0.action == .forget) && $0.local?.kind != .directory }
            + plans.filter { $0.action == .deleteLocal && $0.local?.kind == .directory }.reversed()
        for plan in deletions {
            guard try await attempt(&summary, plan.path, { try sync.deleteLocal(plan) }) == true,
                plan.action == .deleteLocal
            else {
                continue
            }
            if plan.isDirectory { summary.directories += 1 } else { summary.removedLocally += 1 }
            continuation.yield(.removedLocally(plan.path))
        }
        for path in pullsAfterDeletions {
            let result = try await documentOutcome {
                try await sync.pull(path, sources: sources, progress: progress(path))
            }
            try pulled(path, result)
        }
        // An empty staging directory is not left lying about.
        if !pulls.isEmpty || !pullsAfterDeletions.isEmpty, let root = try? sync.root() {
            _ = try? root.removeEmptyDirectory(SyncDirectory.stagingName)
        }
        // The server as it is now (this pass's own changes included), kept for the next pass.
        var afterView = listing
        if summary.uploaded + summary.downloaded + summary.removedLocally + summary.removedRemotely
            + summary.directories > 0
        {
            if let followed = try await sync.following(listing) {
                afterView = followed
            } else {
                afterView = try await sync.listing()
            }
        }
        try sync.keep(afterView)
        try sync.state.setMeta("cursor", String(afterView.cursor))

        // Conflicts, as the server now sees them.
        let after = afterView.documents
        for info in after.values.filter({ $0.conflicts?.isEmpty == false }).sorted(by: { $0.path.value < $1.path.value }
        ) {
            summary.conflicts += 1
            continuation.yield(.conflict(info.path, current: info.version, conflicts: info.conflicts ?? []))
        }
        if let limit = sync.options.localLimit {
            plans = try sync.plan(remote: after).plans
            for path in try await sync.enforceLocalLimit(limit, plans: plans) {
                summary.evicted += 1
                continuation.yield(.evicted(path))
            }
        }
        // Found nothing to do and left nothing behind: the next pass may only confirm that.
        if change == nil, pass.invalid.isEmpty, pass.unreadable.isEmpty, summary == SyncSummary() {
            try sync.state.setMeta(SyncDirectory.settledKey, "\(afterView.cursor) \(afterView.listedAt)")
        }
        summary.seconds = (ContinuousClock.now - started).seconds
        continuation.yield(.passFinished(summary))
        return summary
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
    }

    /// Small documents per batch push or pull: big enough that requests are few, small enough
    /// that a pass reports progress and keeps its memory bounded.
    static let pushBatch = 500

    /// Syncs now, then whenever something changes here (inotify) or on the server (the change
    /// feed), until the task is cancelled. It keeps going through whatever a pass meets: the
    /// server unreachable (``SyncEvent/offline(_:retryIn:)``) or any other failed pass
    /// (``SyncEvent/passFailed(_:retryIn:)``) is retried with exponential backoff (1 s doubling
    /// up to `maximumBackoff`), and a folder gone or unmounted (``SyncEvent/folderMissing(_:)``)
    /// is waited for and watched afresh when it is back. Only a refused token
    /// (`unauthorized`) or cancellation ends it.
    public func watch() async throws {
        try await ClientThreads.run {
            health.watching = true
            var said = false
            while true {
                do {
                    try await watchRound(folderMissingSaid: said)
                    return
                } catch let again as WatchAfresh {
                    said = again.folderMissingSaid
                }
            }
        }
    }

    /// A pass found the folder missing: its watches die with it, so wait for it and watch anew.
    private struct WatchAfresh: Error {
        /// Whether ``SyncEvent/folderMissing(_:)`` was already said for this absence.
        var folderMissingSaid: Bool
    }

    /// Whether the folder is there to watch; else says so once (`said`) and waits a moment.
    private func folderPresent(said: inout Bool) async throws -> Bool {
        do {
            try directory.checkFolder()
            return true
        } catch let error as XferError where error.code == .folderMissing {
            if !said {
                said = true
                continuation.yield(.folderMissing(error.message))
                noteFailure(error, phase: .folderMissing)
            }
            try await Task.sleep(for: directory.options.folderCheckInterval)
            return false
        }
    }

    private func watchRound(folderMissingSaid: Bool) async throws {
        holdsRecentChanges = true
        defer { holdsRecentChanges = false }
        var said = folderMissingSaid
        while try await !folderPresent(said: &said) {}
        let options = directory.options
        let connection = directory.remote.connection
        let container = directory.remote.container
        let watcher = try DirectoryWatcher(
            root: directory.directory, limit: options.maximumWatches,
            ignore: directory.isIgnored(_:isDirectory:))
        defer { watcher.stop() }
        let (triggers, trigger) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        trigger.yield(())
        let startCursor = Int64(try directory.state.meta("cursor") ?? "0") ?? 0
        let continuation = continuation
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in watcher.events { trigger.yield(()) }
            }
            group.addTask {
                // The change feed: one long poll at a time; a change (or a reconnect) triggers a pass.
                var cursor = startCursor
                var backoff = Duration.seconds(1)
                while !Task.isCancelled {
                    if let reset = await self.takeFeedReset() { cursor = reset }
                    do {
                        let list = try await connection.changes(
                            container: container, after: cursor, wait: options.feedWait)
                        if !list.changes.isEmpty || !list.keys.isEmpty { trigger.yield(()) }
                        cursor = list.cursor
                        backoff = .seconds(1)
                    } catch let error as XferError where error.code == .cancelled {
                        return
                    } catch {
                        try? await Task.sleep(for: backoff)
                        backoff = min(backoff * 2, options.maximumBackoff)
                        trigger.yield(())
                    }
                }
            }
            group.addTask {
                // Rescans: everything on a slow period, and often where inotify could not watch.
                var told = false
                var sinceFull = Duration.zero
                while !Task.isCancelled {
                    let unwatched = watcher.unwatched.withLock { $0 }
                    if !unwatched.isEmpty && !told, let first = unwatched.sorted(by: { $0.key < $1.key }).first {
                        told = true
                        continuation.yield(
                            .watchLimited(count: unwatched.count, example: first.key, reason: first.value))
                    }
                    let period =
                        unwatched.isEmpty
                        ? options.rescanInterval : min(options.unwatchedRescanInterval, options.rescanInterval)
                    try await Task.sleep(for: period)
                    sinceFull += period
                    if !unwatched.isEmpty || sinceFull >= options.rescanInterval {
                        sinceFull = .zero
                        trigger.yield(())
                    }
                }
            }
            group.addTask {
                var backoff = Duration.seconds(1)
                for await _ in triggers {
                    try await Task.sleep(for: options.debounce)
                    do {
                        try await self.syncOnce()
                        backoff = .seconds(1)
                        if let wait = await self.takeQuietWait() {
                            // Files held back for the quiet period: a pass once it has passed.
                            Task {
                                try await Task.sleep(for: wait)
                                trigger.yield(())
                            }
                        }
                    } catch let error as XferError where error.code == .unavailable {
                        continuation.yield(.offline(error, retryIn: backoff))
                        try await Task.sleep(for: backoff)
                        backoff = min(backoff * 2, options.maximumBackoff)
                        trigger.yield(())
                    } catch let error as XferError where error.code == .folderMissing {
                        // Gone or unmounted: nothing is decided; wait for it and watch it afresh.
                        continuation.yield(.folderMissing(error.message))
                        throw WatchAfresh(folderMissingSaid: true)
                    } catch let error as XferError where error.code == .cancelled || error.code == .unauthorized {
                        throw error
                    } catch is CancellationError {
                        throw CancellationError()
                    } catch {
                        // Anything else (a state write that failed, a server error): said,
                        // recorded for `xfer status`, and retried; the daemon does not stop.
                        continuation.yield(
                            .passFailed(error as? XferError ?? XferError(.io, "\(error)"), retryIn: backoff))
                        try await Task.sleep(for: backoff)
                        backoff = min(backoff * 2, options.maximumBackoff)
                        trigger.yield(())
                    }
                }
            }
            try await group.next()
            group.cancelAll()
        }
    }
}
