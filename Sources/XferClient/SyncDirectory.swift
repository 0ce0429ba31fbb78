import Foundation
import XferCore
import XferProtocol

/// A synced directory without its lock: scanning, planning, status, evict and fetch. The
/// ``SyncEngine`` runs passes over it; `xfer status`, `evict` and `fetch` use it directly
/// (they are safe while a daemon runs: each step is one state transaction).
public final class SyncDirectory: Sendable {
    /// The directory (absolute).
    public let directory: String

    /// The server, container and keys: the keys change when the container's are rotated
    /// (``adopt(_:)``).
    var remote: Remote { keyed.value }
    private let keyed: Locked<Remote>

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
        self.options = options
        if bind {
            try state.bind(server: remote.connection.server, container: remote.container)
        } else {
            _ = try state.isBound(server: remote.connection.server, container: remote.container)
        }
        keyed = Locked(try Self.keyed(remote, state: state, directory: state.directory, bind: bind))
    }

    /// Takes `unlocked`'s keys: the container's, rotated (the same first key, a newer current).
    func adopt(_ unlocked: Remote) {
        keyed.withLock { $0 = unlocked }
    }

    /// The meta key of the container key a folder syncs an end-to-end encrypted container under.
    static let keyIDKey = "key_id"

    /// `remote` with the key this folder syncs under: the one it recorded, from this device's
    /// key file, when `remote` holds none; recorded when a folder with nothing synced yet
    /// first syncs under one. A folder's chunk lists and versions are named under one key (or
    /// none): a folder synced under another, or in the clear, is never synced under this one.
    /// - Throws: `unauthorized` if this device no longer holds the recorded key; `conflict` if
    ///   the folder synced under another key, or without one.
    static func keyed(_ remote: Remote, state: SyncState, directory: String, bind: Bool) throws -> Remote {
        let recorded = try state.meta(keyIDKey)
        var remote = remote
        if remote.endToEnd == nil, let recorded { remote = try remote.holding(keyID: recorded) }
        let keyID = remote.endToEnd?.keyID
        guard keyID != recorded else { return remote }
        if recorded == nil, let keyID,
            try state.syncedVersions(server: remote.connection.server, container: remote.container).isEmpty
        {
            if bind { try state.setMeta(keyIDKey, keyID) }
            return remote
        }
        throw XferError(
            .conflict,
            """
            \(directory) synced container \(remote.container) \(recorded.map { "under key \($0)" } ?? "in the clear"), and the \
            container is now \(keyID.map { "end-to-end encrypted under key \($0)" } ?? "not end-to-end encrypted") (made again since?); \
            nothing was changed. Sync it into a new folder
            """)
    }

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
            throw XferError(
                .folderMissing,
                "the synced folder \(directory) is gone (or not mounted); nothing was deleted here or on the server. Put it back (or mount it) and sync again"
            )
        }
        let marker = directory + "/" + Self.markerName
        if access(marker, F_OK) == 0 { return }
        let synced = try state.syncedVersions(server: remote.connection.server, container: remote.container)
        // A directory's name ("Documents") is no evidence: another folder may well have one too.
        let records = synced.isEmpty ? [:] : try state.records()
        guard
            synced.isEmpty
                || synced.keys.contains(where: {
                    records[$0]?.kind != .directory && access(directory + "/" + $0, F_OK) == 0
                })
        else {
            throw XferError(
                .folderMissing,
                "\(directory) holds none of the \(synced.count) documents synced there and no \(Self.markerName) marker: it looks like an empty mount point or another folder, so nothing was deleted. If you did remove them all and want that synced, create the marker (touch \(marker)) and sync again"
            )
        }
        guard create else { return }
        let text = Array(
            """
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
}
