import Foundation
import XferCore
import XferProtocol

/// A document the server changed after the pass read its view: left for the next pass.
struct ChangedSinceListed: Error {}

/// How a synced directory is kept.
public struct SyncOptions: Sendable {
    /// Directory name extensions that make a directory one package document (without the dot).
    public var packageExtensions: Set<String> = ["pkg", "bundle", "rtfd", "xfpkg"]
    /// Keep the local data of synced documents under this many bytes, evicting the least
    /// recently used first (never one with unsynced changes); `nil`: no limit.
    public var localLimit: Int64? = nil
    /// Quiet time after a local change before a pass starts (`--watch`).
    public var debounce: Duration = .milliseconds(150)
    /// `--watch`: a file changed less than this long ago is not pushed yet; it goes once it has
    /// been left alone this long (a pass is started for it then). Lock and temporary files that
    /// live for less (`.git/index.lock`, an editor's swap file) never travel. `--quiet-period`.
    public var quietPeriod: Duration = .milliseconds(200)
    /// Seconds one change-feed request waits for a change (`--watch`).
    public var feedWait = 30
    /// Longest wait between retries while the server is unreachable.
    public var maximumBackoff: Duration = .seconds(30)
    /// How often a watch looks again for a folder found missing (``SyncEvent/folderMissing(_:)``).
    public var folderCheckInterval: Duration = .seconds(5)
    /// Push tuning.
    public var push = PushOptions()
    /// Pull tuning (`force` is always off: a local edit is never replaced).
    public var pull = PullOptions()
    /// Let a pass delete more than ``MassDeletion`` allows (`xfer sync --allow-mass-delete`).
    public var allowMassDelete = false
    /// Days what sync deletes or replaces here is kept in the directory's trash (``Trash``).
    public var trashDays = 30
    /// `--watch`: look at everything again this often, to catch what inotify missed.
    public var rescanInterval: Duration = .seconds(300)
    /// `--watch`: how often to look again where inotify could not watch (the per-user limit).
    public var unwatchedRescanInterval: Duration = .seconds(30)
    /// `--watch`: watch at most this many directories with inotify (`nil`: as many as the
    /// kernel allows); the rest are rescanned every ``unwatchedRescanInterval``.
    public var maximumWatches: Int? = nil
    /// After a full listing, bring the server's view up to date from the change feed instead
    /// of listing every document again each pass (docs/SYNC.md, "Following the feed").
    public var followFeed = true
    /// List everything again at least this often, whatever the feed says.
    public var fullListingInterval: Duration = .seconds(3600)
    /// Extra ignore patterns (gitignore syntax, relative to the directory), as if appended to
    /// its root `.xferignore` (`--exclude`). Ignored paths are neither pushed nor pulled nor
    /// deleted (docs/SYNC.md, "Ignored files").
    public var exclude: [String] = []
    /// What this device holds, used instead of the directory's own and not kept (`xfer sync
    /// --dry-run` with selection flags); `nil`: the directory's (``SyncState/selection()``).
    public var selection: SyncSelection? = nil

    /// Defaults.
    public init() {}
}

/// What the sync engine tells the program embedding it.
public enum SyncEvent: Sendable {
    /// A local change went to the server as `version`.
    case uploaded(DocumentPath, version: Int64, bytesSent: Int64)
    /// A remote change was put in place locally.
    case downloaded(DocumentPath, version: Int64, bytesFetched: Int64)
    /// A document deleted on the server was removed here.
    case removedLocally(DocumentPath)
    /// A document deleted here was deleted on the server.
    case removedRemotely(DocumentPath)
    /// This device's selection left the document out: its local copy went to the trash, the
    /// server keeps it.
    case leftOut(DocumentPath)
    /// The document has unresolved conflict versions: `current` is in place, `conflicts` are
    /// kept on the server until resolved (``DocumentClient/resolve(_:keep:keepAll:)``).
    case conflict(DocumentPath, current: Int64, conflicts: [Int64])
    /// A document's local data was evicted to stay under the local limit.
    case evicted(DocumentPath)
    /// A transfer is under way.
    case progress(DocumentPath, TransferProgress)
    /// The server is unreachable; local changes are kept and a pass is retried.
    case offline(XferError, retryIn: Duration)
    /// A pass failed for another reason (under ``SyncEngine/watch()``, which goes on): it is
    /// retried after `retryIn`, the delay doubling while it keeps failing.
    case passFailed(XferError, retryIn: Duration)
    /// The synced folder's root is gone, unmounted or not the folder that was synced
    /// (``SyncDirectory/checkFolder(create:)``): nothing is decided until it is back. Said once
    /// per absence; ``SyncEngine/watch()`` waits for it.
    case folderMissing(String)
    /// One document failed (the others went on); the next pass tries again.
    case failed(DocumentPath?, XferError)
    /// The local tree moved under this document while the pass read it (it vanished, or was
    /// written while it was read): nothing was committed for it, and the next pass tries again.
    case retrying(DocumentPath, String)
    /// The server at the directory's URL is not the one it synced with (another deployment, or
    /// one whose history is older than what was seen). Nothing is deleted on its word: local
    /// documents are uploaded again and missing ones downloaded (``SyncDirectory/notices()``).
    case serverChanged(String)
    /// The pass would have deleted this many documents here (`local`) or on the server
    /// (`remote`) out of the `total` the directory holds: more than ``MassDeletion`` allows,
    /// so none of them was deleted. `xfer sync --allow-mass-delete` lets them go.
    case deletionsHeld(local: Int, remote: Int, total: Int)
    /// End to end: the server lists `count` names that do not open under the container's key
    /// (damaged on the server, or written without the key). One of them may be a document held
    /// here, so the `deletionsHeld` documents missing from the listing were kept, not deleted;
    /// `xfer verify --documents` names what is wrong. Said each pass until they are gone.
    case namesUnopened(count: Int, deletionsHeld: Int)
    /// The server shows `path` current at version `server`, older than version `seen` it showed
    /// this device: rolled back (end to end). This device's copy is kept; the pass goes on.
    case rolledBack(DocumentPath, server: Int64, seen: Int64)
    /// inotify could not watch `count` directories (the first is `example`) for `reason`
    /// (raise `fs.inotify.max_user_watches`); changes there are found by a rescan every
    /// ``SyncOptions/unwatchedRescanInterval`` instead. Said once per watch.
    case watchLimited(count: Int, example: String, reason: String)
    /// A pass ended.
    case passFinished(SyncSummary)
}

/// What one pass did.
public struct SyncSummary: Codable, Sendable, Hashable {
    /// Documents pushed (directories aside).
    public var uploaded = 0
    /// Documents pulled (directories aside).
    public var downloaded = 0
    /// Documents removed locally because they were deleted on the server (directories aside).
    public var removedLocally = 0
    /// Documents deleted on the server because they were deleted here (directories aside).
    public var removedRemotely = 0
    /// Directories made, changed or removed, here or on the server.
    public var directories = 0
    /// Documents with unresolved conflicts.
    public var conflicts = 0
    /// Documents evicted for the local limit.
    public var evicted = 0
    /// Documents that failed.
    public var failed = 0
    /// Documents the server showed older than this device saw them (end to end): kept here.
    public var rolledBack = 0
    /// Documents, chunks and names that failed their check (an authentication tag, a digest):
    /// what the server sent was not what a device wrote.
    public var unverified = 0
    /// Documents the local tree changed under while they were read: left for the next pass.
    public var retried = 0
    /// Files changed too recently to push (``SyncOptions/quietPeriod``, `--watch` only): pushed
    /// by a later pass once they have been left alone.
    public var waiting = 0
    /// Deletions held back by the mass-deletion rule.
    public var deletionsHeld = 0
    /// Local copies moved to the trash because this device's selection left them out (the
    /// server keeps them).
    public var leftOut = 0
    /// Payload bytes uploaded.
    public var bytesSent: Int64 = 0
    /// Payload bytes downloaded.
    public var bytesFetched: Int64 = 0
    /// Wall-clock seconds.
    public var seconds = 0.0
    /// The pass only confirmed that nothing changed on either side since the last pass that
    /// found nothing to do (the change feed empty, every file's stamp the recorded one), without
    /// planning each document (docs/SYNC.md, "Following the feed").
    public var confirmed = false

    /// Nothing.
    public init() {}
}

/// What one sync pass would do (`xfer sync --dry-run`, ``SyncDirectory/preview()``).
public struct SyncPreview: Codable, Sendable, Hashable {
    /// One action.
    public struct Step: Codable, Sendable, Hashable {
        /// Its kind.
        public enum Action: String, Codable, Sendable {
            /// Push the local document.
            case upload
            /// Pull the server's version over (or beside nothing) here.
            case download
            /// Remove the local copy (deleted on the server); it goes to the trash.
            case deleteLocal = "delete_local"
            /// Delete the server's document (deleted here).
            case deleteRemote = "delete_remote"
            /// The server keeps unresolved conflict versions of it (`xfer versions`).
            case conflict
            /// A deletion the mass-deletion rule holds back.
            case held
            /// Not synced (not a valid document name).
            case skipped
            /// Left out of this device's selection: the local copy goes to the trash, the
            /// server keeps the document.
            case exclude
        }

        /// What would be done.
        public var action: Action
        /// The document's path.
        public var path: String
        /// File or package.
        public var kind: DocumentKind
        /// Why, in words.
        public var reason: String
    }

    /// The directory.
    public var directory: String
    /// Set when the server is not the one the directory synced with (then nothing is deleted).
    public var serverChanged: String?
    /// Every action, by path.
    public var steps: [Step]
}

/// Where a document of a synced directory stands.
public enum DocumentSyncState: String, Codable, Sendable, Hashable {
    /// The same here and on the server.
    case synced
    /// Changed (or created, or deleted) here; the next pass pushes it.
    case pendingUpload = "pending_upload"
    /// Changed (or created, or deleted) on the server; the next pass pulls it.
    case pendingDownload = "pending_download"
    /// The server keeps unresolved conflict versions of it.
    case conflict
    /// Listed, with its data on the server only (`xfer fetch` brings it back).
    case evicted
    /// The server shows an older version than it showed this device (an end-to-end encrypted
    /// container rolled back): this device's copy is kept and nothing is synced for it.
    case rolledBack = "rolled_back"
    /// Left out of this device's selection (`xfer sync --only`, `--exclude-path`,
    /// `--no-new-folders`): not downloaded here, kept on the server.
    case excluded
}

/// One line of `xfer status`.
public struct DocumentStatus: Codable, Sendable, Hashable {
    /// The document's path.
    public var path: String
    /// Where it stands.
    public var state: DocumentSyncState
    /// File or package.
    public var kind: DocumentKind
    /// Content bytes (as last known).
    public var size: Int64
    /// Modification time (as last known), nanoseconds.
    public var mtimeNs: Int64
    /// The version this directory holds.
    public var localVersion: Int64?
    /// The server's current version (absent when unknown or deleted).
    public var remoteVersion: Int64?
    /// Unresolved conflict versions on the server.
    public var conflicts: [Int64]
}

/// The rule that stops a pass from deleting much at once: more than 50 documents and more
/// than a third of those the directory holds, here or on the server. A server that lost its
/// data, a folder whose disk was not mounted, a wrong `--data`: each looks like "everything was
/// deleted", and none should be acted on without the user's word.
public enum MassDeletion {
    /// More deletions than this are never automatic ...
    public static let minimumCount = 50
    /// ... when they are also more than this share of the documents held.
    public static let share = 1.0 / 3.0

    /// Whether deleting `count` of `total` documents is a mass deletion.
    public static func isMass(_ count: Int, of total: Int) -> Bool {
        count > minimumCount && Double(count) > share * Double(total)
    }

    /// How many local and remote deletions to hold back among planned actions (each with
    /// whether the directory holds a synced version of it), and of how many documents.
    static func held(_ plans: [(action: SyncDirectory.Action, synced: Bool)], allowed: Bool) -> (
        local: Int, remote: Int, total: Int
    ) {
        let total = plans.filter(\.synced).count
        let local = plans.filter { $0.action == .deleteLocal }.count
        let remote = plans.filter { $0.action == .deleteRemote }.count
        guard !allowed else { return (0, 0, total) }
        return (isMass(local, of: total) ? local : 0, isMass(remote, of: total) ? remote : 0, total)
    }
}
