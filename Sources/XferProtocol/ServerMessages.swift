import XferCore

// What every route shares (docs/PROTOCOL.md): the error body, the protocol's limits and
// headers, the health answer and the optional features a server names in it.

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
