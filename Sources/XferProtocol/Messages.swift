import XferCore

// The JSON bodies of the document routes (docs/PROTOCOL.md); the other routes' are in the
// other *Messages.swift files. Keys are snake_case on the wire; `WireJSON` sets up the coders.
// Binary bodies (chunks, manifests) are in ChunkFrames.swift and XferCore's manifest codecs.

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
