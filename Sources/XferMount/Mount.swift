import Foundation
import XferClient
import XferCore
import XferProtocol

/// A container mounted as a directory (`xfer mount`): every document listed at once, its
/// data fetched when read, kept current by the change feed; files written through it are
/// uploaded as versions once closed (unless it is mounted read-only).
///
/// ```swift
/// let mount = try await Mount.start(client: client, at: "/home/me/notes")
/// // … later, from a signal handler's task:
/// mount.stop()
/// try await mount.finished()
/// ```
public final class Mount: Sendable {
    /// How a mount behaves.
    public struct Options: Sendable {
        /// The on-disk chunk cache's directory (none: chunks are kept in memory only).
        public var cachePath: String?
        /// Payload bytes the on-disk cache keeps at most.
        public var cacheBytes: Int
        /// Extra mount options for the kernel (`allow_other`, …).
        public var mountOptions: [String]
        /// Where files written through the mount wait for upload (`STATE/mount-writes/…`);
        /// `nil`: the mount is read-only.
        public var stateDirectory: String?

        public init(
            cachePath: String? = nil, cacheBytes: Int = 1 << 30, mountOptions: [String] = [],
            stateDirectory: String? = nil
        ) {
            self.cachePath = cachePath
            self.cacheBytes = cacheBytes
            self.mountOptions = mountOptions
            self.stateDirectory = stateDirectory
        }
    }

    /// The mounted directory.
    public let mountpoint: String
    /// Where reads got their chunks.
    public var statistics: ChunkSupply.Statistics { supply.statistics }

    private let session: FuseSession
    private let supply: ChunkSupply
    private let tree: Locked<MountTree>
    private let ended: Task<Int32, Never>
    private let feed: Task<Void, Never>
    private let uploads: Uploads?
    private let uploading: Task<Void, Never>?
    /// Files written here and closed that are not on the server yet.
    public var queued: Int { uploads?.queued().count ?? 0 }
    private let staged: StagedFiles?
    private let notifier: Locked<(@Sendable ([MountTree.Invalidation]) -> Void)?>

    /// Lists the container, mounts it at `mountpoint` and starts serving and following its
    /// change feed.
    /// - Throws: the server's errors listing the container; `io` if the mount fails.
    public static func start(client: DocumentClient, at mountpoint: String, options: Options = Options()) async throws
        -> Mount
    {
        let head = try await client.remote.connection.head(container: client.remote.container)
        var tree = MountTree(mountedAtNanoseconds: Int64(Date().timeIntervalSince1970 * 1e9))
        tree.sealedAttributes = try await client.isEndToEnd()
        for document in try await client.list().documents { tree.apply(document) }
        let disk = try options.cachePath.map {
            try SegmentChunkCache(directory: $0, maximumBytes: Int64(options.cacheBytes))
        }
        let supply = ChunkSupply(client: client, disk: disk)
        return try Mount(
            mountpoint: mountpoint, tree: Locked(tree), client: client, supply: supply, head: head,
            pinning: disk.map { Pinning(client: client, cache: $0) }, options: options)
    }

    private init(
        mountpoint: String, tree: Locked<MountTree>, client: DocumentClient, supply: ChunkSupply, head: Int64,
        pinning: Pinning?, options: Options
    ) throws {
        let notifier = Locked<(@Sendable ([MountTree.Invalidation]) -> Void)?>(nil)
        let handles = Locked(MountFileSystem.Handles())
        let staged = try options.stateDirectory.map {
            try StagedFiles(
                stateDirectory: $0, server: client.remote.connection.server, container: client.remote.container.value)
        }
        // Packages an earlier mount began checking out, or checked out and left unchanged.
        staged?.sweepPackages()
        if let staged {
            tree.withLock { $0.replay(removals: staged.removals(), made: staged.made()) }
        }
        let uploads = staged.map { staged in
            Uploads(
                client: client, staged: staged, tree: tree, invalidate: { notifier.value?($0) },
                writing: { handles.value.isWriting(under: $0) },
                whenIdle: { path, body in handles.withLock { $0.isWriting(under: path) ? nil : body() } })
        }
        let fileSystem = MountFileSystem(
            tree: tree, manifests: ManifestSupply(client: client, disk: pinning?.cache), supply: supply,
            staged: staged, uploads: uploads, client: staged == nil ? nil : client, notifier: notifier,
            handles: handles)
        let session = try FuseSession(
            mountpoint: mountpoint,
            options: (staged == nil ? ["ro"] : [])
                + ["fsname=xfer:\(client.remote.container)", "subtype=xfer", "default_permissions"]
                + options.mountOptions,
            operations: fileSystem)
        let notifying = DispatchQueue(label: "xfer-mount-invalidations")
        notifier.withLock { $0 = { invalidations in notifying.async { invalidations.forEach(session.invalidate) } } }
        self.mountpoint = mountpoint
        self.session = session
        self.supply = supply
        self.tree = tree
        self.staged = staged
        self.uploads = uploads
        self.notifier = notifier
        uploading = uploads.map { uploads in Task { await uploads.run() } }
        ended = Task.detached { await Self.serve(session) }
        feed = Task {
            // A live view: after an outage the feed is asked again within seconds, not half a minute.
            let feed = ChangeFeed(remote: client.remote, start: head, wait: 25, maximumBackoff: .seconds(4))
            await Self.follow(feed, into: tree, notifier: notifier, pinning: pinning)
        }
    }

    /// Unmounts (as `fusermount3 -u` would); ``finished()`` then returns.
    public func stop() {
        session.stop()
    }

    /// Waits until the mount ends (``stop()``, `fusermount3 -u`, the kernel aborting it).
    /// - Returns: libfuse's result: 0 or a negative errno.
    @discardableResult
    public func finished() async -> Int32 {
        let result = await ended.value
        feed.cancel()
        uploading?.cancel()
        // What was closed goes up now if it can (within a minute); the rest waits, on disk,
        // for the next mount of this state directory.
        await uploads?.finish(within: .seconds(60))
        notifier.withLock { $0 = nil }  // it holds the session, which holds the file system, which holds it
        return result
    }

    /// Runs the session's loop on a thread of its own (it blocks), resuming when it ends.
    private static func serve(_ session: FuseSession) async -> Int32 {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: session.run()) }
            thread.name = "xfer-mount"
            thread.start()
        }
    }

    /// Applies each change to the tree and tells the kernel what it makes stale (from a queue
    /// of its own: a notification may wait for the kernel, which may wait for a reply); a
    /// pinned document's new version is fetched.
    private static func follow(
        _ feed: ChangeFeed, into tree: Locked<MountTree>,
        notifier: Locked<(@Sendable ([MountTree.Invalidation]) -> Void)?>, pinning: Pinning?
    ) async {
        do {
            for try await change in feed {
                guard case .document(let info) = change else { continue }
                let invalidations = tree.withLock { $0.apply(info) }
                if !invalidations.isEmpty { notifier.value?(invalidations) }
                if info.state == .current, let pinning, (try? pinning.isPinned(info.path.value)) == true {
                    Task { _ = try? await pinning.pin(info) }
                }
            }
        } catch {
            // The feed retries what it can; what it cannot (a revoked token) ends following.
            FileHandle.standardError.write(Data("xfer mount: stopped following changes: \(error)\n".utf8))
        }
    }
}
