import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The chunk routes: which are missing, uploads, downloads.
extension Routes {
    @Sendable func missing(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let ids = try await Self.decode(ChunkIDList.self, request).parsed()
        try Self.checkCount(ids.count)
        return Self.json(ChunkIDList(ids: try await metadata.missingChunks(account: target.accountID, ids: ids)))
    }

    /// `POST /v1/chunks`: one of the token's uploads at once (``TokenLimiter``).
    @Sendable func upload(_ request: Request, context: XferRequestContext) async throws -> Response {
        try await limiter.upload(context.tokenKey) { try await storeChunks(request, context: context) }
    }

    func storeChunks(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        // The store's time when the request was authenticated, before anything was stored: a
        // chunk deleted by gc after this is not recorded.
        let startedAt = target.principal.authenticatedAt
        var decoder = ChunkFrameDecoder(limits: limits.uploadFrames)
        var received = 0
        var stored = 0
        var storedBytes: Int64 = 0
        var pending: [EncodedChunk] = []
        var pendingBytes = 0
        var unresolved: [ChunkID] = []
        let against = ChunksAgainst(metadata: metadata, chunks: chunks, maximumLength: limits.frames.maximumChunkLength)
        let intake = ChunkIntake(metadata: metadata, chunks: chunks, quota: quota)
        func flush() async throws {
            guard !pending.isEmpty else { return }
            // Chunks sent against a reference are rebuilt into their stored form first.
            let (batch, left) = try await against.rebuild(pending, account: target.accountID)
            unresolved += left
            pending = []
            pendingBytes = 0
            let added = try await intake.store(batch, account: target.accountID, startedAt: startedAt)
            stored += added.count
            storedBytes += added.bytes
        }
        for try await buffer in request.body {
            ServerMetrics.process.bytesIn.increment(by: Int64(buffer.readableBytes))
            let frames = try decoder.feed(buffer.readableBytesView)
            received += frames.count
            ServerMetrics.process.chunksReceived.increment(by: Int64(frames.count))
            for frame in frames {
                if frame.encoding == .zstdAgainst && !limits.features.contains(.chunksAgainst) {
                    throw XferError(
                        .badRequest,
                        "chunk \(frame.id) is sent against another chunk (encoding 2), which this server does not offer; send it whole"
                    )
                }
                if frame.encoding == .sealed && !limits.features.contains(.sealedChunks) {
                    throw XferError(
                        .badRequest,
                        "chunk \(frame.id) is sealed end to end (encoding 3), which this server does not offer")
                }
                pending.append(frame)
                pendingBytes += frame.payload.count
            }
            if pendingBytes >= 8 << 20 { try await flush() }
        }
        try decoder.finish()
        try await flush()
        return Self.json(
            UploadResult(received: received, stored: stored, storedBytes: storedBytes, unresolved: unresolved))
    }

    @Sendable func download(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let list = try await Self.decode(ChunkIDList.self, request)
        let ids = try list.parsed()
        try Self.checkCount(ids.count)
        let absent = try await metadata.missingChunks(account: target.accountID, ids: ids)
        guard absent.isEmpty else {
            throw XferError(
                .notFound,
                "\(absent.count) of the requested chunks are not stored for this account (first: \(absent[0]))")
        }
        let chunks = chunks
        let against = ChunksAgainst(metadata: metadata, chunks: chunks, maximumLength: limits.frames.maximumChunkLength)
        // Offers are ignored (every chunk goes as stored) when this server does not offer the feature.
        let references =
            limits.features.contains(.chunksAgainst)
            ? try await against.usable(list.parsedAgainst(ids: ids), account: target.accountID) : [:]
        return Response(
            status: .ok, headers: [.contentType: "application/octet-stream"],
            body: ResponseBody { writer in
                try await writer.write(ByteBuffer(bytes: ChunkFrames.magic))
                // Batches of loads run ahead of the writer (an object store answers each request in
                // a round trip), and frames go out in the order asked; at most readAhead × readBatch
                // chunks wait in memory.
                let size = max(1, chunks.readBatch)
                let batches = stride(from: 0, to: ids.count, by: size).map {
                    Array(ids[$0..<min($0 + size, ids.count)])
                }
                let window = max(1, chunks.readAhead)
                try await withThrowingTaskGroup(of: (Int, [EncodedChunk]).self) { group in
                    var started = 0
                    var written = 0
                    var ready: [Int: [EncodedChunk]] = [:]
                    func start() {
                        let index = started
                        group.addTask { (index, try await chunks.load(batches[index])) }
                        started += 1
                    }
                    while started < min(window, batches.count) { start() }
                    while written < batches.count, let (index, loaded) = try await group.next() {
                        ready[index] = loaded
                        while let next = ready.removeValue(forKey: written) {
                            var sent: [EncodedChunk] = []
                            sent.reserveCapacity(next.count)
                            for chunk in next {
                                sent.append(try await against.forDownload(chunk, against: references[chunk.id]))
                            }
                            // Each frame written once, into a buffer of the batch's size.
                            var frames = ByteBufferAllocator().buffer(
                                capacity: sent.reduce(0) { $0 + ChunkFrames.frameHeaderSize + $1.payload.count })
                            for chunk in sent {
                                ChunkFrames.withHeader(of: chunk) { _ = frames.writeBytes($0) }
                                frames.writeBytes(chunk.payload)
                            }
                            ServerMetrics.process.bytesOut.increment(by: Int64(frames.readableBytes))
                            try await writer.write(frames)
                            written += 1
                            if started < batches.count { start() }
                        }
                    }
                }
                try await writer.finish(nil)
            })
    }
}
