import Foundation
import XferCore
import XferProtocol

// Watching: passes triggered by local changes (inotify), remote ones (the change feed, long-polled) and rescans,
// each loop a task of one group; what follows a failed pass is ``SyncWatchSteps``'s decision.
extension SyncEngine {
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
    struct WatchAfresh: Error {
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

    /// Watches the folder until cancelled, or until a pass finds it missing (``WatchAfresh``).
    private func watchRound(folderMissingSaid: Bool) async throws {
        holdsRecentChanges = true
        defer { holdsRecentChanges = false }
        var said = folderMissingSaid
        while try await !folderPresent(said: &said) {}
        let watcher = try DirectoryWatcher(
            root: directory.directory, limit: directory.options.maximumWatches,
            ignore: directory.isIgnored(_:isDirectory:))
        defer { watcher.stop() }
        let (triggers, trigger) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        trigger.yield(())
        let startCursor = Int64(try directory.state.meta("cursor") ?? "0") ?? 0
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for await _ in watcher.events { trigger.yield(()) }
            }
            group.addTask { await self.followFeed(from: startCursor, trigger: trigger) }
            group.addTask { try await self.rescan(watcher, trigger: trigger) }
            group.addTask { try await self.runPasses(triggers, trigger: trigger) }
            try await group.next()
            group.cancelAll()
        }
    }

    /// The change feed: one long poll at a time; a change (or a reconnect) triggers a pass.
    private nonisolated func followFeed(from start: Int64, trigger: AsyncStream<Void>.Continuation) async {
        let options = directory.options
        let connection = directory.remote.connection
        let container = directory.remote.container
        var cursor = start
        var backoff = Duration.seconds(1)
        while !Task.isCancelled {
            if let reset = await takeFeedReset() { cursor = reset }
            do {
                let list = try await connection.changes(container: container, after: cursor, wait: options.feedWait)
                if SyncWatchSteps.feedCallsForPass(list) { trigger.yield(()) }
                cursor = list.cursor
                backoff = .seconds(1)
            } catch let error as XferError where error.code == .cancelled {
                return
            } catch {
                try? await Task.sleep(for: backoff)
                backoff = SyncWatchSteps.backoff(after: backoff, maximum: options.maximumBackoff)
                trigger.yield(())
            }
        }
    }

    /// Rescans: everything on a slow period, and often where inotify could not watch (said once).
    private nonisolated func rescan(_ watcher: DirectoryWatcher, trigger: AsyncStream<Void>.Continuation) async throws {
        let options = directory.options
        var told = false
        var sinceFull = Duration.zero
        while !Task.isCancelled {
            let unwatched = watcher.unwatched.withLock { $0 }
            if !unwatched.isEmpty && !told, let first = unwatched.sorted(by: { $0.key < $1.key }).first {
                told = true
                continuation.yield(.watchLimited(count: unwatched.count, example: first.key, reason: first.value))
            }
            let period = SyncWatchSteps.rescanPeriod(
                unwatched: !unwatched.isEmpty, rescan: options.rescanInterval,
                unwatchedRescan: options.unwatchedRescanInterval)
            try await Task.sleep(for: period)
            sinceFull += period
            if SyncWatchSteps.rescansNow(
                unwatched: !unwatched.isEmpty, sinceFull: sinceFull, rescan: options.rescanInterval)
            {
                sinceFull = .zero
                trigger.yield(())
            }
        }
    }

    /// A pass per trigger, debounced; a failed one is retried after a backoff, or ends the
    /// round (``SyncWatchSteps/afterFailure(_:)``).
    private nonisolated func runPasses(_ triggers: AsyncStream<Void>, trigger: AsyncStream<Void>.Continuation)
        async throws
    {
        let options = directory.options
        var backoff = Duration.seconds(1)
        // The pass that follows files held back for the quiet period, once it has passed: one
        // at a time (a later pass's wait replaces it), ended with the loop.
        var quietPass: Task<Void, Never>? = nil
        defer { quietPass?.cancel() }
        for await _ in triggers {
            try await Task.sleep(for: options.debounce)
            do {
                try await syncOnce()
                backoff = .seconds(1)
                if let wait = await takeQuietWait() {
                    quietPass?.cancel()
                    quietPass = Task {
                        try? await Task.sleep(for: wait)
                        if !Task.isCancelled { trigger.yield(()) }
                    }
                }
            } catch {
                switch SyncWatchSteps.afterFailure(error) {
                case .offline:
                    continuation.yield(
                        .offline(error as? XferError ?? XferError(.unavailable, "\(error)"), retryIn: backoff))
                case .watchAfresh:
                    continuation.yield(.folderMissing((error as? XferError)?.message ?? "\(error)"))
                    throw WatchAfresh(folderMissingSaid: true)
                case .stop:
                    throw error is CancellationError ? CancellationError() : error
                case .retry:
                    continuation.yield(.passFailed(error as? XferError ?? XferError(.io, "\(error)"), retryIn: backoff))
                }
                try await Task.sleep(for: backoff)
                backoff = SyncWatchSteps.backoff(after: backoff, maximum: options.maximumBackoff)
                trigger.yield(())
            }
        }
    }
}
