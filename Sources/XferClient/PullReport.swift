import XferCore
import XferProtocol

/// What a pull did (`xfer pull --json` prints it).
public struct PullReport: Codable, Sendable {
    /// The document's path.
    public var document: String
    /// Where it was put (a pull into an existing directory puts it inside, as `cp -r` does).
    public var destination: String = ""
    /// A file (or symlink), a package, or a directory alone.
    public var kind: DocumentKind = .file
    /// The version now on disk.
    public var version: Int64
    /// Files in the document.
    public var files: Int
    /// Content bytes.
    public var bytes: Int64
    /// Chunks downloaded.
    public var chunksFetched: Int
    /// Payload bytes downloaded (compressed chunk bytes).
    public var bytesFetched: Int64
    /// Chunk references satisfied from disk (the previous version, other synced files, an interrupted pull).
    public var chunksReused: Int
    /// Bytes of the manifest (delta) downloaded.
    public var manifestBytes: Int
    /// Wall-clock seconds.
    public var seconds: Double
}

/// Tuning for pull.
public struct PullOptions: Sendable {
    /// Download requests in flight at once.
    public var downloadsInFlight = 4
    /// Plain bytes asked for per download request.
    public var downloadBatchBytes = 8 << 20
    /// Replace whatever is at the destination (`xfer pull --force`). Without it a pull
    /// replaces only what this client itself wrote there from the same document and what has
    /// not changed since; anything else is refused with `conflict` and left as it is, checked
    /// before anything is downloaded and again just before the new version is put in place.
    public var force = false
    /// Payload bytes of recently synced small files' chunks the client state keeps, to fetch
    /// their next edits against (``ChunkCache``); a pull offers it at most this many plain bytes.
    public var cacheBytes = ChunkCache.defaultMaximumBytes

    /// Defaults.
    public init() {}
}
