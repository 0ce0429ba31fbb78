import XferCore
import XferProtocol

/// What reading a document on demand needs (a mount, ``ChunkCache`` beside it): a version's
/// manifest, and chunks by id, every one checked before anyone sees it.
extension DocumentClient {
    /// The manifest of the version `info` describes (a row of ``list(prefix:scope:)``, a
    /// ``stat(_:version:)`` or a change), checked against the digest the server records; in an
    /// end-to-end encrypted container, opened on this device.
    /// - Throws: `invalid_manifest` if it does not match its digest; `not_found`; the server's errors.
    public func manifest(of info: DocumentInfo) async throws -> Manifest {
        let remote = try await unlocked()
        return try await remote.naming {
            try await PullEngine(remote: remote).manifest(try remote.serverPath(info.path), info: info, synced: nil)
                .manifest
        }
    }

    /// How this container's chunks are decoded and checked (end to end, with its key).
    public func codec() async throws -> ChunkCodec {
        try await unlocked().codec
    }

    /// Whether the container is end-to-end encrypted: its listing then holds every document's
    /// size, mode and time sealed, and only its manifest says them.
    public func isEndToEnd() async throws -> Bool {
        try await unlocked().endToEnd != nil
    }

    /// Fetches chunks by id in one request and hands each to `body` with its plain bytes,
    /// decoded and checked against its id (end to end, opened), as they arrive: a plain
    /// container's are checked a few at a time (``EncodedChunk/checkAll(_:_:)``, two hashes
    /// at once), and none is handed on before its check.
    /// - Returns: The bytes that came over the wire (payloads).
    /// - Throws: `corrupt_chunk` for a chunk that does not check out or was not asked for (no
    ///   later chunk is handed on); the server's errors.
    @discardableResult
    public func fetchChunks(
        _ ids: [ChunkID], maximumLength: Int = ChunkerConfiguration.maximumAllowedSize,
        body: (EncodedChunk, [UInt8]) throws -> Void
    ) async throws -> Int {
        let remote = try await unlocked()
        var asked = Set(ids)
        var payloadBytes = 0
        var unchecked: [(chunk: EncodedChunk, plain: [UInt8])] = []
        func handOn() throws {
            try EncodedChunk.checkAll(unchecked.map(\.chunk), unchecked.map(\.plain))
            for (chunk, plain) in unchecked { try body(chunk, plain) }
            unchecked.removeAll(keepingCapacity: true)
        }
        try await remote.connection.download(Array(asked), in: remote.container) { chunk in
            guard asked.remove(chunk.id) != nil else {
                throw XferError(
                    .corruptChunk, "the server sent chunk \(chunk.id), which was not asked for or was sent already")
            }
            payloadBytes += chunk.payload.count
            let (plain, checked) = try remote.codec.inflate(chunk, maximumLength: maximumLength)
            guard !checked else { return try body(chunk, plain) }
            unchecked.append((chunk, plain))
            if unchecked.count >= 16 || unchecked.reduce(0, { $0 + $1.plain.count }) >= 1 << 20 { try handOn() }
        }
        try handOn()
        return payloadBytes
    }
}
