import Foundation
import Synchronization
import XferCore

/// Collects pipeline events for `xfer chunk` and renders them as text or JSON.
///
/// Events arrive on the pipeline's delivery queue, one at a time; the lock only makes the
/// final read from the main thread safe.
final class ChunkReport: Sendable {
    struct FileResult: Codable {
        var path: String
        var size: Int64
        var chunks: [ChunkJSON]
    }

    struct ChunkJSON: Codable {
        var offset: Int64
        var length: Int
        var id: String
        var encoding: String?
        var storedLength: Int?
    }

    struct State {
        var files: [FileResult] = []
        var totalFiles = 0
        var totalBytes: Int64 = 0
        var totalChunks = 0
        var storedBytes: Int64 = 0
        var compressedChunks = 0
    }

    private let names: [String]
    private let keepRecords: Bool
    private let printChunks: Bool
    private let state = Mutex(State())

    init(names: [String], keepRecords: Bool, printChunks: Bool) {
        self.names = names
        self.keepRecords = keepRecords
        self.printChunks = printChunks
    }

    func handle(_ event: ChunkEvent) {
        state.withLock { state in
            switch event {
            case .fileStarted(let file, _, _):
                if keepRecords { state.files.append(FileResult(path: names[file], size: 0, chunks: [])) }
                if printChunks { print(names[file]) }
            case .chunk(_, let record):
                state.totalChunks += 1
                if let encoded = record.encoded {
                    state.storedBytes += Int64(encoded.payload.count)
                    if encoded.encoding == .zstd { state.compressedChunks += 1 }
                }
                if keepRecords {
                    state.files[state.files.count - 1].chunks.append(
                        ChunkJSON(
                            offset: record.offset, length: record.length, id: record.id.hex,
                            encoding: record.encoded?.encoding.description, storedLength: record.encoded?.payload.count)
                    )
                }
                if printChunks {
                    var line = "  \(pad(record.offset, 12)) \(pad(Int64(record.length), 8)) \(record.id.hex)"
                    if let encoded = record.encoded { line += " \(encoded.encoding) \(encoded.payload.count)" }
                    print(line)
                }
            case .fileFinished(_, let bytes, let chunks, _):
                state.totalFiles += 1
                state.totalBytes += bytes
                if keepRecords { state.files[state.files.count - 1].size = bytes }
                if printChunks { print("  \(bytes) bytes in \(chunks) chunks") }
            }
        }
    }

    func summaryLine(seconds: Double, compressed: Bool) -> String {
        let s = state.withLock { $0 }
        let mean = s.totalChunks > 0 ? s.totalBytes / Int64(s.totalChunks) : 0
        var line =
            "\(s.totalFiles) files, \(ByteCount(s.totalBytes)) (\(s.totalBytes) bytes), \(s.totalChunks) chunks, "
            + "mean chunk \(ByteCount(mean)), \(String(format: "%.3f", seconds)) s, "
            + "\(String(format: "%.1f", Self.megabytesPerSecond(s.totalBytes, seconds))) MB/s"
        if compressed {
            let ratio = s.totalBytes > 0 ? Double(s.storedBytes) / Double(s.totalBytes) : 1
            line +=
                ", stored \(ByteCount(s.storedBytes)) (\(String(format: "%.1f", ratio * 100)) %, "
                + "\(s.compressedChunks) of \(s.totalChunks) chunks compressed)"
        }
        return line
    }

    func json(seconds: Double, compressed: Bool) throws -> String {
        let s = state.withLock { $0 }
        struct Summary: Codable {
            var files: Int
            var bytes: Int64
            var chunks: Int
            var meanChunkSize: Int64
            var seconds: Double
            var mbPerS: Double
            var storedBytes: Int64?
            var compressedChunks: Int?
        }
        struct Output: Codable {
            var files: [FileResult]
            var summary: Summary
        }
        let summary = Summary(
            files: s.totalFiles, bytes: s.totalBytes, chunks: s.totalChunks,
            meanChunkSize: s.totalChunks > 0 ? s.totalBytes / Int64(s.totalChunks) : 0,
            seconds: seconds, mbPerS: Self.megabytesPerSecond(s.totalBytes, seconds),
            storedBytes: compressed ? s.storedBytes : nil,
            compressedChunks: compressed ? s.compressedChunks : nil)
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(Output(files: s.files, summary: summary)), as: UTF8.self)
    }

    static func megabytesPerSecond(_ bytes: Int64, _ seconds: Double) -> Double {
        seconds > 0 ? Double(bytes) / 1e6 / seconds : 0
    }

    private func pad(_ value: Int64, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }
}
