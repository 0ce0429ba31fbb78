import XferCore
import XferProtocol

/// How a transfer is going, for progress bars.
public struct TransferProgress: Sendable {
    /// Bytes hashed (push) or written (pull) so far.
    public var bytesDone: Int64
    /// Bytes in all.
    public var bytesTotal: Int64
    /// Payload bytes that crossed the network so far.
    public var bytesOnWire: Int64
}

/// What a push did (`xfer push --json` prints it).
public struct PushReport: Codable, Sendable {
    /// The document's path.
    public var document: String
    /// The committed version.
    public var version: Int64
    /// Files in the document.
    public var files: Int
    /// Content bytes.
    public var bytes: Int64
    /// Chunk references in the manifest.
    public var chunks: Int
    /// Chunks uploaded.
    public var chunksSent: Int
    /// Payload bytes uploaded (compressed chunk bytes).
    public var bytesSent: Int64
    /// Content bytes the server already had.
    public var bytesReused: Int64
    /// Bytes of the manifest sent: the delta sent with the commit and, in an end-to-end
    /// encrypted container, the sealed manifest's pieces (not counted in ``chunksSent`` or ``bytesSent``).
    public var manifestBytes: Int
    /// Wall-clock seconds.
    public var seconds: Double
    /// `current`, or `conflict` if the push was based on a stale version and lost to a later
    /// edit (it is kept on the server as a conflict version; see `xfer versions`).
    public var state: VersionState = .current
    /// The document's unresolved conflict versions after the push (empty: none).
    public var conflicts: [Int64] = []
    /// Whether the push made a version (false: nothing had changed).
    public var committed: Bool = true
}

/// Tuning for push.
public struct PushOptions: Sendable {
    /// Replace the server's current version even if this root did not sync it.
    public var force = false
    /// Chunk limits for newly read files.
    public var pipeline = ChunkPipeline.Options()
    /// zstd settings for uploaded chunks.
    public var compression = CompressionPolicy.default
    /// Upload requests in flight at once.
    public var uploadsInFlight = 4
    /// Plain bytes per upload request. With ``uploadsInFlight`` it bounds the bodies a push
    /// holds (each framed straight into its body, capacity reserved once): 6 MiB pushed the
    /// 1.9 GB libraries as fast as 8 MiB did and peaked 20 MiB lower (docs/PERFORMANCE.md).
    public var uploadBatchBytes = 6 << 20
    /// Plain bytes per upload request to a server that offers ``ServerFeature/largeUploads``
    /// (up to ``largeUploadFrames`` chunks): the body is made while it is sent, a megabyte of
    /// chunks at a time, so this bounds no memory; 200,000 small files go in ~50 requests, not
    /// ~200, and the server records them in a quarter of the transactions (docs/PERFORMANCE.md).
    public var largeUploadBytes = 32 << 20
    /// Chunks per upload request to such a server (it reads up to 16,384). What a request
    /// holds until it is answered grows with this (about 180 bytes a chunk, its file's path
    /// among them, for each of ``uploadsInFlight`` requests and the one being gathered).
    public var largeUploadFrames = 4_096
    /// Chunk ids per "missing" question.
    public var askBatch = 1024
    /// A name for this device, shown to others (`nil`: the remote's, ``Remote/device``).
    public var device: String? = nil
    /// The version the content was edited from, when the caller knows it better than this
    /// root's state (a mount's staged file): the commit is based on it, so a stale one makes a
    /// conflict version, never an overwrite. `nil`: the version this root synced.
    public var basedOn: Int64? = nil
    /// Patterns (gitignore syntax, relative to the package's root) of files left out of a
    /// package, on top of its `.xferignore` files and the built-in defaults (`--exclude`).
    /// The sync engine does not use it (see ``SyncOptions/exclude``).
    public var exclude: [String] = []
    /// Payload bytes of recently synced small files' chunks the client state keeps, to send
    /// their next edits against (``ChunkCache``); a push offers it at most this many plain bytes.
    public var cacheBytes = ChunkCache.defaultMaximumBytes

    /// Defaults.
    public init() {}
}
