import Foundation
import XferCore
import XferProtocol

/// What a push would do, found without changing anything on either side (`xfer push --dry-run`).
public struct PushPlan: Codable, Sendable, Hashable {
    /// What the push would make of the document.
    public enum Action: String, Codable, Sendable {
        /// A new document (none is current on the server).
        case create
        /// A new version on top of the one this copy was synced from.
        case update
        /// Nothing: this copy is the version it was synced from; no version is made.
        case unchanged
        /// A new version, but the server's current one is not the one this copy was synced
        /// from: both are kept, the later edit current and the other a conflict version.
        case conflict
        /// A new version replacing the server's current one (`--force`).
        case replace
    }

    /// The document's path.
    public var document: String
    /// What would happen.
    public var action: Action
    /// Why, in words.
    public var reason: String
    /// The version this copy was synced from, if any.
    public var syncedVersion: Int64?
    /// The server's current version, if any.
    public var serverVersion: Int64?
    /// Files in the document.
    public var files: Int
    /// Content bytes.
    public var bytes: Int64
    /// Files that changed since they were last read (they would be read and hashed).
    public var filesToRead: Int
    /// Their bytes.
    public var bytesToRead: Int64
}

/// What a pull would do, found without changing anything on either side (`xfer pull --dry-run`).
public struct PullPlan: Codable, Sendable, Hashable {
    /// What the pull would do at its destination.
    public enum Action: String, Codable, Sendable {
        /// Nothing is there: the document would be created.
        case create
        /// This client's own unchanged copy (or, with `--force`, whatever is there) would be replaced.
        case replace
        /// The destination already holds this version as it was written: nothing to do.
        case unchanged
        /// Something else is there: the pull would be refused and change nothing (`--force` replaces it).
        case refused
    }

    /// The document's path.
    public var document: String
    /// Where it would go.
    public var destination: String
    /// The version it would pull.
    public var version: Int64
    /// What would happen.
    public var action: Action
    /// Why, in words.
    public var reason: String
    /// Files in that version (0 when refused or unchanged).
    public var files: Int
    /// Its content bytes.
    public var bytes: Int64
    /// Chunks that are not on disk here and would be downloaded.
    public var chunksToFetch: Int
    /// Their plain bytes.
    public var bytesToFetch: Int64
}

extension PushEngine {
    /// What ``push(_:as:state:progress:)`` would do with `path` as `name`, asking the server
    /// only read-only questions and recording nothing. Files are not read: the plan counts
    /// those whose stamp changed, which a push would read and hash.
    public func plan(_ path: String, as document: DocumentPath, state: ClientState? = nil) async throws -> PushPlan {
        try await ClientThreads.run {
            let connection = remote.connection
            let name = try remote.serverPath(document)  // sealed, in an end-to-end encrypted container
            let state = try state ?? remote.clientState(root: path)
            let snapshot = try LocalSnapshot(path: path, state: state, exclude: options.exclude)
            let synced = try state.document(server: connection.server, container: remote.container, path: document)
            let syncedVersion = synced?.version
            let current: DocumentInfo?
            do {
                current = try await connection.stat(container: remote.container, path: name)
            } catch let error as XferError where error.code == .notFound {
                current = nil
            }
            let serverVersion = current?.state == .current ? current?.version : nil
            let chunkLists = try snapshot.knownChunks(state)
            let toRead = PushDecisions.filesToRead(
                changed: snapshot.toHash, unchanged: snapshot.unchanged, chunkLists: chunkLists)
            var plan = PushPlan(
                document: document.value, action: .update, reason: "", syncedVersion: syncedVersion,
                serverVersion: serverVersion,
                files: snapshot.tree.indices.filter { snapshot.tree.kind(at: $0) == .file }.count,
                bytes: snapshot.totalSize,
                filesToRead: toRead.count, bytesToRead: toRead.reduce(Int64(0)) { $0 + snapshot.tree.size(at: $1) })
            // The same order of questions as a push: unchanged first (without --force), then the base.
            if !options.force, let synced, snapshot.isUnchanged(since: synced, chunks: chunkLists) {
                if try await remote.holds(synced, at: name) {
                    plan.action = .unchanged
                    plan.reason = "unchanged since v\(synced.version) was synced here; no version would be made"
                    plan.filesToRead = 0
                    plan.bytesToRead = 0
                } else {
                    // As a push does: the server lacks what this copy synced, so all of it goes.
                    plan.action = serverVersion == nil ? .create : .conflict
                    plan.reason =
                        "unchanged since v\(synced.version) was synced here, but the server at this address does not hold that version (another server, or one restored from an older backup): everything would be sent"
                        + (serverVersion == nil ? "" : ", and its current v\(serverVersion!) kept beside it")
                    plan.filesToRead = plan.files
                    plan.bytesToRead = plan.bytes
                }
            } else if let serverVersion, options.force, serverVersion != syncedVersion {
                plan.action = .replace
                plan.reason = "would replace the server's v\(serverVersion) (--force)"
            } else if serverVersion == nil {
                plan.action = .create
                plan.reason =
                    syncedVersion == nil
                    ? "a new document" : "the server has no current version (deleted there): a new one"
            } else if serverVersion == syncedVersion {
                plan.reason = "a new version on top of v\(serverVersion!)"
            } else {
                plan.action = .conflict
                plan.reason =
                    "the server's current version is v\(serverVersion!), not \(syncedVersion.map { "v\($0), " } ?? "")the one this copy was synced from: both would be kept, the later edit current and the other a conflict version"
            }
            return plan
        }
    }
}

extension PullEngine {
    /// What ``pull(_:into:version:state:progress:)`` would do, asking the server only
    /// read-only questions, writing nothing and creating no directory.
    public func plan(_ document: DocumentPath, into destination: String, version: Int64? = nil) async throws -> PullPlan
    {
        try await ClientThreads.run {
            let connection = remote.connection
            let name = try remote.serverPath(document)  // sealed, in an end-to-end encrypted container
            let (parent, baseName) = try resolve(document, into: destination, state: nil)
            let target = parent == "/" ? "/" + baseName : parent + "/" + baseName
            let info = try await pullableVersion(name, version: version)
            let state = try remote.clientState(root: target)
            let synced = try state.document(server: connection.server, container: remote.container, path: document)
            let known = try state.files()
            var status = stat()
            let exists = lstat(target, &status) == 0
            var plan = PullPlan(
                document: document.value, destination: target, version: info.version,
                action: exists ? .replace : .create,
                reason: exists ? "would replace this client's unchanged copy" : "nothing is there yet",
                files: 0, bytes: 0, chunksToFetch: 0, bytesToFetch: 0)
            if options.force && exists {
                plan.reason = "would replace what is there (--force); it goes nowhere else"
            } else if !options.force {
                do {
                    try Self.checkReplaceable(target: target, exists: exists, synced: synced, known: known, name: name)
                } catch let error as XferError where error.code == .conflict {
                    plan.action = .refused
                    plan.reason = error.message
                    return plan
                }
            }
            if let synced,
                Self.isInPlace(
                    info, synced: synced, target: target, known: known,
                    digest: remote.serverDigest(of: synced, at: name))
            {
                plan.action = .unchanged
                plan.reason = "v\(info.version) is already there, unchanged"
                return plan
            }
            let manifest = try await manifest(name, info: info, synced: synced).manifest
            let sources = try ChunkSources(state).locations()
            var counted: Set<ChunkID> = []
            for chunk in manifest.allChunks where sources[chunk.id] == nil && counted.insert(chunk.id).inserted {
                plan.chunksToFetch += 1
                plan.bytesToFetch += Int64(chunk.length)
            }
            plan.files = manifest.fileCount
            plan.bytes = manifest.totalSize
            return plan
        }
    }
}
