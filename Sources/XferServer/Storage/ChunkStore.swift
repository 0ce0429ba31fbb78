import NIOPosix
import XferCore

/// Where the server keeps chunk payloads. The routes see only this protocol: files under the
/// data directory are the embedded default; S3-compatible storage comes with many servers.
public protocol ChunkStore: Sendable {
    /// Verifies every chunk (decodes it and checks its size and SHA-256) and stores the good
    /// ones durably before returning.
    /// - Returns: Per chunk, in order: `nil` if stored (or already present), else why it was refused.
    /// - Throws: `io` if storing fails.
    func store(_ chunks: [EncodedChunk]) async throws -> [XferError?]
    /// A chunk as stored (the receiver verifies it).
    /// - Throws: `not_found`, `io`.
    func load(_ id: ChunkID) async throws -> EncodedChunk
}

/// The embedded chunk store: ``LocalChunkStore`` files, with blocking I/O and verification
/// run on NIO's thread pool, never on an event loop.
public struct FileChunkStore: ChunkStore {
    /// The store on disk.
    public let files: LocalChunkStore
    private let threadPool: NIOThreadPool

    /// Wraps a store.
    /// - Parameters:
    ///   - files: The local store.
    ///   - threadPool: Where blocking work runs.
    public init(files: LocalChunkStore, threadPool: NIOThreadPool = .singleton) {
        self.files = files
        self.threadPool = threadPool
    }

    public func store(_ chunks: [EncodedChunk]) async throws -> [XferError?] {
        let files = files
        return try await threadPool.runIfActive {
            var results: [XferError?] = []
            results.reserveCapacity(chunks.count)
            var wrote = false
            for chunk in chunks {
                do {
                    // Not yet recorded for the account: a present file is re-checked (see put).
                    wrote = try files.put(chunk, durable: false, verifyExisting: true) || wrote
                    results.append(nil)
                } catch let error as XferError where error.code == .corruptChunk || error.code == .tooLarge || error.code == .compression {
                    results.append(error)
                }
            }
            // One syncfs for the whole batch makes every file and rename durable.
            if wrote { try files.synchronize() }
            return results
        }
    }

    public func load(_ id: ChunkID) async throws -> EncodedChunk {
        let files = files
        return try await threadPool.runIfActive { try files.getUnverified(id) }
    }
}
