import Foundation
import Testing
import XferCore
import XferTestSupport

/// Runs the built `xfer` binary and captures its output, as swift-argument-parser's
/// `AssertExecuteCommand` does.
struct XferProcess {
    var stdout: String
    var stderr: String
    var status: Int32

    static let binary: URL = {
        // The test bundle sits in the same build directory as the xfer executable.
        var directory = Bundle.main.bundleURL
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("xfer")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory.deleteLastPathComponent()
        }
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return root.appendingPathComponent(".build/debug/xfer")
    }()

    static func run(_ arguments: String...) throws -> XferProcess {
        try run(arguments, environment: nil)
    }

    /// Runs `xfer ARGS` to completion, in `environment` if given (else this process's).
    static func run(_ arguments: [String], environment: [String: String]?) throws -> XferProcess {
        let process = ChildProcess()
        process.executableURL = binary
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return XferProcess(
            stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self),
            status: process.terminationStatus)
    }
}

@Suite struct ChunkCommandTests {
    static func makeTree() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        var generator = SplitMix64(seed: 5)
        let big = (0..<(100_000)).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }  // 800 KB
        try Data(big).write(to: root.appendingPathComponent("big.bin"))
        try Data("hello\n".utf8).write(to: root.appendingPathComponent("sub/hello.txt"))
        try Data().write(to: root.appendingPathComponent("sub/empty"))
        return root
    }

    @Test func versionAndHelp() throws {
        let version = try XferProcess.run("--version")
        #expect(
            version.status == 0 && version.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == XferVersion.current
        )
        let help = try XferProcess.run("chunk", "--help")
        #expect(help.status == 0)
        for word in ["--json", "--summary", "--compress", "--min", "--avg", "--max", "USAGE"] {
            #expect(help.stdout.contains(word), "help lacks \(word)")
        }
    }

    @Test func jsonDescribesEveryFileAndMatchesTheLibrary() throws {
        let root = try Self.makeTree()
        defer { try? FileManager.default.removeItem(at: root) }
        let result = try XferProcess.run("chunk", "--json", root.path)
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let files = try #require(object["files"] as? [[String: Any]])
        #expect(
            files.map { ($0["path"] as? String)?.replacingOccurrences(of: root.path + "/", with: "") }
                == ["big.bin", "sub/empty", "sub/hello.txt"])
        let summary = try #require(object["summary"] as? [String: Any])
        #expect(summary["files"] as? Int == 3)
        #expect(summary["bytes"] as? Int == 800_006)
        for key in ["chunks", "mean_chunk_size", "seconds", "mb_per_s"] {
            #expect(summary[key] != nil, "summary lacks \(key)")
        }
        // The ids are the library's.
        let big = try Array(Data(contentsOf: root.appendingPathComponent("big.bin")))
        let expected = try ChunkPipeline().records(for: [.bytes(name: "big", big)])[0]
        let chunks = try #require(files[0]["chunks"] as? [[String: Any]])
        #expect(chunks.map { $0["id"] as? String } == expected.map { $0.id.hex })
        #expect(chunks.map { $0["offset"] as? Int } == expected.map { Int($0.offset) })
        #expect(chunks.map { $0["length"] as? Int } == expected.map { $0.length })
        let hello = try #require((files[2]["chunks"] as? [[String: Any]])?.first?["id"] as? String)
        #expect(hello == ChunkID.of(Array("hello\n".utf8)).hex)
    }

    @Test func textSummaryAndCompression() throws {
        let root = try Self.makeTree()
        defer { try? FileManager.default.removeItem(at: root) }
        let result = try XferProcess.run("chunk", "--summary", "--compress", root.appendingPathComponent("sub").path)
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("2 files, 6 B (6 bytes), 1 chunks"))
        #expect(result.stdout.contains("stored"))
    }

    @Test func badInputGetsAClearErrorAndNonZeroExit() throws {
        let missing = try XferProcess.run("chunk", "/nonexistent/file")
        #expect(missing.status == 5, "not_found has exit code 5 (docs/CLI.md)")
        #expect(missing.stderr.contains("/nonexistent/file"))
        let badSize = try XferProcess.run("chunk", "--avg", "1000", "/etc/hostname")
        #expect(badSize.status != 0)
        #expect(badSize.stderr.contains("power of two"))
        let badUnit = try XferProcess.run("chunk", "--min", "12Q", "/etc/hostname")
        #expect(badUnit.status != 0)
        #expect(badUnit.stderr.contains("--min"))
        let badLevel = try XferProcess.run("chunk", "--compress", "--level", "40", "/etc/hostname")
        #expect(badLevel.status != 0)
    }
}
