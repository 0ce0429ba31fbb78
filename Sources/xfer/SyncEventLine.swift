import XferClient
import XferCore
import XferProtocol

/// One sync event as JSON (`xfer sync --json`, one object per line).
struct SyncEventLine: Encodable {
    var event: String
    var path: String?
    var version: Int64?
    var bytes: Int64?
    var conflicts: [Int64]?
    var message: String?
    var summary: SyncSummary?

    init?(_ event: SyncEvent) {
        switch event {
        case .uploaded(let path, let version, let bytes):
            self.event = "uploaded"
            self.path = path.value
            self.version = version
            self.bytes = bytes
        case .downloaded(let path, let version, let bytes):
            self.event = "downloaded"
            self.path = path.value
            self.version = version
            self.bytes = bytes
        case .removedLocally(let path):
            self.event = "removed_locally"
            self.path = path.value
        case .removedRemotely(let path):
            self.event = "removed_remotely"
            self.path = path.value
        case .leftOut(let path):
            self.event = "left_out"
            self.path = path.value
        case .evicted(let path):
            self.event = "evicted"
            self.path = path.value
        case .conflict(let path, let current, let conflicts):
            self.event = "conflict"
            self.path = path.value
            self.version = current
            self.conflicts = conflicts
        case .failed(let path, let error):
            self.event = "failed"
            self.path = path?.value
            self.message = error.message
        case .retrying(let path, let message):
            self.event = "retry"
            self.path = path.value
            self.message = message
        case .passFailed(let error, _):
            self.event = "pass_failed"
            self.message = error.message
        case .folderMissing(let message):
            self.event = "folder_missing"
            self.message = message
        case .offline(let error, _):
            self.event = "offline"
            self.message = error.message
        case .serverChanged(let reason):
            self.event = "server_changed"
            self.message = reason
        case .watchLimited(let count, let example, let reason):
            self.event = "watch_limited"
            self.path = example
            self.message = "\(count) directories not watched: \(reason)"
        case .namesUnopened(let count, let held):
            self.event = "names_unopened"
            self.message = Xfer.Sync.unopenedMessage(count: count, held: held)
        case .rolledBack(let path, let server, let seen):
            self.event = "rolled_back"
            self.path = path.value
            self.version = server
            self.message = "the server shows v\(server), older than v\(seen) it showed this device"
        case .deletionsHeld(let local, let remote, let total):
            self.event = "deletions_held"
            self.message = "\(local) local and \(remote) remote deletions of \(total) documents held back"
        case .passFinished(let summary):
            self.event = "pass"
            self.summary = summary
        case .progress: return nil
        }
    }
}
