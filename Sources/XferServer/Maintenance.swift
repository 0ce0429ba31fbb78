import Foundation
import XferCore
import XferProtocol

/// Garbage collection and verification of a server's stores. Both are safe while the server
/// runs: neither holds a lock across the stores, and the sweep re-checks before it deletes.
public struct Maintenance: Sendable {
    /// The metadata store.
    public let metadata: any MetadataStore
    /// The chunk store.
    public let chunks: any ChunkStore

    /// Works on these stores.
    public init(metadata: any MetadataStore, chunks: any ChunkStore) {
        self.metadata = metadata
        self.chunks = chunks
    }

    /// Works on an opened data directory's stores.
    public init(data: ServerData) {
        self.init(metadata: data.metadata, chunks: data.chunks)
    }

    /// The default grace period: a day. An upload's chunks are leased to its account for this
    /// long before a commit must reference them.
    public static let defaultGrace: Int64 = 86_400
    /// The longest grace period taken into account: a century.
    public static let maximumGrace: Int64 = 100 * 366 * 86_400

    /// Removes what no version needs, in three steps:
    /// 1. `uploading` versions announced more than `grace` ago (their pushes are long dead);
    /// 2. chunks accounts hold for no committed version and recorded more than `grace` ago
    ///    (leases of uploads whose commit never came), giving the bytes back to the quota;
    /// 3. chunk files no account holds, untouched for `grace`, via ``ChunkStore/sweep``.
    ///
    /// A chunk uploaded for a commit not yet made is held by its account (its lease), so step 3
    /// keeps it; step 2 only drops it after `grace`. A commit that finds one of its chunks
    /// released answers `missing_chunks` and the client uploads it again.
    /// - Parameters:
    ///   - grace: Seconds.
    ///   - dryRun: Count only.
    ///   - now: The time the grace period counts back from (tests set it to tell apart what
    ///     was stored a moment before another thing).
    public func collectGarbage(grace: Int64 = Maintenance.defaultGrace, dryRun: Bool = false, now: Date = Date())
        async throws -> GarbageReport
    {
        let start = ContinuousClock.now
        // Longer than a century means "keep everything young"; the cap keeps the arithmetic in range.
        let grace = min(max(grace, 0), Self.maximumGrace)
        var report = GarbageReport(graceSeconds: grace, dryRun: dryRun)
        let now = now.timeIntervalSince1970
        let cutoff = Int64(now) - grace
        if !dryRun {
            report.uploadsExpired = try await metadata.expireUploads(olderThan: cutoff)
            let released = try await metadata.expireLeases(olderThan: cutoff)
            report.leasesExpired = released.chunks
            report.quotaReleased = released.bytes
            // In the store's time, which set the expiries (the database's clock on PostgreSQL),
            // moved as far as `now` is from this process's clock (a caller may pass another now).
            let shift = Int64((now - Date().timeIntervalSince1970) * 1e9)
            let storeCutoff = try await metadata.clock() + shift - grace * 1_000_000_000
            report.tokensExpired = try await metadata.removeExpiredTokens(before: storeCutoff)
        }
        let modifiedBefore = Int64((now - Double(grace)) * 1e9)
        let metadata = metadata
        for shard in UInt8.min...UInt8.max {
            let files = try await chunks.list(shard: shard)
            report.chunksScanned += files.count
            for batch in stride(from: 0, to: files.count, by: 512).map({ files[$0..<min($0 + 512, files.count)] }) {
                let held = try await metadata.heldChunks(batch.map(\.id))
                let candidates = batch.filter { !held.contains($0.id) && $0.modified * 1_000_000_000 < modifiedBefore }
                guard !candidates.isEmpty else { continue }
                if dryRun {
                    report.chunksRemoved += candidates.count
                    report.bytesRemoved += candidates.reduce(0) { $0 + $1.bytes }
                } else {
                    let removed = try await chunks.sweep(
                        candidates.map(\.id), modifiedBefore: modifiedBefore,
                        begin: { try await metadata.beginDeletion($0) },
                        end: { try await metadata.endDeletion($0) })
                    report.chunksRemoved += removed.count
                    report.bytesRemoved += removed.bytes
                }
            }
        }
        if !dryRun {
            let compaction = try await chunks.compact(modifiedBefore: modifiedBefore)
            report.packsRemoved = compaction.packsRemoved
            report.packsRewritten = compaction.packsRewritten
            report.packBytesFreed = compaction.bytesFreed
            // No upload runs longer than an hour (requests have deadlines), so older deletion
            // records can no longer refuse anything.
            try await metadata.forgetDeletions(
                before: DeletionRules.forgetBefore(now: try await metadata.clock(), grace: grace))
        }
        report.milliseconds = Int64((ContinuousClock.now - start).seconds * 1000)
        return report
    }
}
