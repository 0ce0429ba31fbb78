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
    var health = SyncHealth()
    /// Set when a pass found a replaced server: the change feed's new starting point.
    var feedReset: Int64?
    /// Whether passes hold back files changed within the quiet period (while watching).
    var holdsRecentChanges = false
    /// How long until the youngest file a pass held back has been quiet long enough.
    var quietWait: Duration?
    /// When the container's key was last checked with the server: once for a plain container;
    /// at most ``keyCheckInterval`` apart for an encrypted one, whose key a member's removal
    /// rotates (new data is then sealed under the new key from the next pass on).
    var keyCheckedAt: ContinuousClock.Instant? = nil
    /// How long an encrypted container's key is taken as checked.
    static let keyCheckInterval = Duration.seconds(60)

    /// Takes how long until held-back files may go, if the last pass held any.
    func takeQuietWait() -> Duration? {
        defer { quietWait = nil }
        return quietWait
    }

    /// Takes the feed's new starting point, if a pass set one.
    func takeFeedReset() -> Int64? {
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
    func noteFailure(_ error: any Error, phase: SyncHealth.Phase) {
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

    /// Small documents per batch push or pull: big enough that requests are few, small enough
    /// that a pass reports progress and keeps its memory bounded.
    static let pushBatch = 500
}
