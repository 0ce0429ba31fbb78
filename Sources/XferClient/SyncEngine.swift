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
    /// Documents the local tree changed under while they were read: left for the next pass.
    public var retried = 0
    /// Files changed too recently to push (``SyncOptions/quietPeriod``, `--watch` only): pushed
    /// by a later pass once they have been left alone.
    public var waiting = 0
    /// Deletions held back by the mass-deletion rule.
    public var deletionsHeld = 0
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

/// A synced directory without its lock: scanning, planning, status, evict and fetch. The
/// ``SyncEngine`` runs passes over it; `xfer status`, `evict` and `fetch` use it directly
/// (they are safe while a daemon runs: each step is one state transaction).
public final class SyncDirectory: Sendable {
    /// The directory (absolute).
    public let directory: String
    let remote: Remote
    let options: SyncOptions
    /// Its state.
    public let state: SyncState

    /// Opens a synced directory bound to `remote`'s server and container (binding it on first
    /// use unless `bind` is false, as for a dry run, which records nothing).
    /// - Throws: `conflict` if it is bound to others, `not_found` if it is not a directory.
    public init(directory: String, remote: Remote, options: SyncOptions = SyncOptions(), bind: Bool = true) throws {
        var info = stat()
        guard stat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw XferError(.notFound, "\(directory) is not a directory; create it first")
        }
        state = try SyncState(directory: directory, stateDirectory: remote.stateDirectory)
        self.directory = state.directory
        self.remote = remote
        self.options = options
        if bind {
            try state.bind(server: remote.connection.server, container: remote.container)
        } else {
            _ = try state.isBound(server: remote.connection.server, container: remote.container)
        }
    }

    // MARK: Looking

    /// The marker at the root of every synced folder (as Syncthing's `.stfolder`): a folder
    /// without it that holds none of its synced documents is taken for an unmounted or lost
    /// one, never for "the user deleted everything".
    public static let markerName = ".xfer-folder"

    /// Checks the root is there and is the folder that was synced, before anything is decided
    /// from its contents. A removed folder, an unmounted mount point (an empty directory where
    /// the files were) or another folder put in its place deletes nothing, here or on the server.
    /// - Parameter create: Writes the marker where it is missing and that is safe: nothing was
    ///   synced here yet, or the folder still holds a document synced here (a folder synced by
    ///   an older xfer, or a marker removed by hand). `false` only checks (dry runs, status).
    /// - Throws: `folder_missing`.
    public func checkFolder(create: Bool = true) throws {
        var info = stat()
        guard lstat(directory, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else {
            throw XferError(.folderMissing, "the synced folder \(directory) is gone (or not mounted); nothing was deleted here or on the server. Put it back (or mount it) and sync again")
        }
        let marker = directory + "/" + Self.markerName
        if access(marker, F_OK) == 0 { return }
        let synced = try state.syncedVersions(server: remote.connection.server, container: remote.container)
        // A directory's name ("Documents") is no evidence: another folder may well have one too.
        let records = synced.isEmpty ? [:] : try state.records()
        guard synced.isEmpty || synced.keys.contains(where: {
            records[$0]?.kind != .directory && access(directory + "/" + $0, F_OK) == 0
        }) else {
            throw XferError(.folderMissing, "\(directory) holds none of the \(synced.count) documents synced there and no \(Self.markerName) marker: it looks like an empty mount point or another folder, so nothing was deleted. If you did remove them all and want that synced, create the marker (touch \(marker)) and sync again")
        }
        guard create else { return }
        let text = Array("""
            This folder is synced by xfer (\(remote.connection.server), container \(remote.container)).
            Leave this file here: without it, and without the files synced here, xfer takes the
            folder for an unmounted or lost one and stops rather than delete anything.

            """.utf8)
        let fd = open(marker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard fd >= 0 else {
            if errno == EEXIST { return }
            throw XferError(.io, "cannot create \(marker)", cause: SystemErrno(errno))
        }
        defer { close(fd) }
        _ = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }

    /// A local document: its kind and absolute path.
    struct LocalDocument {
        var kind: DocumentKind
        var path: String
        /// A regular file's stamp as the scan saw it (`nil` for symlinks and packages).
        var stamp: FileStamp? = nil
        /// A directory's permission bits as the scan saw them.
        var mode: UInt32 = 0
        /// Its document path (checked once, by the scan).
        var document: DocumentPath? = nil
    }

    /// Names the engine never syncs wherever they are: its own staging copies and the built-in
    /// defaults (``IgnoreRules/defaultPatterns``). `.xferignore` files can add more.
    /// - Parameter name: A file name.
    /// - Returns: Whether the defaults ignore it.
    public static func isIgnored(_ name: String) -> Bool {
        IgnoreRules.defaults.isIgnoredItself(name, isDirectory: false)
    }

    /// Every document on disk that is not ignored: files and symlinks, and directories with a
    /// package extension; ignored directories are not entered. Also the names that are not
    /// valid document paths, the ignore rules read on the way (every `.xferignore` outside
    /// packages, `options.exclude`, the defaults), and what could not be read. A name that
    /// vanishes while it is scanned is simply not there; one that cannot be read for another
    /// reason (a directory made unreadable, an I/O error) is in `unreadable`, and nothing under
    /// it may be decided absent (docs/SYNC.md, "A tree that changes while it is read").
    /// - Parameter expected: About how many documents there are (the state's count), so the
    ///   table of them is sized once instead of grown step by step.
    func scanLocal(expected: Int = 0) -> (documents: [String: LocalDocument], invalid: [String], ignore: IgnoreRules, unreadable: [String: String]) {
        var documents: [String: LocalDocument] = [:]
        documents.reserveCapacity(expected + expected / 8)
        let (invalid, rules, unreadable) = walkLocal { key, document in
            documents[key] = document
            return true
        }
        return (documents, invalid, rules, unreadable)
    }

    /// Walks the directory as a pass sees it (ignore rules, packages, names that are not valid
    /// documents, what cannot be read), handing each local document to `found`, which returns
    /// whether to go on. The one walk every reading of the tree uses.
    func walkLocal(_ found: (String, LocalDocument) -> Bool) -> (invalid: [String], ignore: IgnoreRules, unreadable: [String: String]) {
        var invalid: [String] = []
        var unreadable: [String: String] = [:]
        var rules = IgnoreRules(exclude: options.exclude)
        var going = true
        func visit(_ relative: String) {
            let absolute = relative.isEmpty ? directory : directory + "/" + relative
            rules.load(directory: absolute, as: relative)
            let names: [String]
            do {
                names = try FileSystem.list(absolute)
            } catch let error as XferError {
                if !error.isVanished || relative.isEmpty { unreadable[relative] = error.cause.map { "\($0)" } ?? error.message }
                return
            } catch {
                unreadable[relative] = "\(error)"
                return
            }
            // Each name is looked at relative to its directory: the kernel walks one component,
            // not the whole path, per file.
            let directoryFD = open(absolute, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            defer { if directoryFD >= 0 { close(directoryFD) } }
            for name in names where going {
                let child = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                let looked = directoryFD >= 0 ? fstatat(directoryFD, name, &info, AT_SYMLINK_NOFOLLOW) : lstat(absolute + "/" + name, &info)
                guard looked == 0 else {
                    let err = errno
                    if !SystemErrno.vanished(err) { unreadable[child] = SystemErrno(err).description }
                    continue
                }
                let type = info.st_mode & S_IFMT
                guard !rules.isIgnoredItself(child, isDirectory: type == S_IFDIR) else { continue }
                let isPackage = type == S_IFDIR && options.packageExtensions.contains((name as NSString).pathExtension.lowercased())
                guard type == S_IFREG || type == S_IFLNK || type == S_IFDIR else { continue }
                guard let path = try? DocumentPath(child), path.value == child else {
                    invalid.append(child)
                    continue
                }
                // A directory is a document of its own (its name and mode), and what is in it
                // is walked: empty directories travel too.
                let kind: DocumentKind = type == S_IFDIR ? (isPackage ? .package : .directory) : .file
                going = found(path.value, LocalDocument(kind: kind, path: absolute + "/" + name,
                                                        stamp: type == S_IFREG ? FileStamp(info) : nil,
                                                        mode: UInt32(info.st_mode) & 0o777, document: path))
                if going && kind == .directory { visit(child) }
            }
        }
        visit("")
        return (invalid, rules, unreadable)
    }

    /// Whether `path` is, or lies under, one of `unreadable`'s paths.
    static func isUnder(_ path: String, _ unreadable: [String: String]) -> Bool {
        guard !unreadable.isEmpty else { return false }
        if unreadable[""] != nil || unreadable[path] != nil { return true }
        var end = path.endIndex
        while let slash = path[..<end].lastIndex(of: "/") {
            if unreadable[String(path[..<slash])] != nil { return true }
            end = slash
        }
        return false
    }

    /// What a pass should do with one document, and how it stands meanwhile.
    enum Action: Equatable {
        case none, push, pull, deleteRemote, deleteLocal, forget
    }

    struct Plan {
        var path: DocumentPath
        var action: Action
        var status: DocumentStatus?
        var local: LocalDocument?
        /// The version this directory holds.
        var synced: Int64?
        var remote: DocumentInfo?

        /// Whether it is a directory document here or on the server.
        var isDirectory: Bool { local?.kind == .directory || (local == nil && remote?.kind == .directory) }
    }

    /// Plans every document. `remote` is the server's listing, or `nil` when it is unreachable
    /// (then nothing that needs the server's view is decided).
    /// - Returns: The plans, and the local names that are not valid document paths (skipped).
    func plan(remote listing: [String: DocumentInfo]?, forgetSynced: Bool = false) throws
        -> (plans: [Plan], invalid: [String], unreadable: [String: String]) {
        let records = try state.records()
        var (local, invalid, ignore, unreadable) = scanLocal(expected: records.count)
        // The namespace is a tree (docs/PROTOCOL.md, "Names"): a server that lists a document
        // inside another is not followed there; the inner one is skipped and reported.
        var listing = listing
        if let documents = listing {
            for (key, info) in documents where info.path.ancestors.contains(where: { documents[$0].map { !$0.kind.holdsDocuments } ?? false }) {
                listing?[key] = nil
                invalid.append(key)
            }
        }
        let server = remote.connection.server
        let versions = forgetSynced ? [:] : try state.syncedVersions(server: server, container: remote.container)
        var paths = Set(local.keys).union(records.keys)
        if let listing { paths.formUnion(listing.keys) }
        // An ignored path is left alone both ways: never pushed, pulled, or deleted here or
        // there; its record stays for when it is no longer ignored (docs/SYNC.md, "Ignored files").
        paths = paths.filter { key in
            local[key] != nil || !ignore.isIgnored(key, isDirectory: [.package, .directory].contains(listing?[key]?.kind ?? records[key]?.kind))
        }
        let plans: [Plan] = try paths.sorted().compactMap { key in
            guard let path = local[key]?.document ?? listing?[key]?.path ?? (try? DocumentPath(key)) else { return nil }
            let synced = versions[key]
            let file = local[key]
            var changed = false
            if let file, let synced, file.kind == .directory {
                // A directory is its mode: the stamp recorded with its version says which.
                changed = synced.stamp != LocalSnapshot.directoryStamp(mode: file.mode)
            } else if let file, let synced {
                // A single file whose stamp is the one recorded with its version is unchanged
                // (size, mtime, inode and ctime: a write or a chmod moves ctime); anything else
                // is compared with the synced manifest.
                if file.stamp == nil || file.stamp?.text != synced.stamp {
                    let clientState = state.clientState(for: path)
                    let document = try clientState.document(server: server, container: remote.container, path: path)
                    do {
                        changed = try !LocalSnapshot(path: file.path, known: clientState.stamps()).isUnchanged(since: document, state: clientState)
                    } catch {
                        // Gone or unreadable since the scan: a push is planned, and that push
                        // says what happened to this document alone (the pass goes on).
                        changed = true
                    }
                }
            }
            let record = records[key]
            let info = listing?[key]
            var (action, state) = Self.decide(local: file != nil, changed: changed, synced: synced?.version,
                                              evicted: record?.evicted == true, remote: info, remoteKnown: listing != nil)
            if file == nil && Self.isUnder(key, unreadable) {
                // Not seen here is not known absent: nothing is deleted, pulled or forgotten
                // under a directory that could not be read.
                (action, state) = (.none, synced == nil ? .pendingDownload : .synced)
            }
            let status = DocumentStatus(path: key, state: state, kind: info?.kind ?? record?.kind ?? file?.kind ?? .file,
                                        size: info?.size ?? record?.size ?? 0, mtimeNs: info?.mtimeNs ?? record?.mtimeNs ?? 0,
                                        localVersion: synced?.version, remoteVersion: info?.state == .current ? info?.version : nil,
                                        conflicts: info?.conflicts ?? [])
            return Plan(path: path, action: action, status: action == .forget ? nil : status, local: file, synced: synced?.version, remote: info)
        }
        return (plans.map(keepingIgnoredFiles), invalid, unreadable)
    }

    /// The decision table (docs/SYNC.md): a local edit is pushed (the server settles a stale
    /// base as a conflict), a remote change is pulled over an unchanged local copy, deletes
    /// travel both ways, and a remote edit wins over a local delete.
    static func decide(local: Bool, changed: Bool, synced: Int64?, evicted: Bool, remote: DocumentInfo?,
                       remoteKnown: Bool) -> (Action, DocumentSyncState) {
        let current = remote?.state == .current ? remote : nil
        let settled: DocumentSyncState = remote?.conflicts?.isEmpty == false ? .conflict : .synced
        if evicted && !local {
            if remoteKnown && remote == nil { return (.forget, .synced) }
            return (.none, .evicted)
        }
        if local {
            if synced == nil || changed { return (.push, .pendingUpload) }
            guard remoteKnown else { return (.none, .synced) }
            if let current, current.version != synced { return (.pull, .pendingDownload) }
            if remote == nil { return (.deleteLocal, .pendingDownload) }
            return (.none, settled)
        }
        guard remoteKnown else { return (.none, synced == nil ? .pendingDownload : .pendingUpload) }
        if let synced {
            if let current, current.version != synced { return (.pull, .pendingDownload) }
            if current != nil { return (.deleteRemote, .pendingUpload) }
            if remote == nil { return (.forget, .synced) }
            return (.none, .pendingDownload)
        }
        if current != nil { return (.pull, .pendingDownload) }
        // A record of a document held nowhere (neither here nor on the server, no version
        // synced: left after a server change) is dropped, not shown pending forever.
        if remote == nil { return (.forget, .synced) }
        return (.none, .pendingDownload)
    }

    /// One pass's plans over `listing`, with the deletions the mass-deletion rule holds back
    /// set apart. Decides only; changes nothing (``SyncEngine/syncOnce()`` acts on it, and
    /// ``preview()`` prints it).
    struct PassPlan {
        /// What to do, held deletions left out.
        var plans: [Plan]
        /// The deletions held back.
        var held: [Plan]
        /// How many local and remote deletions are held, of how many documents.
        var heldCounts: (local: Int, remote: Int, total: Int)
        /// Local names that are not valid document paths (skipped).
        var invalid: [String]
        /// Local paths that could not be read, with why: nothing under them was decided.
        var unreadable: [String: String] = [:]
    }

    /// Plans a pass. `serverChanged`: the server is not the one this directory synced with,
    /// so no document counts as synced and nothing can be decided deleted.
    func planPass(_ listing: Listing, serverChanged: Bool) throws -> PassPlan {
        let (all, invalid, unreadable) = try plan(remote: listing.documents, forgetSynced: serverChanged)
        // Removing a directory loses nothing (it goes only when empty): the rule counts the rest.
        func counted(_ plan: Plan) -> Action { plan.isDirectory ? .none : plan.action }
        var held = MassDeletion.held(all.map { (counted($0), $0.synced != nil) }, allowed: options.allowMassDelete)
        // A deletion that is half of a move loses nothing: it is not what the rule guards against.
        var moved = Set<DocumentPath>()
        if held.local > 0 || held.remote > 0 {
            moved = try moves(all)
            held = MassDeletion.held(all.map { (moved.contains($0.path) ? .none : counted($0), $0.synced != nil) },
                                     allowed: options.allowMassDelete)
        }
        func isHeld(_ plan: Plan) -> Bool {
            guard !moved.contains(plan.path) else { return false }
            return (held.local > 0 && plan.action == .deleteLocal) || (held.remote > 0 && plan.action == .deleteRemote)
        }
        return PassPlan(plans: all.filter { !isHeld($0) }, held: all.filter(isHeld), heldCounts: held, invalid: invalid,
                        unreadable: unreadable)
    }

    /// The deletions that are one half of a move (a renamed directory): the content goes on
    /// under another name, so the mass-deletion rule does not count them. Gone here: the same
    /// file (inode, size, modification time) is here under another name. Deleted on the server:
    /// a current document there has the very manifest (content, mode and time) of the version
    /// held here. Either may have arrived in an earlier pass (a rename seen half way).
    func moves(_ plans: [Plan]) throws -> Set<DocumentPath> {
        var moved = Set<DocumentPath>()
        func identity(_ stamp: FileStamp) -> String { "\(stamp.size):\(stamp.mtimeNanoseconds):\(stamp.inode)" }
        let arrivedHere = Set(plans.compactMap { plan -> String? in plan.local?.stamp.map(identity) })
        if !arrivedHere.isEmpty {
            let synced = try state.syncedVersions(server: remote.connection.server, container: remote.container)
            for plan in plans where plan.action == .deleteRemote {
                guard let text = synced[plan.path.value]?.stamp else { continue }
                if arrivedHere.contains(text.split(separator: ":").prefix(3).joined(separator: ":")) { moved.insert(plan.path) }
            }
        }
        let arrivedThere = Set(plans.compactMap { plan -> String? in
            plan.remote?.state == .current ? plan.remote?.manifestDigest : nil
        })
        if !arrivedThere.isEmpty {
            for plan in plans where plan.action == .deleteLocal {
                guard let held = try state.clientState(for: plan.path)
                    .document(server: remote.connection.server, container: remote.container, path: plan.path) else { continue }
                if arrivedThere.contains(held.manifest.digest.hex) { moved.insert(plan.path) }
            }
        }
        return moved
    }

    /// What one pass would do now, found without changing anything here or on the server
    /// (`xfer sync --dry-run`): the server is asked for its listing only, nothing is recorded.
    public func preview() async throws -> SyncPreview {
        try checkFolder(create: false)
        let listing = try await serverView()
        let change = try serverChange(listing)
        let pass = try planPass(listing, serverChanged: change != nil)
        var steps: [SyncPreview.Step] = pass.invalid.map {
            SyncPreview.Step(action: .skipped, path: $0, kind: .file, reason: "not a valid document name (docs/PROTOCOL.md, Names); not synced")
        }
        for plan in pass.plans {
            let kind = plan.local?.kind ?? plan.remote?.kind ?? plan.status?.kind ?? .file
            let current = plan.remote?.state == .current ? plan.remote?.version : nil
            switch plan.action {
            case .push:
                var reason = plan.synced == nil ? "new here" : "changed here since v\(plan.synced!)"
                if let current, current != plan.synced {
                    reason += "; the server has v\(current): both are kept, the later edit current and the other a conflict version"
                }
                steps.append(.init(action: .upload, path: plan.path.value, kind: kind, reason: reason))
            case .pull:
                let reason = plan.synced == nil ? "v\(current ?? 0) on the server, not here" : "v\(current ?? 0) on the server replaces v\(plan.synced!) here (kept in the trash)"
                steps.append(.init(action: .download, path: plan.path.value, kind: kind, reason: reason))
            case .deleteLocal:
                steps.append(.init(action: .deleteLocal, path: plan.path.value, kind: kind,
                                   reason: plan.isDirectory ? "deleted on the server; removed here once it is empty"
                                       : "deleted on the server; moved to the trash here" + (options.trashDays > 0 ? "" : " (no trash: --trash-days 0)")))
            case .deleteRemote:
                steps.append(.init(action: .deleteRemote, path: plan.path.value, kind: kind, reason: "deleted here"))
            case .none, .forget:
                break
            }
        }
        for plan in pass.held {
            steps.append(.init(action: .held, path: plan.path.value, kind: plan.status?.kind ?? .file,
                               reason: "\(plan.action == .deleteLocal ? "deleted on the server" : "deleted here"): held back, more than \(MassDeletion.minimumCount) deletions and a third of \(pass.heldCounts.total) documents (--allow-mass-delete lets them go)"))
        }
        for info in listing.documents.values where info.conflicts?.isEmpty == false && pass.plans.contains(where: { $0.path == info.path }) {
            steps.append(.init(action: .conflict, path: info.path.value, kind: info.kind,
                               reason: "v\(info.version) is current; conflict versions \((info.conflicts ?? []).map { "v\($0)" }.joined(separator: ", ")) are kept on the server"))
        }
        steps.sort { ($0.path, $0.action.rawValue) < ($1.path, $1.action.rawValue) }
        return SyncPreview(directory: directory, serverChanged: change, steps: steps)
    }

    /// Every document's status: with the server's view if it answers, else from local state
    /// alone (`reachable` false).
    public func status() async throws -> (documents: [DocumentStatus], reachable: Bool) {
        try checkFolder(create: false)
        let listing = try? await serverView()
        let changed = try listing.map { try serverChange($0) } ?? nil
        return (try plan(remote: listing?.documents, forgetSynced: changed != nil).plans.compactMap(\.status), listing != nil)
    }

    /// What the user should know about this directory's server: that it was found replaced,
    /// when, and what was done about it.
    public func notices() throws -> [String] {
        try state.meta("server_notice").map { [$0] } ?? []
    }

    /// The server's documents, by path, with the change-feed cursor they were read at and the
    /// server's deployment identity.
    struct Listing {
        var documents: [String: DocumentInfo]
        var cursor: Int64
        var deployment: String?
        /// The paths brought up to date from the change feed since the full listing this view
        /// grew from (`nil`: it is that full listing).
        var changed: Set<String>? = nil
        /// When that full listing was read, seconds since 1970.
        var listedAt = Date().timeIntervalSince1970
        /// Set when the server holds a version this directory saw with other content (see
        /// ``SyncDirectory/divergence(of:from:)``): why it is not the server it synced with.
        var divergence: String? = nil
    }

    /// The server's whole listing, every page read.
    func listing() async throws -> Listing {
        let list = try await remote.connection.list(container: remote.container, prefix: "")
        return Listing(documents: Dictionary(list.documents.map { ($0.path.value, $0) }, uniquingKeysWith: { $1 }),
                       cursor: list.cursor, deployment: list.deployment)
    }

    /// The meta key of the last settled pass: one that planned every document, found nothing
    /// to do and left nothing failed, held, waiting or in conflict ("CURSOR LISTED_AT"; empty
    /// once a pass that may change something has begun).
    static let settledKey = "settled"

    /// Whether nothing changed on either side since the last settled pass, found without
    /// planning (docs/SYNC.md, "Following the feed"): the change feed has nothing after that
    /// pass's cursor (same deployment, head not gone back), the full listing it grew from is
    /// younger than ``SyncOptions/fullListingInterval``, and the scan finds exactly the
    /// documents this directory holds versions of, each a single file whose stamp (size, mtime,
    /// inode, ctime) is the one recorded with its version, or a directory with the mode
    /// recorded with its version. Anything else (a symlink, a package,
    /// an evicted document, a name that cannot be read, a local limit) answers `false`, and
    /// the pass plans every document as usual.
    func nothingChanged() async throws -> Bool {
        guard options.followFeed, options.localLimit == nil,
              let settled = try state.meta(Self.settledKey)?.split(separator: " "), settled.count == 2,
              let cursor = Int64(settled[0]), let listedAt = Double(settled[1]),
              Date().timeIntervalSince1970 - listedAt < options.fullListingInterval.seconds,
              let deployment = try state.meta("deployment") else { return false }
        let page = try await remote.connection.changes(container: remote.container, after: cursor, wait: 0)
        guard page.deployment == deployment, page.changes.isEmpty, page.keys.isEmpty, !page.more,
              page.cursor == cursor, page.head == cursor else { return false }
        let versions = try state.syncedVersions(server: remote.connection.server, container: remote.container)
        var seen = 0
        var same = true
        let (invalid, _, unreadable) = walkLocal { key, document in
            // The first difference ends the walk: the pass plans instead.
            let stamp = document.kind == .directory ? LocalSnapshot.directoryStamp(mode: document.mode) : document.stamp?.text
            guard document.kind != .package, let stamp, let synced = versions[key], synced.stamp == stamp else {
                same = false
                return false
            }
            seen += 1
            return true
        }
        return same && invalid.isEmpty && unreadable.isEmpty && seen == versions.count
    }

    /// More changed paths than this since the kept view, and a pass lists everything instead.
    static let feedFollowLimit = 1000

    /// The server's documents for a pass: the view the last pass kept, brought up to date from
    /// the change feed (one request when nothing changed), when that is safe; else the whole
    /// listing. Safe means: a view was kept, it grew from a listing younger than
    /// ``SyncOptions/fullListingInterval``, the server is the same deployment and its history
    /// has not gone back past the view's cursor, and few paths changed. Either way the view
    /// is complete or this throws: a pass never decides from part of one.
    func serverView() async throws -> Listing {
        let kept = try state.remoteView()
        var view: Listing
        if options.followFeed, let kept,
           Date().timeIntervalSince1970 - kept.listedAt < options.fullListingInterval.seconds,
           let deployment = try state.meta("deployment"),
           let followed = try await following(Listing(documents: kept.documents, cursor: kept.cursor, deployment: deployment,
                                                      changed: [], listedAt: kept.listedAt)) {
            view = followed
        } else {
            view = try await listing()
        }
        if let kept { view.divergence = divergence(of: view, from: kept.documents) }
        return view
    }

    /// Why `view` cannot come from the history `kept` was read from, or `nil`: a document at
    /// the same version number with another manifest. Version numbers are never reused on one
    /// server, so that is a server restored from an older copy whose feed has since moved past
    /// the position this directory saw (the cursor alone cannot tell), or another server.
    func divergence(of view: Listing, from kept: [String: DocumentInfo]) -> String? {
        let paths = view.changed.map { Array($0) } ?? Array(view.documents.keys)
        for path in paths {
            // Committed versions only: an announced one that expired may see its number again.
            let committed: Set<VersionState> = [.current, .superseded, .conflict]
            guard let now = view.documents[path], let before = kept[path], now.version == before.version,
                  committed.contains(now.state), committed.contains(before.state),
                  let digest = now.manifestDigest, let seen = before.manifestDigest, digest != seen else { continue }
            return "the server at \(remote.connection.server) holds another version \(now.version) of \(path) than it did: it was restored from an older copy or replaced"
        }
        return nil
    }

    /// `view` brought up to date from the change feed: each path changed since its cursor is
    /// asked about again, as a listing would show it. `nil` when the server is another
    /// deployment, its history is older than the view, or too much changed: list instead.
    func following(_ view: Listing) async throws -> Listing? {
        guard let known = view.deployment else { return nil }
        var changed: Set<String> = []
        var cursor = view.cursor
        while true {
            let page = try await remote.connection.changes(container: remote.container, after: cursor, wait: 0)
            guard page.deployment == known, let head = page.head, head >= view.cursor, page.cursor >= cursor else { return nil }
            changed.formUnion(page.changes.map(\.path.value))
            cursor = page.cursor
            guard changed.count <= Self.feedFollowLimit else { return nil }
            if !page.more { break }
        }
        var result = view
        result.cursor = cursor
        result.changed = (view.changed ?? []).union(changed)
        if view.changed == nil { result.changed = nil }  // a full listing stays one: all of it is kept
        let connection = remote.connection, container = remote.container
        let answers = try await withThrowingTaskGroup(of: (String, DocumentInfo?).self) { group in
            var answers: [(String, DocumentInfo?)] = []
            var running = 0
            for path in changed {
                if running >= 8, let answer = try await group.next() {
                    answers.append(answer)
                    running -= 1
                }
                running += 1
                group.addTask {
                    let document = try DocumentPath(path)
                    do {
                        // What a listing shows: the current (else latest) version, unless deleted.
                        let info = try await connection.stat(container: container, path: document)
                        return (path, info.state == .deleted ? nil : info)
                    } catch let error as XferError where error.code == .notFound {
                        return (path, nil)
                    }
                }
            }
            for try await answer in group { answers.append(answer) }
            return answers
        }
        for (path, info) in answers { result.documents[path] = info }
        return result
    }

    /// Keeps `view` for the next pass (all of it after a full listing, else what changed).
    func keep(_ view: Listing) throws {
        try state.storeRemoteView(view.documents, cursor: view.cursor, changed: view.changed,
                                  listedAt: view.changed == nil ? view.listedAt : nil)
    }

    /// Why the server behind this directory's URL is not the one it synced with, or `nil`: another
    /// deployment identity, or a feed that went backwards (a restore from an older backup).
    func serverChange(_ listing: Listing) throws -> String? {
        if let divergence = listing.divergence { return divergence }
        if let known = try state.meta("deployment"), let now = listing.deployment, known != now {
            return "the server at \(remote.connection.server) is a different deployment (\(now.prefix(8)), not \(known.prefix(8)))"
        }
        if let seen = try state.meta("cursor").flatMap({ Int64($0) }), listing.cursor < seen {
            return "the server at \(remote.connection.server) has an older history than this directory saw (change \(listing.cursor), after \(seen) had been seen): it was restored or replaced"
        }
        return nil
    }

    /// Takes the server as a new one: forgets which versions this directory holds (so every
    /// local document is uploaded again and none is deleted), and remembers its identity and
    /// cursor, and a notice for `xfer status`.
    func adopt(_ listing: Listing, because reason: String) throws {
        try state.forgetVersions()
        if let deployment = listing.deployment { try state.setMeta("deployment", deployment) }
        try state.setMeta("cursor", String(listing.cursor))
        let when = ISO8601DateFormatter().string(from: Date())
        try state.setMeta("server_notice", "\(when): \(reason). Nothing local was deleted; local documents were uploaded to it again and documents it has were downloaded.")
    }

    // MARK: Evict and fetch

    /// Removes a synced document's local data, keeping its metadata: it stays in `status` as
    /// evicted until ``fetch(_:)``.
    /// - Throws: `not_found` if it is not synced here, `conflict` if it has unsynced changes.
    public func evict(_ path: DocumentPath) throws {
        let clientState = state.clientState(for: path)
        guard var record = try state.records()[path.value],
              let synced = try clientState.document(server: remote.connection.server, container: remote.container, path: path) else {
            throw XferError(.notFound, "\(path) is not a synced document of \(directory)")
        }
        if record.evicted { return }
        guard record.kind != .directory else {
            throw XferError(.badRequest, "\(path) is a directory, which holds no data of its own; evict the documents in it instead")
        }
        let full = directory + "/" + path.value
        guard try LocalSnapshot(path: full, known: clientState.stamps()).isUnchanged(since: synced, state: clientState) else {
            throw XferError(.conflict, "\(path) has changes that are not on the server yet; sync first, then evict")
        }
        try remove(path)
        record.evicted = true
        try state.put(record)
    }

    /// Brings an evicted (or missing) document back: pulls the server's current version.
    /// - Returns: The pull's report.
    @discardableResult
    public func fetch(_ path: DocumentPath, progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws -> PullReport {
        try await pull(path, progress: progress)
    }

    // MARK: Doing

    func push(_ plan: Plan, progress: @escaping @Sendable (TransferProgress) -> Void) async throws -> PushReport {
        var pushOptions = options.push
        pushOptions.force = false
        pushOptions.exclude = []  // a package keeps to its own .xferignore files and the defaults
        let report = try await PushEngine(remote: remote, options: pushOptions)
            .push(plan.local!.path, as: plan.path, state: state.clientState(for: plan.path),
                  directoryItself: plan.local!.kind == .directory, progress: progress)
        try record(plan.path, kind: plan.local!.kind, size: report.bytes, mtimeNs: try DirectoryWalker.entry(at: plan.local!.path).mtimeNanoseconds)
        return report
    }

    /// The most a document may hold and still go in a batch (``pushMany(_:progress:)``): larger
    /// ones are announced before their data moves, so other devices see them coming.
    static let batchedDocumentBytes: Int64 = 4 << 20

    /// Whether a plan goes in a batch: a directory, or a file or symlink of at most
    /// ``batchedDocumentBytes``, as it is here for a push and on the server for a pull.
    static func isBatched(_ plan: Plan) -> Bool {
        switch plan.action {
        case .push:
            return plan.local?.kind == .directory
                || (plan.local?.kind == .file && (plan.local?.stamp?.size ?? 0) <= batchedDocumentBytes)
        case .pull:
            return plan.remote?.kind == .directory
                || (plan.remote?.kind == .file && (plan.remote?.size ?? .max) <= batchedDocumentBytes)
        default: return false
        }
    }

    /// Pushes many small documents together (``PushEngine/pushMany(_:progress:)``), recording
    /// each that went through in one transaction. One result per plan, in order.
    func pushMany(_ plans: [Plan], progress: @escaping @Sendable (TransferProgress) -> Void) async throws
        -> [Result<PushReport, any Error>] {
        var pushOptions = options.push
        pushOptions.force = false
        pushOptions.exclude = []
        let items = plans.map {
            PushItem(path: $0.local!.path, name: $0.path, state: state.clientState(for: $0.path), directoryItself: $0.local!.kind == .directory)
        }
        var results = try await PushEngine(remote: remote, options: pushOptions).pushMany(items, progress: progress)
        try state.database.batch {
            for (index, plan) in plans.enumerated() {
                guard case .success(let report) = results[index] else { continue }
                do {
                    try record(plan.path, kind: plan.local!.kind, size: report.bytes,
                               mtimeNs: try DirectoryWalker.entry(at: plan.local!.path).mtimeNanoseconds)
                } catch let error as XferError where error.isVanished {
                    results[index] = .failure(error)  // gone since: the next pass sees it gone
                }
            }
        }
        return results
    }

    /// Pulls many small documents: their manifests in one request, the chunks no local file
    /// holds in shared downloads, then each written and recorded as a single pull does (with
    /// its checks: a local edit is never replaced). A document whose manifest did not come
    /// (changed since, or the answer full) is pulled alone. One result per path, in order.
    /// - Throws: Only what stops every document (`unavailable`, `unauthorized`, `cancelled`).
    func pullMany(_ paths: [DocumentPath], sources: ChunkSources,
                  progress: @escaping @Sendable (DocumentPath) -> @Sendable (TransferProgress) -> Void) async throws
        -> [Result<PullReport, any Error>] {
        let connection = remote.connection
        var prefetched: [Int: PullEngine.Prefetched] = [:]
        do {
            let items = try await connection.manifests(container: remote.container, paths.map { ManifestBatchRequest.Wanted(path: $0) })
            for (index, item) in items.enumerated() {
                // Anything amiss (an error, a digest that does not match) leaves it to a pull of its own, which says what.
                guard let info = item.document, info.path == paths[index], let text = item.manifest,
                      let manifest = try? Manifest(decoding: Base64.decode(text)), info.manifestDigest == manifest.digest.hex else { continue }
                prefetched[index] = PullEngine.Prefetched(info: info, manifest: manifest, chunks: [:])
            }
            // The chunks no local file holds, fetched once for all, each checked against its id and length.
            let local = try sources.locations()
            var wanted: [ChunkID: Int] = [:]
            var order: [ChunkID] = []
            for index in prefetched.keys.sorted() {
                for chunk in prefetched[index]!.manifest.allChunks where local[chunk.id] == nil && wanted[chunk.id] == nil {
                    wanted[chunk.id] = chunk.length
                    order.append(chunk.id)
                }
            }
            var plain: [ChunkID: [UInt8]] = [:]
            for batch in order.batched(atMost: ProtocolLimits.maximumIDsPerRequest) {
                try await connection.download(batch) { chunk in
                    guard let length = wanted[chunk.id], plain[chunk.id] == nil else {
                        throw XferError(.corruptChunk, "the server sent chunk \(chunk.id), which was not asked for")
                    }
                    let bytes = try chunk.decoded(maximumLength: length)
                    guard bytes.count == length else {
                        throw XferError(.corruptChunk, "chunk \(chunk.id) holds \(bytes.count) bytes, but its manifest declares \(length)")
                    }
                    plain[chunk.id] = bytes
                }
            }
            for index in prefetched.keys { prefetched[index]!.chunks = plain }
        } catch let error as XferError where error.stopsEveryDocument {
            throw error
        } catch {
            prefetched = [:]  // each document is pulled alone, and says what is wrong
        }
        var results: [Result<PullReport, any Error>] = []
        for (index, path) in paths.enumerated() {
            results.append(try await documentOutcome {
                try await pull(path, sources: sources, prefetched: prefetched[index], progress: progress(path))
            })
        }
        return results
    }

    func pull(_ path: DocumentPath, sources: ChunkSources? = nil, prefetched: PullEngine.Prefetched? = nil,
              progress: @escaping @Sendable (TransferProgress) -> Void) async throws -> PullReport {
        var pullOptions = options.pull
        pullOptions.force = false
        let full = directory + "/" + path.value
        // Every write lands beneath the synced root, through directories opened without
        // following a symlink: a document named below a symlink is refused, not written.
        let root = try root()
        let parent = try root.directory(path.components.dropLast(), create: true)
        let report = try await PullEngine(remote: remote, options: pullOptions)
            .pull(path, in: parent, as: String(path.components.last!), state: state.clientState(for: path),
                  trash: trash(of: root), sources: sources, prefetched: prefetched,
                  stagingArea: try root.directory([Self.stagingName], create: true), progress: progress)
        let top = try DirectoryWalker.entry(at: full)
        try record(path, kind: report.kind, size: report.bytes, mtimeNs: top.mtimeNanoseconds)
        return report
    }

    /// Removes a document deleted on the server, unless it changed here (then it is pushed
    /// again). A directory goes only when it is empty: one that still holds anything (a new
    /// file, an ignored one) stays, with its record, and is tried again by a later pass.
    /// - Returns: Whether it is gone.
    func deleteLocal(_ plan: Plan) throws -> Bool {
        if let local = plan.local, local.kind == .directory {
            let parent: ConfinedDirectory
            do {
                parent = try root().directory(plan.path.components.dropLast(), create: false)
            } catch let error as XferError where error.isVanished {
                try state.forget(plan.path)
                return true
            }
            guard try parent.removeEmptyDirectory(String(plan.path.components.last!)) else { return false }
            try parent.synchronize()
        } else if let local = plan.local {
            let clientState = state.clientState(for: plan.path)
            let synced = try clientState.document(server: remote.connection.server, container: remote.container, path: plan.path)
            guard synced?.version == plan.synced,
                  try LocalSnapshot(path: local.path, known: clientState.stamps()).isUnchanged(since: synced, state: clientState) else {
                throw XferError(.conflict, "\(plan.path) was deleted on the server but changed here; it will be pushed again")
            }
            try remove(plan.path, toTrash: "deleted on the server")
        }
        try state.forget(plan.path)
        return true
    }

    func deleteRemote(_ plan: Plan) async throws -> Bool {
        do {
            _ = try await remote.connection.delete(container: remote.container, path: plan.path, baseVersion: plan.synced)
        } catch let error as XferError where error.code == .notFound {
            // Already gone.
        } catch let error as XferError where error.code == .conflict {
            return false  // changed on the server since: the remote edit wins over the local delete
        }
        try state.forget(plan.path)
        return true
    }

    private func record(_ path: DocumentPath, kind: DocumentKind, size: Int64, mtimeNs: Int64) throws {
        try state.put(SyncRecord(path: path.value, kind: kind, evicted: false, size: size, mtimeNs: mtimeNs,
                                 lastUsedNs: Int64(Date().timeIntervalSince1970 * 1e9)))
    }

    /// Evicts least recently used synced documents until local data fits `limit`.
    func enforceLocalLimit(_ limit: Int64, plans: [Plan]) throws -> [DocumentPath] {
        let records = try state.records()
        var candidates = plans.filter {
            $0.status?.state == .synced && $0.local != nil && !$0.isDirectory && records[$0.path.value]?.evicted == false
        }
        var total = candidates.reduce(Int64(0)) { $0 + (records[$1.path.value]?.size ?? 0) }
        guard total > limit else { return [] }
        func lastUsed(_ plan: Plan) -> Int64 {
            var info = stat()
            let accessed = lstat(plan.local!.path, &info) == 0 ? Int64(info.st_atim.tv_sec) * 1_000_000_000 + Int64(info.st_atim.tv_nsec) : 0
            return max(accessed, records[plan.path.value]?.lastUsedNs ?? 0)
        }
        candidates.sort { lastUsed($0) < lastUsed($1) }
        var evicted: [DocumentPath] = []
        for plan in candidates where total > limit {
            try evict(plan.path)
            total -= records[plan.path.value]?.size ?? 0
            evicted.append(plan.path)
        }
        return evicted
    }

    /// The hidden directory at the root where pulls build what they download, renamed into
    /// place once complete: nothing half-written ever appears among the folder's files.
    public static let stagingName = ".xfer-staging"

    /// Removes staging copies left more than `age` ago (a pull interrupted and never resumed,
    /// a document deleted since); younger ones are kept for a resumed pull to reuse.
    func tidyStaging(olderThan age: Duration) throws {
        guard let area = try? root().directory([Self.stagingName], create: false) else { return }
        let cutoff = Date().timeIntervalSince1970 - age.seconds
        for name in try area.names() {
            guard let info = area.status(name), Double(info.st_mtim.tv_sec) < cutoff else { continue }
            try area.remove(name)
        }
    }

    /// The synced root, opened for confined writes (docs/SECURITY.md, "One confined writer").
    func root() throws -> ConfinedDirectory {
        try ConfinedDirectory(opening: directory)
    }

    /// Removes a document's local data through the confined writer: its parent directories are
    /// opened beneath the root without following a symlink, and the document itself (a file,
    /// a symlink, or a package tree) is removed as what it is, never followed. With a reason,
    /// it goes to the directory's trash instead (unless the trash is turned off).
    func remove(_ path: DocumentPath, toTrash reason: String? = nil) throws {
        let root = try root()
        let parent: ConfinedDirectory
        do {
            parent = try root.directory(path.components.dropLast(), create: false)
        } catch let error as XferError where error.code == .notFound {
            return
        }
        let name = String(path.components.last!)
        if let reason, let trash = trash(of: root) {
            try trash.keep(name, in: parent, path: path, reason: reason)
        } else {
            try parent.remove(name)
        }
    }

    /// The directory's trash (``Trash``).
    public func trash() throws -> Trash {
        Trash(root: try root())
    }

    /// Where what sync deletes or replaces goes first: the trash of `root`, unless it is turned off.
    private func trash(of root: ConfinedDirectory) -> Trash? {
        options.trashDays > 0 ? Trash(root: root) : nil
    }
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
    static func held(_ plans: [(action: SyncDirectory.Action, synced: Bool)], allowed: Bool) -> (local: Int, remote: Int, total: Int) {
        let total = plans.filter(\.synced).count
        let local = plans.filter { $0.action == .deleteLocal }.count
        let remote = plans.filter { $0.action == .deleteRemote }.count
        guard !allowed else { return (0, 0, total) }
        return (isMass(local, of: total) ? local : 0, isMass(remote, of: total) ? remote : 0, total)
    }
}

/// Keeps a directory in sync with a container: `syncOnce()` for one pass, `watch()` to follow
/// local changes (inotify, debounced) and remote ones (the change feed, long-polled) until
/// cancelled. One engine per directory at a time (a lock); everything it does is reported on
/// ``events``.
public actor SyncEngine {
    /// The directory and its state.
    public nonisolated let directory: SyncDirectory
    /// What the engine does, as it does it. Buffers the newest 1024 events.
    public nonisolated let events: AsyncStream<SyncEvent>
    private let continuation: AsyncStream<SyncEvent>.Continuation
    private let lock: DirectoryLock
    /// What `xfer status` shows of this engine (``SyncHealth``), written after every pass.
    private var health = SyncHealth()
    /// Set when a pass found a replaced server: the change feed's new starting point.
    private var feedReset: Int64?
    /// Whether passes hold back files changed within the quiet period (while watching).
    private var holdsRecentChanges = false
    /// How long until the youngest file a pass held back has been quiet long enough.
    private var quietWait: Duration?

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
        lock = try DirectoryLock(path: self.directory.state.database.path + ".lock", directory: self.directory.directory)
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
            noteFailure(error, phase: code == .unavailable ? .offline : code == .folderMissing ? .folderMissing : .failing)
            throw error
        }
    }

    private func pass() async throws -> SyncSummary {
        let started = ContinuousClock.now
        let sync = directory
        try sync.checkFolder()
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
        let pass = try sync.planPass(listing, serverChanged: change != nil)
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
        // No mass deletion without a word: over the rule, that kind of deletion waits.
        if !pass.held.isEmpty {
            let held = pass.heldCounts
            summary.deletionsHeld = held.local + held.remote
            continuation.yield(.deletionsHeld(local: held.local, remote: held.remote, total: held.total))
        }
        var pullAfterPush: [DocumentPath] = []
        for name in pass.invalid {
            summary.failed += 1
            continuation.yield(.failed(nil, XferError(.invalidPath, "\(name) is not a valid document name (see docs/PROTOCOL.md, Names); it is not synced")))
        }
        for (name, why) in pass.unreadable.sorted(by: { $0.key < $1.key }) {
            summary.failed += 1
            continuation.yield(.failed(nil, XferError(.io, "cannot read \(sync.directory)/\(name) (\(why)); nothing under it is uploaded, downloaded or deleted until it can be read")))
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
            guard let report = try await attempt(&summary, plan.path, { try await sync.push(plan, progress: progress(plan.path)) }) else {
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
        func replacesDirectory(_ plan: SyncDirectory.Plan) -> Bool { plan.local?.kind == .directory && plan.remote?.kind != .directory }
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
                try settle(XferError(.notFound, "changed on the server while this pass ran (\(error.message))", cause: ChangedSinceListed()),
                           &summary, path)
            case .failure(let error):
                try settle(error, &summary, path)
            }
        }
        // Small documents in batches (manifests and chunks fetched together), the rest alone.
        let remoteInfo = Dictionary(plans.compactMap { plan in plan.remote.map { (plan.path, $0) } }, uniquingKeysWith: { first, _ in first })
        let small = Set(plans.filter { $0.action == .pull && SyncDirectory.isBatched($0) }.map(\.path))
        // At most 500 documents and 32 MiB a batch: the chunks a batch holds in memory stay bounded.
        for group in pulls.filter({ small.contains($0) }).batched(atMost: Self.pushBatch, budget: 32 << 20,
                                                                  cost: { Int(remoteInfo[$0]?.size ?? 0) }) {
            for (path, result) in zip(group, try await sync.pullMany(group, sources: sources, progress: progress)) {
                try pulled(path, result)
            }
        }
        for path in pulls where !small.contains(path) {
            let result = try await documentOutcome { try await sync.pull(path, sources: sources, progress: progress(path)) }
            try pulled(path, result)
        }
        // Directories last and deepest first: each is removed once what was in it is gone.
        let deletions = plans.filter { ($0.action == .deleteLocal || $0.action == .forget) && $0.local?.kind != .directory }
            + plans.filter { $0.action == .deleteLocal && $0.local?.kind == .directory }.reversed()
        for plan in deletions {
            guard try await attempt(&summary, plan.path, { try sync.deleteLocal(plan) }) == true, plan.action == .deleteLocal else {
                continue
            }
            if plan.isDirectory { summary.directories += 1 } else { summary.removedLocally += 1 }
            continuation.yield(.removedLocally(plan.path))
        }
        for path in pullsAfterDeletions {
            let result = try await documentOutcome { try await sync.pull(path, sources: sources, progress: progress(path)) }
            try pulled(path, result)
        }
        // An empty staging directory is not left lying about.
        if !pulls.isEmpty || !pullsAfterDeletions.isEmpty, let root = try? sync.root() {
            _ = try? root.removeEmptyDirectory(SyncDirectory.stagingName)
        }
        // The server as it is now (this pass's own changes included), kept for the next pass.
        var afterView = listing
        if summary.uploaded + summary.downloaded + summary.removedLocally + summary.removedRemotely + summary.directories > 0 {
            if let followed = try await sync.following(listing) { afterView = followed } else { afterView = try await sync.listing() }
        }
        try sync.keep(afterView)
        try sync.state.setMeta("cursor", String(afterView.cursor))

        // Conflicts, as the server now sees them.
        let after = afterView.documents
        for info in after.values.filter({ $0.conflicts?.isEmpty == false }).sorted(by: { $0.path.value < $1.path.value }) {
            summary.conflicts += 1
            continuation.yield(.conflict(info.path, current: info.version, conflicts: info.conflicts ?? []))
        }
        if let limit = sync.options.localLimit {
            plans = try sync.plan(remote: after).plans
            for path in try sync.enforceLocalLimit(limit, plans: plans) {
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

    /// Runs one document's step; a failure other than the server's absence is reported and
    /// skipped (`nil`), so one bad document does not stop the others.
    /// A document the local tree moved under (gone, or written while it was read) is left for
    /// the next pass (`retried`), with nothing committed for it.
    private func attempt<T: Sendable>(_ summary: inout SyncSummary, _ path: DocumentPath,
                                      _ body: @Sendable () async throws -> T) async throws -> T? {
        do {
            return try await body()
        } catch {
            try settle(error, &summary, path)
            return nil
        }
    }

    /// What one document's failure means for the pass: the server's absence, a refused token or
    /// cancellation stops it (rethrown); a local change is retried next pass; the rest is reported.
    private func settle(_ error: any Error, _ summary: inout SyncSummary, _ path: DocumentPath) throws {
        if let error = error as? XferError, error.stopsEveryDocument {
            throw error
        } else if let error = error as? XferError, error.isLocalChange || error.cause is ChangedSinceListed {
            summary.retried += 1
            continuation.yield(.retrying(path, error.message))
        } else {
            summary.failed += 1
            continuation.yield(.failed(path, error as? XferError ?? XferError(.io, "\(error)")))
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
        let watcher = try DirectoryWatcher(root: directory.directory, limit: options.maximumWatches,
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
                        let list = try await connection.changes(container: container, after: cursor, wait: options.feedWait)
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
                        continuation.yield(.watchLimited(count: unwatched.count, example: first.key, reason: first.value))
                    }
                    let period = unwatched.isEmpty ? options.rescanInterval : min(options.unwatchedRescanInterval, options.rescanInterval)
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
                        continuation.yield(.passFailed(error as? XferError ?? XferError(.io, "\(error)"), retryIn: backoff))
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
