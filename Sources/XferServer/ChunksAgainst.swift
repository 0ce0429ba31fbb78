import NIOPosix
import Synchronization
import XferCore

/// The server's half of sending a changed chunk against its previous content
/// (``ChunkEncoding/zstdAgainst``): an upload's such chunks are rebuilt into their stored form,
/// and a download sends a chunk against one the client says it holds when that is smaller.
///
/// A reference must be a chunk the account holds: one it does not is never read, so the
/// encoding cannot tell one account what another stores. One request's work is bounded: past
/// ``budget`` plain bytes read and rebuilt, an upload's chunks against a reference are left
/// unresolved and a download's go as stored, so a small request cannot buy unbounded CPU.
final class ChunksAgainst: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    /// The largest plain chunk read or rebuilt.
    let maximumLength: Int
    /// Plain bytes (references and chunks) one request may decode this way: as much as a
    /// full upload body's chunks inflate to.
    let budget: Int
    /// Where the decompressing and compressing runs (never on an event loop).
    let threadPool: NIOThreadPool
    /// Plain bytes decoded so far, and the last reference read (a batch often names one many times).
    private let spent = Mutex<(bytes: Int, last: (id: ChunkID, plain: [UInt8])?)>((0, nil))

    /// One request's worth.
    init(
        metadata: any MetadataStore, chunks: any ChunkStore, maximumLength: Int, budget: Int = 64 << 20,
        threadPool: NIOThreadPool = .singleton
    ) {
        self.metadata = metadata
        self.chunks = chunks
        self.maximumLength = maximumLength
        self.budget = budget
        self.threadPool = threadPool
    }

    /// The chunks of an upload batch as they are stored: each one sent against a reference is
    /// decoded with the reference's bytes, checked against its id, and compressed on its own.
    /// - Returns: The batch with those chunks rebuilt, and the ids of those whose reference the
    ///   account does not hold or that did not decode (the client sends them whole again).
    /// - Throws: `io` if the store fails.
    func rebuild(_ batch: [EncodedChunk], account: Int64) async throws -> (
        chunks: [EncodedChunk], unresolved: [ChunkID]
    ) {
        let against = batch.filter { $0.encoding == .zstdAgainst }
        guard !against.isEmpty else { return (batch, []) }
        let absent = Set(try await metadata.missingChunks(account: account, ids: against.compactMap(\.reference)))
        var rebuilt: [EncodedChunk] = []
        rebuilt.reserveCapacity(batch.count)
        var unresolved: [ChunkID] = []
        // One chunk and its reference at a time: memory stays at two chunks whatever the batch.
        for chunk in batch {
            guard chunk.encoding == .zstdAgainst else {
                rebuilt.append(chunk)
                continue
            }
            guard let referenceID = chunk.reference, !absent.contains(referenceID), spend(chunk.length),
                let reference = try await plain(referenceID)
            else {
                unresolved.append(chunk.id)
                continue
            }
            let maximumLength = maximumLength
            let whole: EncodedChunk? = try await threadPool.runIfActive {
                guard let plain = try? chunk.decoded(maximumLength: maximumLength, reference: (referenceID, reference))
                else { return nil }
                return try plain.withUnsafeBytes { try chunk.stored(plain: $0) }
            }
            if let whole { rebuilt.append(whole) } else { unresolved.append(chunk.id) }
        }
        return (rebuilt, unresolved)
    }

    /// Which of the offered references the account holds, by the chunk each is offered for.
    /// - Parameter offered: Reference by wanted chunk, as the client sent it.
    /// - Throws: `io` if the store fails.
    func usable(_ offered: [ChunkID: ChunkID], account: Int64) async throws -> [ChunkID: ChunkID] {
        guard !offered.isEmpty else { return [:] }
        let absent = Set(try await metadata.missingChunks(account: account, ids: Array(Set(offered.values))))
        return offered.filter { !absent.contains($0.value) }
    }

    /// A loaded chunk as a download sends it: against its offered reference when that payload
    /// is smaller than the stored one, else as stored.
    /// - Parameters:
    ///   - chunk: The chunk as stored.
    ///   - reference: A chunk the account holds and the client says it has, or `nil`.
    /// - Throws: `io` if the store fails.
    func forDownload(_ chunk: EncodedChunk, against reference: ChunkID?) async throws -> EncodedChunk {
        // A sealed chunk goes as it is: its bytes mean nothing here.
        guard chunk.encoding != .sealed, let reference, reference != chunk.id, spend(chunk.length),
            let referencePlain = try await plain(reference)
        else { return chunk }
        let maximumLength = maximumLength
        return try await threadPool.runIfActive {
            guard let plain = try? chunk.decoded(maximumLength: maximumLength) else { return chunk }
            let sent = try plain.withUnsafeBytes {
                try Zstd.encode($0, id: chunk.id, against: (reference, referencePlain))
            }
            return sent.payload.count < chunk.payload.count ? sent : chunk
        }
    }

    /// The plain bytes of a stored chunk, checked against its id; `nil` if it is not stored, is
    /// sealed end to end (no reference), or does not verify (the caller falls back to sending whole).
    private func plain(_ id: ChunkID) async throws -> [UInt8]? {
        if let last = spent.withLock({ $0.last }), last.id == id { return last.plain }
        guard let stored = try? await chunks.load(id), stored.encoding != .zstdAgainst, stored.encoding != .sealed,
            spend(stored.length)
        else { return nil }
        let maximumLength = maximumLength
        let plain = try await threadPool.runIfActive { try? stored.decoded(maximumLength: maximumLength) }
        if let plain { spent.withLock { $0.last = (id, plain) } }
        return plain
    }

    /// Counts `bytes` against the budget; `false` once it would pass it.
    private func spend(_ bytes: Int) -> Bool {
        spent.withLock { spent in
            guard spent.bytes + max(0, bytes) <= budget else { return false }
            spent.bytes += max(0, bytes)
            return true
        }
    }
}
