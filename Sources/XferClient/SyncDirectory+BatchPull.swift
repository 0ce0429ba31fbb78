import Foundation
import XferCore
import XferProtocol

// Pulling many small documents together: their manifests and the chunks no local file holds fetched for the batch,
// then each written and recorded as a single pull does. What is fetched and in which order is ``BatchPullDecisions``'s.
extension SyncDirectory {
    /// Small documents of a batch pulled at once (``pullMany(_:sources:progress:)``).
    static let pullsAtOnce = 8

    /// Pulls many small documents: their manifests in one request, the chunks no local file
    /// holds in shared downloads, then each written and recorded as a single pull does (with
    /// its checks: a local edit is never replaced). A document whose manifest did not come
    /// (changed since, or the answer full) is pulled alone. One result per path, in order.
    /// - Throws: Only what stops every document (`unavailable`, `unauthorized`, `cancelled`).
    func pullMany(
        _ paths: [DocumentPath], sources: ChunkSources,
        progress: @escaping @Sendable (DocumentPath) -> @Sendable (TransferProgress) -> Void
    ) async throws
        -> [Result<PullReport, any Error>]
    {
        var prefetched: [Int: PullEngine.Prefetched]
        do {
            prefetched = try await prefetch(paths, sources: sources)
        } catch let error as XferError where error.stopsEveryDocument {
            throw error
        } catch {
            prefetched = [:]  // each document is pulled alone, and says what is wrong
        }
        return try await pull(paths, prefetched: prefetched, sources: sources, progress: progress)
    }

    /// The manifests of `paths` and every chunk they reference that no local file holds,
    /// fetched for the whole batch, by document number. A document missing from the answer
    /// is left to a pull of its own.
    private func prefetch(_ paths: [DocumentPath], sources: ChunkSources) async throws -> [Int: PullEngine.Prefetched] {
        var prefetched = try await manifests(paths)
        // The chunks no local file holds, fetched once for all, each checked against its id and length.
        let local = try sources.locations()
        let wanted = BatchPullDecisions.wanted(prefetched.mapValues(\.manifest), local: local)
        // A changed chunk comes against the one its previous version had in that place.
        var against = PullAgainst(
            cache: ChunkCache(database: state.database), sources: local,
            offers: await remote.connection.features().contains(.chunksAgainst), codec: remote.codec)
        for index in prefetched.keys.sorted() {
            try addPrevious(of: paths[index], prefetched[index]!.manifest, wanted: wanted.lengths, to: &against)
        }
        let (plain, charged) = try await download(wanted, against: &against)
        for index in prefetched.keys {
            prefetched[index]!.chunks = plain
            prefetched[index]!.chunksFetched = charged[index]?.chunks ?? 0
            prefetched[index]!.bytesFetched = charged[index]?.bytes ?? 0
        }
        return prefetched
    }

    /// The manifests of `paths` that came and check out, in one request (end to end, opened
    /// from their carriers), by document number, without chunks yet.
    private func manifests(_ paths: [DocumentPath]) async throws -> [Int: PullEngine.Prefetched] {
        let serverPaths = try paths.map { try remote.serverPath($0) }
        let items = try await remote.connection.manifests(
            container: remote.container, serverPaths.map { ManifestBatchRequest.Wanted(path: $0) })
        var prefetched: [Int: PullEngine.Prefetched] = [:]
        var carriers: [(index: Int, info: DocumentInfo, carrier: Manifest)] = []
        for (index, item) in items.enumerated() {
            // Anything amiss (an error, a digest that does not match) leaves it to a pull of its own, which says what.
            guard let (info, manifest) = item.checked(for: serverPaths[index]) else { continue }
            if remote.endToEnd == nil {
                prefetched[index] = PullEngine.Prefetched(info: info, manifest: manifest, chunks: [:])
            } else {
                carriers.append((index, info, manifest))
            }
        }
        if let endToEnd = remote.endToEnd, !carriers.isEmpty {
            for (index, manifest) in try await open(carriers, serverPaths: serverPaths, with: endToEnd) {
                prefetched[index] = manifest
            }
        }
        return prefetched
    }

    /// End to end, each manifest is sealed in its carrier's pieces: every first piece comes in
    /// shared downloads; a manifest of more pieces asks for the rest itself. One that does not
    /// open is left out, to a pull of its own, which says why.
    private func open(
        _ carriers: [(index: Int, info: DocumentInfo, carrier: Manifest)], serverPaths: [DocumentPath],
        with endToEnd: EndToEndKeys
    ) async throws -> [Int: PullEngine.Prefetched] {
        let connection = remote.connection
        let container = remote.container
        var firsts = Set<ChunkID>()
        for (_, _, carrier) in carriers {
            if let first = try? EndToEndKeys.references(of: carrier).first?.id { firsts.insert(first) }
        }
        var fetched: [ChunkID: EncodedChunk] = [:]
        for batch in Array(firsts).batched(atMost: ProtocolLimits.maximumIDsPerRequest) {
            try await connection.download(batch, in: container) { chunk in fetched[chunk.id] = chunk }
        }
        let known = fetched
        var opened: [Int: PullEngine.Prefetched] = [:]
        for (index, info, carrier) in carriers {
            guard
                let manifest = try? await endToEnd.manifest(
                    in: carrier, sealedPath: serverPaths[index].value, version: info.version,
                    fetch: { ids in
                        let found = ids.compactMap { known[$0] }
                        if found.count == ids.count { return found }
                        var pieces: [EncodedChunk] = []
                        try await connection.download(ids, in: container) { pieces.append($0) }
                        return pieces
                    })
            else { continue }
            opened[index] = PullEngine.Prefetched(info: info, manifest: manifest, chunks: [:], digest: carrier.digest)
        }
        return opened
    }

    /// Offers each wanted chunk of `manifest` against the one the previous version of `path`
    /// synced here had in its place, if one was.
    private func addPrevious(
        of path: DocumentPath, _ manifest: Manifest, wanted: [ChunkID: Int], to against: inout PullAgainst
    ) throws {
        let old = try state.clientState(for: path).document(
            server: remote.connection.server, container: remote.container, path: path)?.manifest
        guard let old else { return }
        var previous = PreviousChunks(sizeLimit: .max)
        for entry in manifest.entries where entry.kind == .file {
            previous.add(fullPath: entry.path, relativePath: entry.path, previous: old)
            var offset: Int64 = 0
            for chunk in entry.chunks {
                if wanted[chunk.id] != nil {
                    against.add(chunk, at: offset, in: entry.path, size: entry.size, previous: previous)
                }
                offset += Int64(chunk.length)
            }
        }
    }

    /// Downloads the `wanted` chunks, each checked against what was asked and its declared
    /// length.
    /// - Returns: Their plain bytes, and the chunks and bytes counted for each document.
    private func download(_ wanted: BatchPullDecisions.Wanted, against: inout PullAgainst) async throws
        -> (plain: [ChunkID: [UInt8]], charged: [Int: (chunks: Int, bytes: Int64)])
    {
        var plain: [ChunkID: [UInt8]] = [:]
        var charged: [Int: (chunks: Int, bytes: Int64)] = [:]
        for batch in wanted.order.batched(atMost: ProtocolLimits.maximumIDsPerRequest) {
            let offer = against.offer(for: batch)
            var kept: [EncodedChunk] = []
            try await remote.connection.download(batch, against: offer.references, in: remote.container) { chunk in
                guard let length = wanted.lengths[chunk.id], plain[chunk.id] == nil else {
                    throw XferError(.corruptChunk, "the server sent chunk \(chunk.id), which was not asked for")
                }
                let bytes = try against.decode(chunk, offer, maximumLength: length, kept: &kept)
                guard bytes.count == length else {
                    throw XferError(
                        .corruptChunk,
                        "chunk \(chunk.id) holds \(bytes.count) bytes, but its manifest declares \(length)")
                }
                plain[chunk.id] = bytes
                charged[wanted.chargedTo[chunk.id]!, default: (0, 0)].chunks += 1
                charged[wanted.chargedTo[chunk.id]!, default: (0, 0)].bytes += Int64(chunk.payload.count)
            }
            against.keep(kept)
        }
        return (plain, charged)
    }

    /// Writes and records each document of the batch, with what was fetched for it.
    /// Each document is made durable before it is renamed into place: one at a time, a small
    /// one's pull waits mostly on its two fsyncs; several at once, their waits overlap.
    private func pull(
        _ paths: [DocumentPath], prefetched: [Int: PullEngine.Prefetched], sources: ChunkSources,
        progress: @escaping @Sendable (DocumentPath) -> @Sendable (TransferProgress) -> Void
    ) async throws -> [Result<PullReport, any Error>] {
        var results = [Result<PullReport, any Error>?](repeating: nil, count: paths.count)
        let (alone, together) = BatchPullDecisions.split(paths.count, kinds: prefetched.mapValues(\.manifest.kind))
        for index in alone {
            results[index] = try await documentOutcome {
                try await pull(
                    paths[index], sources: sources, prefetched: prefetched[index], progress: progress(paths[index]))
            }
        }
        try await withThrowingTaskGroup(of: (Int, Result<PullReport, any Error>).self) { group in
            var running = 0
            for index in together {
                if running >= Self.pullsAtOnce, let (done, result) = try await group.next() {
                    results[done] = result
                    running -= 1
                }
                let (path, document) = (paths[index], prefetched[index])
                group.addTask {
                    (
                        index,
                        try await documentOutcome {
                            try await self.pull(path, sources: sources, prefetched: document, progress: progress(path))
                        }
                    )
                }
                running += 1
            }
            for try await (done, result) in group { results[done] = result }
        }
        // They count as used after every file's access time.
        let used = BatchPullDecisions.used(together) { if case .success = results[$0] { true } else { false } }
        try state.markUsed(used.map { paths[$0] })
        return results.map { $0 ?? .failure(XferError(.internal, "no outcome")) }
    }
}
