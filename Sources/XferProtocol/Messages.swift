import XferCore

// The JSON bodies of the /v1 routes (docs/PROTOCOL.md). Keys are snake_case on the wire;
// `WireJSON` sets up the coders. Binary bodies (chunks, manifests) are in ChunkFrames.swift
// and XferCore's manifest codecs.

/// The kind of a document.
public enum DocumentKind: String, Codable, Sendable, Hashable {
    /// One regular file or symlink.
    case file
    /// A directory tree committed as one document.
    case package
    /// A directory of a synced folder, alone: its name and mode, not what is in it. Other
    /// documents may lie below it (the namespace rule's one exception), and it may be empty.
    case directory

    /// The kind of document a manifest of this kind describes.
    public init(_ manifest: Manifest.Kind) {
        switch manifest {
        case .file: self = .file
        case .package: self = .package
        case .directory: self = .directory
        }
    }

    /// Whether other live documents may lie below one of this kind (docs/PROTOCOL.md, "Names").
    public var holdsDocuments: Bool { self == .directory }
}

/// Where a version is in its life.
public enum VersionState: String, Codable, Sendable, Hashable {
    /// Announced; its data is on the way.
    case uploading
    /// The document's current content.
    case current
    /// Was current; a newer version replaced it.
    case superseded
    /// A deletion: the document is gone as of this version.
    case deleted
    /// An unresolved conflict: committed against a stale base and lost to the current version
    /// (or was current and lost to a later edit). Kept, and counted against the quota, until
    /// `resolve`.
    case conflict
}

/// `POST /v1/containers/{container}/announce`: a document's metadata, before any data.
public struct AnnounceRequest: Codable, Sendable, Hashable {
    /// The document's path in the container.
    public var path: DocumentPath
    /// File or package.
    public var kind: DocumentKind
    /// Total content bytes.
    public var size: Int64
    /// Modification time of the file or package root, nanoseconds since 1970.
    public var mtimeNs: Int64
    /// Permission bits of the file or package root.
    public var mode: UInt32
    /// The version this content was edited from; `nil` for a new document.
    public var baseVersion: Int64?
    /// A name for the device, shown to other devices.
    public var device: String?

    /// Creates an announcement.
    public init(
        path: DocumentPath, kind: DocumentKind, size: Int64, mtimeNs: Int64, mode: UInt32,
        baseVersion: Int64?, device: String? = nil
    ) {
        self.path = path
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.baseVersion = baseVersion
        self.device = device
    }
}

/// What a document looks like at one version; the answer to announce, commit, stat and delete.
public struct DocumentInfo: Codable, Sendable, Hashable {
    /// The document's path.
    public var path: DocumentPath
    /// Server-assigned version number, increasing per document.
    public var version: Int64
    /// Uploading, current, superseded or deleted.
    public var state: VersionState
    /// File or package.
    public var kind: DocumentKind
    /// Content bytes.
    public var size: Int64
    /// Modification time, nanoseconds since 1970.
    public var mtimeNs: Int64
    /// Permission bits.
    public var mode: UInt32
    /// The version it was based on.
    public var baseVersion: Int64?
    /// SHA-256 of the manifest's canonical encoding (committed versions only).
    public var manifestDigest: String?
    /// Files in the document (committed versions only).
    public var files: Int?
    /// Chunk references in the manifest (committed versions only).
    public var chunks: Int?
    /// The device that wrote it, if it said.
    public var device: String?
    /// Change-feed sequence number of this version's last change.
    public var sequence: Int64
    /// The document's unresolved conflict versions, oldest first (absent when there are none).
    public var conflicts: [Int64]?

    /// The scope of the document: `Documents/…` is user-visible, everything else app-private.
    public var scope: Scope { Scope(of: path) }

    /// Creates a description.
    public init(
        path: DocumentPath, version: Int64, state: VersionState, kind: DocumentKind, size: Int64,
        mtimeNs: Int64, mode: UInt32, baseVersion: Int64?, manifestDigest: String?, files: Int?,
        chunks: Int?, device: String?, sequence: Int64, conflicts: [Int64]? = nil
    ) {
        self.conflicts = conflicts
        self.path = path
        self.version = version
        self.state = state
        self.kind = kind
        self.size = size
        self.mtimeNs = mtimeNs
        self.mode = mode
        self.baseVersion = baseVersion
        self.manifestDigest = manifestDigest
        self.files = files
        self.chunks = chunks
        self.device = device
        self.sequence = sequence
    }
}

/// `POST /v1/chunks/missing`: which of these chunks does the account lack?
public struct ChunkIDList: Codable, Sendable, Hashable {
    /// Hex chunk ids, at most ``ProtocolLimits/maximumIDsPerRequest``.
    public var ids: [String]

    /// For a download: a chunk the client holds, by the wanted chunk it may be sent against
    /// (``ChunkEncoding/zstdAgainst``; hex ids, keys among ``ids``). The server uses one only if
    /// the account holds it and the result is smaller.
    public var against: [String: String]?

    /// Creates a list.
    /// - Parameters:
    ///   - ids: The chunks.
    ///   - against: For a download, references the client offers, by wanted chunk.
    public init(ids: [ChunkID], against: [ChunkID: ChunkID] = [:]) {
        self.ids = ids.map(\.hex)
        self.against =
            against.isEmpty ? nil : Dictionary(uniqueKeysWithValues: against.map { ($0.key.hex, $0.value.hex) })
    }

    /// The offered references, parsed.
    /// - Throws: `bad_request` for an id that is not 64 hex digits or a reference for a chunk
    ///   not asked for (``validate()`` refuses more references than ids).
    public func parsedAgainst(ids wanted: [ChunkID]) throws -> [ChunkID: ChunkID] {
        guard let against, !against.isEmpty else { return [:] }
        let asked = Set(wanted)
        var result: [ChunkID: ChunkID] = [:]
        for (key, value) in against {
            guard let id = ChunkID(hex: key), let reference = ChunkID(hex: value) else {
                throw XferError(
                    .badRequest,
                    "\"\(key.prefix(80))\": \"\(value.prefix(80))\" is not a pair of chunk ids (64 hex digits)")
            }
            guard asked.contains(id) else {
                throw XferError(.badRequest, "a reference is offered for chunk \(id), which is not asked for")
            }
            result[id] = reference
        }
        return result
    }

    /// The ids, parsed.
    /// - Throws: `bad_request` for anything but 64 hex digits.
    public func parsed() throws -> [ChunkID] {
        try ids.map { text in
            guard let id = ChunkID(hex: text) else {
                throw XferError(.badRequest, "\"\(text.prefix(80))\" is not a chunk id (64 hex digits)")
            }
            return id
        }
    }
}

/// The answer to `POST /v1/chunks`: how the upload went.
public struct UploadResult: Codable, Sendable, Hashable {
    /// Chunks in the body.
    public var received: Int
    /// Chunks newly stored for the account.
    public var stored: Int
    /// Plain bytes newly stored.
    public var storedBytes: Int64
    /// Chunks sent against a reference (``ChunkEncoding/zstdAgainst``) that were not stored:
    /// the account does not hold the reference, or they did not decode. Send them whole.
    public var unresolved: [String]?

    /// Creates a result.
    public init(received: Int, stored: Int, storedBytes: Int64, unresolved: [ChunkID] = []) {
        self.received = received
        self.stored = stored
        self.storedBytes = storedBytes
        self.unresolved = unresolved.isEmpty ? nil : unresolved.map(\.hex)
    }
}

/// `POST /v1/containers/{container}/commit`: make an announced version current.
public struct CommitRequest: Codable, Sendable, Hashable {
    /// The document's path.
    public var path: DocumentPath
    /// The version announce returned.
    public var version: Int64
    /// The version the content was edited from (must still be current), `nil` for a new document.
    public var baseVersion: Int64?
    /// The version whose manifest `manifestDelta` is against (usually `baseVersion`); `nil`: against none.
    public var deltaBase: Int64?
    /// The manifest as a delta against `deltaBase`'s manifest (or against none), base64.
    public var manifestDelta: String
    /// SHA-256 hex of the full manifest's canonical encoding, checked after applying the delta.
    public var manifestDigest: String

    /// Creates a commit.
    public init(
        path: DocumentPath, version: Int64, baseVersion: Int64?, deltaBase: Int64?, manifestDelta: [UInt8],
        manifestDigest: ChunkID
    ) {
        self.path = path
        self.version = version
        self.baseVersion = baseVersion
        self.deltaBase = deltaBase
        self.manifestDelta = Base64.encode(manifestDelta)
        self.manifestDigest = manifestDigest.hex
    }

    /// This commit's JSON with `delta` as its manifest delta (in place of the one it holds),
    /// encoded straight into the body: a delta of megabytes is held once, as base64, not also
    /// as a string and the encoder's copy of it.
    public func body(delta: some Collection<UInt8>) -> SpillArray<UInt8> {
        var request = self
        request.manifestDelta = ""
        return WireJSON.encode(request, base64: delta, in: "manifest_delta")
    }
}

/// `GET /v1/containers/{container}/documents`: the documents under a prefix.
///
/// A listing comes in pages in path order: while `more` is true, ask again with `page=next`.
/// Nothing may be decided from a listing that was not read to its end (a document absent from
/// one page may be on the next).
public struct DocumentList: Codable, Sendable, Hashable {
    /// Each document's newest state: current, deleted, or uploading if never committed.
    public var documents: [DocumentInfo]
    /// The container's change-feed position when the list (its first page) was read.
    public var cursor: Int64
    /// More documents follow this page.
    public var more: Bool
    /// The token that asks for the next page (opaque), when `more`.
    public var next: String?
    /// The server's deployment identity (see `xfer status`): another one at the same URL is
    /// another server.
    public var deployment: String?

    /// Creates a list (one page, or all of it).
    public init(documents: [DocumentInfo], cursor: Int64, more: Bool = false, next: String? = nil) {
        self.documents = documents
        self.cursor = cursor
        self.more = more
        self.next = next
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        documents = try container.decode([DocumentInfo].self, forKey: .documents)
        cursor = try container.decode(Int64.self, forKey: .cursor)
        more = try container.decodeIfPresent(Bool.self, forKey: .more) ?? false
        next = try container.decodeIfPresent(String.self, forKey: .next)
        deployment = try container.decodeIfPresent(String.self, forKey: .deployment)
    }
}

/// `GET /v1/containers/{container}/changes?after=N`: what changed after a cursor.
public struct ChangeList: Codable, Sendable, Hashable {
    /// Changed versions in sequence order.
    public var changes: [DocumentInfo]
    /// Changed key-value entries in sequence order (deletions included).
    public var keys: [KeyValueEntry]
    /// Pass as `after` to read on.
    public var cursor: Int64
    /// More changes wait past `cursor`.
    public var more: Bool
    /// The container's newest sequence number now. Below the `after` a client asked from, the
    /// server's history is older than what that client saw (restored or replaced); the `cursor`
    /// alone cannot tell, since it never goes below `after`. Absent from older servers.
    public var head: Int64?
    /// The server's deployment identity (as in a listing). Absent from older servers.
    public var deployment: String?

    /// Creates a change list.
    public init(changes: [DocumentInfo], keys: [KeyValueEntry] = [], cursor: Int64, more: Bool, head: Int64? = nil) {
        self.changes = changes
        self.keys = keys
        self.cursor = cursor
        self.more = more
        self.head = head
    }
}

/// `GET /v1/containers/{container}/versions?path=P`: a document's history, newest first.
public struct VersionList: Codable, Sendable, Hashable {
    /// Every version the server keeps: current, conflict, superseded, deleted, uploading.
    public var versions: [DocumentInfo]

    /// Creates a list.
    public init(versions: [DocumentInfo]) { self.versions = versions }
}

/// `POST /v1/containers/{container}/resolve`: settle a document's conflict.
public struct ResolveRequest: Codable, Sendable, Hashable {
    /// The document.
    public var path: DocumentPath
    /// The version to make current (the current one or a conflict version).
    public var keep: Int64
    /// Keep the other contenders in history as superseded versions instead of removing them.
    public var keepAll: Bool

    /// Creates a request.
    public init(path: DocumentPath, keep: Int64, keepAll: Bool = false) {
        self.path = path
        self.keep = keep
        self.keepAll = keepAll
    }
}

/// A document scope: iCloud's split between what the user sees and what the app keeps.
public enum Scope: String, Codable, Sendable, Hashable, CaseIterable {
    /// Paths under `Documents/`: user-visible documents.
    case documents
    /// Everything else (by convention under `Data/`): app-private data.
    case data

    /// The scope of a path.
    public init(of path: DocumentPath) {
        self = path.value.hasPrefix("Documents/") ? .documents : .data
    }

    /// The path prefix that selects this scope in listings (`Documents/` or `Data/`).
    public var prefix: String { self == .documents ? "Documents/" : "Data/" }
}

/// `POST /v1/admin/accounts`: create an account (admin token only).
public struct CreateAccountRequest: Codable, Sendable, Hashable {
    /// 1–64 characters of `A-Z a-z 0-9 . _ -`.
    public var name: String
    /// Storage quota in bytes; the server's default when `nil`.
    public var quota: Int64?

    /// Creates a request.
    public init(name: String, quota: Int64?) {
        self.name = name
        self.quota = quota
    }
}

/// An account and, once, at creation, its token.
/// One account as the admin sees it (`GET /v1/admin/accounts`, `xfer account list|show`).
public struct AccountSummary: Codable, Sendable, Hashable {
    public var name: String
    /// Quota in bytes.
    public var quota: Int64
    /// Plain bytes of the chunks the account stores, each distinct chunk counted once.
    public var used: Int64
    /// Seconds since 1970.
    public var createdAt: Int64
    /// Tokens that act for it.
    public var tokens: Int64
    public var containers: Int64
    /// Documents whose current version is not a deletion.
    public var documents: Int64
    /// What its version records cost the quota beside ``used`` (each committed version and
    /// deletion 256 bytes plus its stored manifest); `nil` from a server that does not count them.
    public var versionBytes: Int64?

    public init(
        name: String, quota: Int64, used: Int64, versionBytes: Int64? = nil, createdAt: Int64, tokens: Int64,
        containers: Int64,
        documents: Int64
    ) {
        self.name = name
        self.quota = quota
        self.used = used
        self.versionBytes = versionBytes
        self.createdAt = createdAt
        self.tokens = tokens
        self.containers = containers
        self.documents = documents
    }
}

/// Every account (`GET /v1/admin/accounts`), by name.
public struct AccountList: Codable, Sendable, Hashable {
    public var accounts: [AccountSummary]

    public init(accounts: [AccountSummary]) { self.accounts = accounts }
}

/// What deleting an account removed, or would (`DELETE /v1/admin/accounts/NAME`,
/// `xfer account delete`).
public struct AccountDeletion: Codable, Sendable, Hashable {
    public var name: String
    public var containers: Int64
    /// Documents whose current version was not a deletion.
    public var documents: Int64
    /// Every version kept, deletions and conflicts included.
    public var versions: Int64
    public var tokens: Int64
    /// Plain bytes its chunks took; the chunks no other account holds go at the next gc.
    public var used: Int64
    /// Whether nothing was removed (`dry_run`).
    public var dryRun: Bool

    public init(
        name: String, containers: Int64, documents: Int64, versions: Int64, tokens: Int64, used: Int64, dryRun: Bool
    ) {
        self.name = name
        self.containers = containers
        self.documents = documents
        self.versions = versions
        self.tokens = tokens
        self.used = used
        self.dryRun = dryRun
    }
}

/// `PUT /v1/admin/accounts/NAME/quota`.
public struct SetQuotaRequest: Codable, Sendable, Hashable {
    /// Bytes; 0 or more. Below what the account uses, it refuses new data and keeps the old.
    public var quota: Int64

    public init(quota: Int64) { self.quota = quota }
}

public struct AccountInfo: Codable, Sendable, Hashable {
    /// The account's name.
    public var name: String
    /// Quota in bytes.
    public var quota: Int64
    /// Plain bytes of the chunks the account stores, each distinct chunk counted once.
    public var used: Int64
    /// The new token; only in the answer to account creation.
    public var token: String?
    /// What its version records cost the quota beside ``used`` (each committed version and
    /// deletion 256 bytes plus its stored manifest); `nil` from a server that does not count them.
    public var versionBytes: Int64?

    /// Creates a description.
    public init(name: String, quota: Int64, used: Int64, versionBytes: Int64? = nil, token: String? = nil) {
        self.name = name
        self.quota = quota
        self.used = used
        self.versionBytes = versionBytes
        self.token = token
    }

    /// All the quota counts: chunks and version records.
    public var charged: Int64 { used + (versionBytes ?? 0) }
}

extension AccountSummary {
    /// All the quota counts: chunks and version records.
    public var charged: Int64 { used + (versionBytes ?? 0) }
}

/// The body of every error response.
public struct ErrorBody: Codable, Sendable, Hashable {
    /// The error.
    public struct Detail: Codable, Sendable, Hashable {
        /// Stable code (`conflict`, `invalid_path`, …).
        public var code: String
        /// A sentence for people.
        public var message: String
        /// For `missing_chunks`: some of the ids the server lacks.
        public var missing: [String]?
        /// For `conflict`: the document's current version.
        public var currentVersion: Int64?
    }

    /// The error.
    public var error: Detail

    /// Creates a body.
    public init(code: String, message: String, missing: [String]? = nil, currentVersion: Int64? = nil) {
        error = Detail(code: code, message: message, missing: missing, currentVersion: currentVersion)
    }
}

extension ErrorBody.Detail {
    /// The error it describes, with its details as the cause (`ConflictDetail`, `MissingChunksDetail`).
    public var xferError: XferError {
        let code = XferError.Code.named(self.code)
        var cause: (any Error & Sendable)? = nil
        if code == .conflict { cause = ConflictDetail(currentVersion: currentVersion) }
        if code == .missingChunks { cause = MissingChunksDetail(ids: (missing ?? []).compactMap { ChunkID(hex: $0) }) }
        return XferError(code, message, cause: cause)
    }
}

/// Limits both sides agree on.
public enum ProtocolLimits {
    /// Ids in one missing or download request.
    public static let maximumIDsPerRequest = 4096
    /// Bytes of a JSON request body (a commit carries a manifest delta; 64 MiB).
    public static let maximumJSONBody = 64 << 20
    /// Documents in one batch commit.
    public static let maximumBatchDocuments = 1000
    /// Bytes of a batch commit's body (16 MiB): its manifests are whole, so this bounds them.
    public static let maximumBatchBody = 16 << 20
    /// Documents in one list or change answer.
    public static let maximumListCount = 10_000
    /// Longest wait of a long-polling change request, in seconds.
    public static let maximumWaitSeconds = 60
    /// Bytes of UTF-8 in a key-value key.
    public static let maximumKeyBytes = 64
}

/// Names of HTTP headers xfer uses.
public enum XferHeader {
    /// A manifest response: the version it describes.
    public static let version = "X-Xfer-Version"
    /// A manifest response: the version the delta is against (absent: a full delta).
    public static let base = "X-Xfer-Base"
    /// A manifest response: SHA-256 hex of the full manifest.
    public static let digest = "X-Xfer-Manifest-Digest"
}

/// `GET /v1/health`: the server is up, which release it runs, and which optional parts of
/// the protocol it understands.
public struct HealthStatus: Codable, Sendable, Hashable {
    public var status: String
    public var version: String
    /// ``ServerFeature`` raw values. Absent from servers older than the first feature: a
    /// client reads that as none.
    public var features: [String]?

    public init(status: String, version: String, features: [String]?) {
        self.status = status
        self.version = version
        self.features = features
    }
}

/// An optional part of the protocol, added after v1's first release. A client uses one only
/// when the server's health answer names it, so a newer client works against an older server
/// (it sends what every v1 server reads) and an older client against a newer one (it never
/// asks).
public enum ServerFeature: String, Sendable, CaseIterable {
    /// Upload frames of chunk encoding 2 (`zstdAgainst`, sent against a chunk the account
    /// holds) and the `unresolved` list in the upload's answer.
    case chunksAgainst = "chunks-against"
    /// `XFDZ` compressed manifest deltas in a commit's `manifest_delta` and, asked for with
    /// `compressed=1`, from the manifest route.
    case compressedManifests = "compressed-manifests"
    /// Upload bodies of up to ``ChunkFrameLimits/largeUploadFrames`` frames (still at most
    /// 64 MiB), which may arrive chunked, of unknown length: a push of many small chunks then
    /// sends them in far fewer requests, and the server records them in far fewer transactions.
    case largeUploads = "large-uploads"
    /// Upload frames of chunk encoding 3 (``ChunkEncoding/sealed``: chunks of an end-to-end
    /// encrypted container), stored and served as they came.
    case sealedChunks = "sealed-chunks"
    /// A batch commit's document may name the version it must become (``DirectCommit/version``);
    /// one that would become another is refused, nothing of it recorded.
    case batchCommitVersions = "batch-commit-versions"
    /// The query route, `GET /v1/containers/{c}/query` (``DocumentQuery``): search by name,
    /// kind, time, size and state, sorted and paged.
    case documentQuery = "document-query"
    /// The web view at `/web/` (docs/WEB.md): pages for a browser, signed in with an account
    /// token. No client of the protocol uses it; `--without-feature web` turns it off.
    case web = "web"
    /// WebDAV at `/dav/CONTAINER/` (docs/WEBDAV.md): the `Documents/` scope for file managers,
    /// rclone and davfs2, signed in with HTTP Basic and an account token. No client of the
    /// protocol uses it; `--without-feature webdav` turns it off.
    case webdav = "webdav"
}
