import ArgumentParser
import Foundation
import XferCore

extension Xfer {
    struct Chunk: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "chunk",
            abstract: "Show the content-defined chunks of files.",
            discussion: """
                Cuts each file (or every regular file under a directory, in path order) into \
                chunks and prints each chunk's offset, length and SHA-256 id, then a summary. \
                Symlinks are not followed. With --compress, chunks are also zstd-compressed and \
                the summary shows the stored size. The JSON shape is in docs/CLI.md.
                """)

        @Argument(help: "Files or directories to chunk.", completion: .file())
        var paths: [String]

        @Flag(help: "Print one JSON object at the end instead of text.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print only the summary, not every chunk.")
        var summary = false

        @Flag(help: "Also compress every chunk with zstd and report the stored size.")
        var compress = false

        @Option(help: "zstd level for --compress (1-19).")
        var level: Int32 = CompressionPolicy.default.level

        @OptionGroup var chunking: ChunkingOptions

        func validate() throws {
            guard (1...19).contains(level) else { throw ValidationError("--level must be between 1 and 19") }
            _ = try chunking.configuration()
        }

        func run() async throws {
            try await runReportingErrors(json: json) { try chunk() }
        }

        private func chunk() throws {
            var options = ChunkPipeline.Options()
            options.chunker = try chunking.configuration()
            options.compression = compress ? CompressionPolicy(level: level) : nil
            let inputs = try ChunkInputs.resolve(paths)
            let report = ChunkReport(names: inputs.files, keepRecords: json, printChunks: !json && !summary)
            let progress = ProgressLine(totalBytes: inputs.totalBytes)
            let clock = ContinuousClock()
            let start = clock.now
            try ChunkPipeline(options: options).run(inputs.files.map { .file($0) }) { event in
                report.handle(event)
                if case .chunk(_, let record) = event { progress.advance(by: Int64(record.length)) }
            }
            progress.finish()
            let seconds = (clock.now - start).seconds
            if json {
                print(try report.json(seconds: seconds, compressed: compress))
            } else {
                print(report.summaryLine(seconds: seconds, compressed: compress))
            }
        }
    }
}

/// The files a `chunk` run reads, named as the user wrote them (or DIR/relative/path).
struct ChunkInputs {
    var files: [String] = []
    var totalBytes: Int64 = 0

    /// Expands directories into their regular files, in path order.
    static func resolve(_ paths: [String]) throws -> ChunkInputs {
        var inputs = ChunkInputs()
        for path in paths {
            let top = try DirectoryWalker.entry(at: path)
            switch top.kind {
            case .file:
                inputs.add(path, size: top.size)
            case .directory:
                for entry in try DirectoryWalker.walk(path) where entry.kind == .file {
                    inputs.add(
                        path.hasSuffix("/") ? path + entry.relativePath : path + "/" + entry.relativePath,
                        size: entry.size)
                }
            case .symlink:
                throw ValidationError("\(path) is a symlink; chunk its target instead")
            }
        }
        return inputs
    }

    private mutating func add(_ path: String, size: Int64) {
        files.append(path)
        totalBytes += size
    }
}
