import XferCore

// The JSON bodies of the batch routes: many documents committed, or many manifests read, in
// one request (docs/PROTOCOL.md, `POST /v1/containers/{c}/commits` and `…/manifests`).

/// One document of a batch commit: its announcement and its whole manifest at once.
public struct DirectCommit: Codable, Sendable, Hashable {
    /// The document's path.
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
    /// The full manifest (no delta), base64.
    public var manifest: String
    /// SHA-256 hex of the manifest, checked on arrival.
    public var manifestDigest: String
    /// The version this commit must become, or `nil` for the next one, whatever it is. A
    /// document whose next version is another is refused (`conflict`; nothing of it is
    /// recorded): an end-to-end encrypted manifest is sealed to its version before it is sent
    /// (``ServerFeature/batchCommitVersions``).
    public var version: Int64? = nil

    /// Creates one document's commit.
    public init(announce: AnnounceRequest, manifest: [UInt8], manifestDigest: ChunkID, version: Int64? = nil) {
        path = announce.path
        kind = announce.kind
        size = announce.size
        mtimeNs = announce.mtimeNs
        mode = announce.mode
        baseVersion = announce.baseVersion
        device = announce.device
        self.manifest = Base64.encode(manifest)
        self.manifestDigest = manifestDigest.hex
        self.version = version
    }

    /// Its announcement.
    public var announcement: AnnounceRequest {
        AnnounceRequest(
            path: path, kind: kind, size: size, mtimeNs: mtimeNs, mode: mode, baseVersion: baseVersion, device: device)
    }
}

/// `POST /v1/containers/{container}/commits`: many documents committed in one request and one
/// transaction, each with no announce before it (its chunks are uploaded first). What a sync
/// pass uses for small documents, where a round trip per step would cost more than the data.
/// Each document succeeds or fails on its own (see ``BatchCommitResult``).
public struct BatchCommitRequest: Codable, Sendable, Hashable {
    /// The documents, at most ``ProtocolLimits/maximumBatchDocuments``, each path once.
    public var documents: [DirectCommit]

    /// Creates a batch.
    public init(documents: [DirectCommit]) { self.documents = documents }
}

/// The answer to a batch commit: one outcome per document, in the request's order.
public struct BatchCommitResult: Codable, Sendable, Hashable {
    /// One document's outcome: what it now is, or why it was not committed.
    public struct Outcome: Codable, Sendable, Hashable {
        /// The committed version (`state` `current` or `conflict`), when it was committed.
        public var document: DocumentInfo?
        /// Why it was not committed (as an error response's `error`), otherwise.
        public var error: ErrorBody.Detail?

        /// Creates an outcome.
        public init(document: DocumentInfo? = nil, error: ErrorBody.Detail? = nil) {
            self.document = document
            self.error = error
        }
    }

    /// The outcomes.
    public var results: [Outcome]

    /// Creates a result.
    public init(results: [Outcome]) { self.results = results }
}

/// `POST /v1/containers/{container}/manifests`: the manifests of many documents at once (what a
/// sync pass pulling many small documents asks, instead of one request each).
public struct ManifestBatchRequest: Codable, Sendable, Hashable {
    /// One document asked for.
    public struct Wanted: Codable, Sendable, Hashable {
        /// The document's path.
        public var path: DocumentPath
        /// A committed version; `nil`: the current one.
        public var version: Int64?

        /// Asks for one document.
        public init(path: DocumentPath, version: Int64? = nil) {
            self.path = path
            self.version = version
        }
    }

    /// The documents, at most ``ProtocolLimits/maximumBatchDocuments``.
    public var documents: [Wanted]

    /// Creates a request.
    public init(documents: [Wanted]) { self.documents = documents }
}

/// The answer to a manifest batch: one item per document asked for, in order. The server stops
/// adding manifests past ``ProtocolLimits/maximumBatchBody`` bytes; the rest answer `too_large`
/// (ask for them alone, with `GET …/manifest`).
public struct ManifestBatchResult: Codable, Sendable, Hashable {
    /// One document's answer.
    public struct Item: Codable, Sendable, Hashable {
        /// The version whose manifest this is.
        public var document: DocumentInfo?
        /// The whole manifest, base64 (its digest is `document.manifest_digest`).
        public var manifest: String?
        /// Why there is none, otherwise.
        public var error: ErrorBody.Detail?

        /// Creates an item.
        public init(document: DocumentInfo? = nil, manifest: String? = nil, error: ErrorBody.Detail? = nil) {
            self.document = document
            self.manifest = manifest
            self.error = error
        }
    }

    /// The items.
    public var manifests: [Item]

    /// Creates a result.
    public init(manifests: [Item]) { self.manifests = manifests }
}
