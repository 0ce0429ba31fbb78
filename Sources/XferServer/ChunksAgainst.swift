import NIOPosix
import XferCore

/// The server's half of sending a changed chunk against its previous content
/// (``ChunkEncoding/zstdAgainst``): an upload's such chunks are rebuilt into their stored form,
/// and a download sends a chunk against one the client says it holds when that is smaller.
///
/// A reference must be a chunk the account holds: one it does not is never read, so the
/// encoding cannot tell one account what another stores.
struct ChunksAgainst: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    /// The largest plain chunk read or rebuilt.
    let maximumLength: Int
    /// Where the decompressing and compressing runs (never on an event loop).
    var threadPool: NIOThreadPool = .singleton

    /// The chunks of an upload batch as they are stored: each one sent against a reference is
    /// decoded with the reference's bytes, checked against its id, and compressed on its own.
    /// - Returns: The batch with those chunks rebuilt, and the ids of those whose reference the
    ///   account does not hold or that did not decode (the client sends them whole again).
    /// - Throws: `io` if the store fails.
    func rebuild(_ batch: [EncodedChunk], account: Int64) async throws -> (chunks: [EncodedChunk], unresolved: [ChunkID]) {
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
            guard let referenceID = chunk.reference, !absent.contains(referenceID),
                  let reference = try await plain(referenceID) else {
                unresolved.append(chunk.id)
                continue
            }
            let maximumLength = maximumLength
            let whole: EncodedChunk? = try await threadPool.runIfActive {
                guard let plain = try? chunk.decoded(maximumLength: maximumLength, reference: (referenceID, reference)) else { return nil }
                return try plain.withUnsafeBytes { try Zstd.encode($0, id: chunk.id) }
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
        guard let reference, reference != chunk.id, let referencePlain = try await plain(reference) else { return chunk }
        let maximumLength = maximumLength
        return try await threadPool.runIfActive {
            guard let plain = try? chunk.decoded(maximumLength: maximumLength) else { return chunk }
            let sent = try plain.withUnsafeBytes { try Zstd.encode($0, id: chunk.id, against: (reference, referencePlain)) }
            return sent.payload.count < chunk.payload.count ? sent : chunk
        }
    }

    /// The plain bytes of a stored chunk, checked against its id; `nil` if it is not stored or
    /// does not verify (the caller falls back to sending whole).
    private func plain(_ id: ChunkID) async throws -> [UInt8]? {
        guard let stored = try? await chunks.load(id), stored.encoding != .zstdAgainst else { return nil }
        let maximumLength = maximumLength
        return try await threadPool.runIfActive { try? stored.decoded(maximumLength: maximumLength) }
    }
}
