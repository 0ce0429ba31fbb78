import Foundation
import NIOPosix
import XferCore

/// The chunk files of a data directory written before packs (`DIR/chunks/ab/abcd…`, one file
/// per chunk, ``LocalChunkStore``): moved into the chunk store when the directory is opened.
///
/// Nothing is lost to a crash at any point: a file is removed only after the store has made its
/// chunk durable and recorded where it is, so a second run finds either the file (and packs it
/// again; the first copy is dead space a compaction reclaims) or the packed chunk. A file that
/// fails verification stays where it is and is reported; `xfer verify` reports the chunk
/// missing from the store.
enum LegacyChunkFiles {
    /// What a migration did.
    struct Report: Sendable, Hashable {
        /// Chunks moved into the store.
        var chunks = 0
        /// Files left in place because they are damaged.
        var damaged: [String] = []
    }

    /// Bytes read into memory per store call.
    static let batchBytes = 16 << 20

    /// Moves every chunk file under `directory` into `store`, then removes the emptied
    /// directories. Returns at once when there is no such directory.
    static func migrate(
        _ directory: String, into store: any ChunkStore,
        threadPool: NIOThreadPool = .singleton
    ) async throws -> Report {
        var report = Report()
        guard FileManager.default.fileExists(atPath: directory) else { return report }
        let files = try LocalChunkStore(root: directory)
        try await threadPool.runIfActive {
            _ = try files.removeTemporaryFiles()
            // A sweep a crash interrupted set files aside; they go back, and gc decides again.
            _ = try files.restoreSweptFiles()
        }
        for fan in UInt8.min...UInt8.max {
            let listed = try await threadPool.runIfActive { try files.files(fan: fan) }
            for batch in listed.batched(atMost: .max, budget: batchBytes, cost: { Int($0.bytes) }) {
                // Read with a header check only: the store verifies every chunk before it keeps it.
                let read = try await threadPool.runIfActive {
                    batch.map { file in Result { try files.getUnverified(file.id) } }
                }
                var chunks: [EncodedChunk] = []
                for (file, result) in zip(batch, read) {
                    switch result {
                    case .success(let chunk): chunks.append(chunk)
                    case .failure(let error as XferError) where error.code == .notFound: break  // gone meanwhile
                    case .failure(let error as XferError) where error.code == .corruptChunk:
                        report.damaged.append(files.path(for: file.id))
                    case .failure(let error): throw error
                    }
                }
                let verdicts = try await store.store(chunks)
                var moved: [ChunkID] = []
                for (chunk, verdict) in zip(chunks, verdicts) {
                    if verdict == nil {
                        moved.append(chunk.id)
                    } else {
                        report.damaged.append(files.path(for: chunk.id))
                    }
                }
                report.chunks += moved.count
                let done = moved
                try await threadPool.runIfActive { for id in done { try files.remove(id) } }
            }
        }
        try await threadPool.runIfActive {
            for fan in UInt8.min...UInt8.max { rmdir("\(directory)/\(ChunkID.hexDigits(fan))") }
            rmdir(directory)  // left if damaged files remain
        }
        return report
    }
}
