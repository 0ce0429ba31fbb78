import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import XferCore
import XferProtocol

/// One file of an upload, cut into chunks as its bytes arrive.
struct UploadedFile {
    let path: DocumentPath
    let intake: ChunkIntake
    let account: Int64
    let startedAt: Int64
    var chunker = Chunker(configuration: .default)
    var current: [UInt8] = []
    var references: [Manifest.ChunkReference] = []
    var plain: [[UInt8]] = []
    var plainBytes = 0
    var size: Int64 = 0

    init(path: DocumentPath, intake: ChunkIntake, account: Int64, startedAt: Int64) {
        self.path = path
        self.intake = intake
        self.account = account
        self.startedAt = startedAt
    }

    mutating func feed(_ bytes: [UInt8]) async throws {
        size += Int64(bytes.count)
        var rest = bytes[...]
        while !rest.isEmpty {
            let cut = rest.withUnsafeBytes { chunker.nextBoundary(in: $0) }
            guard let cut else {
                current += rest
                break
            }
            current += rest.prefix(cut)
            rest = rest.dropFirst(cut)
            try await cutChunk()
        }
    }

    mutating func cutChunk() async throws {
        guard !current.isEmpty else { return }
        plain.append(current)
        plainBytes += current.count
        current = []
        if plainBytes >= 8 << 20 { try await flush() }
    }

    /// The batches being hashed, compressed and stored while the next one arrives, oldest first.
    var inFlight: [Task<[Manifest.ChunkReference], any Error>] = []

    /// Batches stored at once: each store ends in its own fdatasync, and several overlap as a
    /// device's parallel uploads do.
    static let window = 3

    /// Hands what was cut to be hashed and compressed (off the event loop, on every core) and
    /// stored, while the body goes on arriving: at most ``window`` batches at a time, so at
    /// most ``window`` + 1 batches (32 MiB) are held. The oldest is awaited first, so the
    /// references stay in order.
    mutating func flush() async throws {
        guard !plain.isEmpty else { return }
        let batch = plain
        plain = []
        plainBytes = 0
        if inFlight.count >= Self.window { references += try await inFlight.removeFirst().value }
        let (intake, account, startedAt) = (intake, account, startedAt)
        inFlight.append(
            Task {
                let encoded = try await Self.encode(batch)
                try Task.checkCancellation()
                _ = try await intake.store(encoded, account: account, startedAt: startedAt)
                return encoded.map { Manifest.ChunkReference(id: $0.id, length: $0.length) }
            })
    }

    /// Cancels the batches still in flight and waits until they are done, so an upload that
    /// failed (its body broken, a refusal before its commit) leaves no work running past its
    /// request: a batch not yet stored is dropped; one stored is leased, and gc releases it.
    mutating func abandon() async {
        for task in inFlight { task.cancel() }
        for task in inFlight { _ = await task.result }
        inFlight = []
    }

    /// The chunks of `batch` hashed and compressed, in order, a slice per core on the thread pool.
    static func encode(_ batch: [[UInt8]]) async throws -> [EncodedChunk] {
        let width = min(batch.count, max(1, System.coreCount))
        let size = (batch.count + width - 1) / width
        let ranges = stride(from: 0, to: batch.count, by: size).map { $0..<min($0 + size, batch.count) }
        return try await withThrowingTaskGroup(of: (Int, [EncodedChunk]).self) { group in
            for (index, range) in ranges.enumerated() {
                group.addTask {
                    (
                        index,
                        try await NIOThreadPool.singleton.runIfActive {
                            try batch[range].map { bytes in
                                try bytes.withUnsafeBytes { buffer in try Zstd.encode(buffer, id: ChunkID.of(buffer)) }
                            }
                        }
                    )
                }
            }
            var parts = [[EncodedChunk]](repeating: [], count: ranges.count)
            for try await (index, encoded) in group { parts[index] = encoded }
            return parts.flatMap { $0 }
        }
    }

    /// The last chunk cut and stored; the file's manifest.
    mutating func finish() async throws -> Manifest {
        _ = chunker.finish()
        try await cutChunk()
        try await flush()
        while !inFlight.isEmpty { references += try await inFlight.removeFirst().value }
        return try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: WebRoutes.now(), chunks: references)
            ])
    }
}
