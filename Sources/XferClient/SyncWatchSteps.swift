import XferCore
import XferProtocol

/// What a watching ``SyncEngine`` decides between passes: what a failed pass leads to, how the
/// backoff grows, when the tree is rescanned and when the change feed calls for a pass. Pure,
/// tested without a server or a disk; ``SyncEngine/watch()`` acts on it.
enum SyncWatchSteps {
    /// What follows a pass that threw.
    enum AfterFailure: Equatable {
        /// The server is unreachable: said as offline, retried after the backoff.
        case offline
        /// The folder is gone or unmounted: nothing is decided; it is waited for and watched
        /// afresh (its watches died with it).
        case watchAfresh
        /// A refused token or cancellation: watching ends.
        case stop
        /// Anything else (a state write that failed, a server error): said, recorded for
        /// `xfer status`, and retried after the backoff; the daemon does not stop.
        case retry
    }

    /// What follows a pass that threw `error`.
    static func afterFailure(_ error: any Error) -> AfterFailure {
        if error is CancellationError { return .stop }
        guard let error = error as? XferError else { return .retry }
        switch error.code {
        case .unavailable: return .offline
        case .folderMissing: return .watchAfresh
        case .cancelled, .unauthorized: return .stop
        default: return .retry
        }
    }

    /// The wait before the next try after another failure: doubled, up to `maximum`.
    static func backoff(after wait: Duration, maximum: Duration) -> Duration {
        min(wait * 2, maximum)
    }

    /// How long the rescanner sleeps: the slow period, or the unwatched one (if shorter) while
    /// inotify could not watch some directories.
    static func rescanPeriod(unwatched: Bool, rescan: Duration, unwatchedRescan: Duration) -> Duration {
        unwatched ? min(unwatchedRescan, rescan) : rescan
    }

    /// Whether the rescanner calls for a pass: every period while some directories are not
    /// watched, else once `sinceFull` reaches the slow period.
    static func rescansNow(unwatched: Bool, sinceFull: Duration, rescan: Duration) -> Bool {
        unwatched || sinceFull >= rescan
    }

    /// Whether an answer of the change feed calls for a pass: it carries changes or keys.
    static func feedCallsForPass(_ list: ChangeList) -> Bool {
        !list.changes.isEmpty || !list.keys.isEmpty
    }
}
