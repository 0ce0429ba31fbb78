import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XferCore
import XferProtocol

/// The chunk routes: which the server lacks, uploads (a framed body, retried from its start) and downloads.
///
/// Chunks are kept per account. For a container another account shares with this one
/// (`OWNER/NAME`), each takes `in: container` and reaches the owner's chunks, as the container's
/// role allows (docs/SHARING.md); for any other, the account's own.
extension ServerConnection {
    /// A chunk route, naming a shared container when `container` is one.
    static func chunkRoute(_ route: String, _ container: ContainerName?) -> String {
        guard let container, container.owner != nil else { return route }
        return route + "?container=" + escape(container.pathSegment)
    }

    /// The ids (of `ids`) the server lacks, asked in batches of the protocol's maximum.
    public func missing(_ ids: [ChunkID], in container: ContainerName? = nil) async throws -> [ChunkID] {
        var missing: [ChunkID] = []
        var start = 0
        while start < ids.count {
            let batch = Array(ids[start..<min(ids.count, start + ProtocolLimits.maximumIDsPerRequest)])
            missing += try await json(
                ChunkIDList.self, "POST", Self.chunkRoute("/v1/chunks/missing", container),
                body: WireJSON.encode(ChunkIDList(ids: batch))
            ).parsed()
            start += batch.count
        }
        return missing
    }

    /// Uploads chunks in one framed body.
    public func upload(_ chunks: [EncodedChunk], in container: ContainerName? = nil) async throws -> UploadResult {
        try await upload(frames: ChunkFrames.encode(chunks), in: container)
    }

    /// Uploads chunks already framed (``ChunkFrames/encode(_:)``).
    public func upload(frames body: [UInt8], in container: ContainerName? = nil) async throws -> UploadResult {
        guard uploadLimit != nil else {
            let response = try await send(
                "POST", Self.chunkRoute("/v1/chunks", container), body: body, contentType: "application/octet-stream")
            return try WireJSON.decode(UploadResult.self, from: response.readableBytesView)
        }
        // Paced: the same body as one piece that BodyPieces slices, each slice waiting its turn
        // (its length known, so any server takes it).
        return try await upload(length: Int64(body.count), in: container) {
            let whole = Locked<[UInt8]?>(body)
            return {
                whole.withLock { piece in
                    defer { piece = nil }
                    return piece
                }
            }
        }
    }

    /// Uploads a body made a piece at a time while it is sent (chunked, of unknown length), so
    /// only a piece is held at once: `nextPiece` is called for each until it returns `nil` (the
    /// first piece starts with the body's magic). Only to a server that offers
    /// ``ServerFeature/largeUploads``; an error `nextPiece` throws ends the request and is thrown here.
    public func upload(in container: ContainerName? = nil, pieces nextPiece: @escaping @Sendable () throws -> [UInt8]?)
        async throws -> UploadResult
    {
        // Its pieces are made as it is sent, once: it is not sent again.
        let request = try chunkUpload(nextPiece, length: nil, in: container)
        let body = try await answer(try await execute(request, timeout: chunkTimeout)).1
        return try WireJSON.decode(UploadResult.self, from: body.readableBytesView)
    }

    /// Uploads a body made a piece at a time while it is sent, as ``upload(pieces:)``, under
    /// ``retry``: `makePieces` gives a new maker of the whole body for each try (a chunk upload
    /// names its content, so a second try stores nothing twice).
    public func upload(in container: ContainerName? = nil, retrying makePieces: () -> @Sendable () throws -> [UInt8]?)
        async throws -> UploadResult
    {
        try await upload(length: nil, in: container, makePieces)
    }

    /// ``upload(retrying:)`` of a body of `length` bytes when known.
    private func upload(
        length: Int64?, in container: ContainerName?, _ makePieces: () -> @Sendable () throws -> [UInt8]?
    ) async throws -> UploadResult {
        let response = try await respond("POST", Self.chunkRoute("/v1/chunks", container), timeout: chunkTimeout) {
            try chunkUpload(makePieces(), length: length, in: container)
        }
        return try WireJSON.decode(UploadResult.self, from: try await answer(response).1.readableBytesView)
    }

    /// A `POST /v1/chunks` whose body is the pieces `make` makes, paced by ``uploadLimit``.
    private func chunkUpload(
        _ make: @escaping @Sendable () throws -> [UInt8]?, length: Int64?, in container: ContainerName?
    ) throws -> HTTPClientRequest {
        var request = try makeRequest("POST", Self.chunkRoute("/v1/chunks", container))
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.body = .stream(
            BodyPieces(make: make, limit: uploadLimit), length: length.map { .known($0) } ?? .unknown)
        return request
    }

    /// A request body as the pieces a closure makes, one when the client asks for more; under a
    /// ``BandwidthLimit``, cut into slices (``BandwidthLimit/slice``) that each wait their turn,
    /// so the rate holds over any piece's size and no connection waits long between two.
    private struct BodyPieces: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let make: @Sendable () throws -> [UInt8]?
        var limit: BandwidthLimit?

        struct AsyncIterator: AsyncIteratorProtocol {
            let make: @Sendable () throws -> [UInt8]?
            let limit: BandwidthLimit?
            var pending: ArraySlice<UInt8> = []

            mutating func next() async throws -> ByteBuffer? {
                try Task.checkCancellation()
                guard let limit else { return try make().map { ByteBuffer(bytes: $0) } }
                while pending.isEmpty {
                    guard let piece = try make() else { return nil }
                    pending = piece[...]
                }
                let slice = pending.prefix(limit.slice)
                pending = pending.dropFirst(slice.count)
                try await limit.take(slice.count)
                return ByteBuffer(bytes: slice)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(make: make, limit: limit) }
    }

    /// Downloads chunks, handing each to `onChunk` as its frame arrives (not yet verified:
    /// the caller verifies).
    /// - Parameter against: Chunks this client holds, by wanted chunk, that the server may send
    ///   it against (``ChunkEncoding/zstdAgainst``); the caller decodes those with them.
    public func download(
        _ ids: [ChunkID], against: [ChunkID: ChunkID] = [:], in container: ContainerName? = nil,
        onChunk: (EncodedChunk) async throws -> Void
    ) async throws {
        let body = WireJSON.encode(ChunkIDList(ids: ids, against: against))
        let route = Self.chunkRoute("/v1/chunks/download", container)
        let response = try await respond("POST", route, timeout: chunkTimeout) {
            var request = try makeRequest("POST", route, body: body)
            request.headers.add(name: "Content-Type", value: "application/json")
            return request
        }
        guard response.status == .ok else { throw try await Self.error(from: response) }
        var decoder = ChunkFrameDecoder(limits: ChunkFrameLimits(maximumFrames: ids.count, maximumBodyLength: Int.max))
        var received = 0
        do {
            for try await buffer in response.body {
                // Under --bwlimit the next piece is read only when this one's turn has come.
                try await downloadLimit?.take(buffer.readableBytes)
                for chunk in try decoder.feed(buffer.readableBytesView) {
                    try await onChunk(chunk)
                    received += 1
                }
            }
        } catch let error as XferError {
            throw error
        } catch is CancellationError {
            throw XferError(.cancelled, "cancelled")
        } catch {
            // The stream broke mid-body (a reset, a truncation): what arrived whole was kept.
            throw XferError(
                .unavailable,
                "the connection to \(server) broke while downloading chunks; run the command again to resume",
                cause: DescribedError(error))
        }
        try decoder.finish()
        guard received == ids.count else {
            throw XferError(.internal, "the server sent \(received) of \(ids.count) chunks")
        }
    }
}
