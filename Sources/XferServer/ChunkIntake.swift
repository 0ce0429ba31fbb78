import XferCore

/// Stores chunks for an account: what a batch would add is reserved against the quota before
/// the disk (``QuotaGate``), the chunk store verifies and writes, and the account's records
/// follow. One rule for the upload route and the web view's uploads.
struct ChunkIntake: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    let quota: QuotaGate

    /// Stores `batch` (stored encodings) for `account`.
    /// - Parameter startedAt: The store's time when the request was authenticated: a chunk
    ///   deleted by gc after it is not recorded.
    /// - Returns: Chunks and bytes newly recorded for the account.
    /// - Throws: `quota_exceeded` (nothing written), `corrupt_chunk` naming the first refused
    ///   chunk (those before it stored), `io`.
    func store(_ batch: [EncodedChunk], account: Int64, startedAt: Int64?) async throws -> (count: Int, bytes: Int64) {
        guard !batch.isEmpty else { return (0, 0) }
        let lacking = Set(try await metadata.missingChunks(account: account, ids: batch.map(\.id)))
        var adding: Int64 = 0
        var counted: Set<ChunkID> = []
        for chunk in batch where lacking.contains(chunk.id) && counted.insert(chunk.id).inserted {
            adding += Int64(max(0, chunk.length))
        }
        let usage = try await metadata.account(account)
        try quota.reserve(account: account, bytes: adding, used: usage.charged, quota: usage.quota)
        defer { quota.release(account: account, bytes: adding) }
        let results = try await chunks.store(batch)
        let good = zip(batch, results).filter { $0.1 == nil }.map {
            OwnedChunk(id: $0.0.id, length: $0.0.length, sealed: $0.0.encoding == .sealed)
        }
        let added = try await metadata.addChunks(account: account, good, uploadStartedAt: startedAt)
        ServerMetrics.process.chunksStored.increment(by: Int64(added.count))
        ServerMetrics.process.chunkBytesStored.increment(by: added.bytes)
        if let index = results.firstIndex(where: { $0 != nil }), let error = results[index] {
            throw XferError(
                .corruptChunk,
                "chunk \(batch[index].id) was refused: \(error.message); \(added.count) chunks before it were stored",
                cause: error)
        }
        return added
    }
}
