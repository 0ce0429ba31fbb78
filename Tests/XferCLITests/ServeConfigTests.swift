import Foundation
import Testing
import XferCore
import XferTestSupport

/// `xfer serve`'s settings from a YAML file and the environment: the example file starts a
/// server alone, a flag overrides the environment which overrides the file, and a bad file or
/// value is refused with its source named.
@Suite struct ServeConfigTests {
    /// The example file of tools/ops/.
    static let example = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("tools/ops/xfer.yaml")

    static func temporaryRoot() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        return root
    }

    /// Runs `xfer ARGS` with exactly `environment` added to a copy of this process's, without
    /// any XFER_ variable of this process's.
    static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> XferProcess {
        try XferProcess.run(
            arguments,
            environment: ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("XFER_") }.merging(environment)
            { $1 })
    }

    static func settings(_ result: XferProcess) throws -> [String: Any] {
        try #require(result.status == 0, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// The example file with its data directory and listen address moved.
    static func example(data: String, listen: String) throws -> String {
        let text = try String(contentsOf: example, encoding: .utf8)
        #expect(text.contains("\ndata: /var/lib/xfer\n") && text.contains("\nlisten: 127.0.0.1:8750\n"))
        return text.replacingOccurrences(of: "\ndata: /var/lib/xfer\n", with: "\ndata: \(data)\n")
            .replacingOccurrences(of: "\nlisten: 127.0.0.1:8750\n", with: "\nlisten: \(listen)\n")
    }

    @Test func theExampleFileAloneStartsAServer() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let port = try ServerProcess.freePort()
        let file = root.appendingPathComponent("xfer.yaml")
        try Self.example(data: root.appendingPathComponent("data").path, listen: "127.0.0.1:\(port)").write(
            to: file, atomically: true, encoding: .utf8)
        let server = ChildProcess()
        server.executableURL = XferProcess.binary
        server.arguments = ["serve", "--config", file.path]
        server.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("XFER_") }
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer {
            if server.isRunning {
                server.terminate()
                server.waitUntilExit()
            }
        }
        // The admin token is written once the server has opened its data directory; it then answers.
        let tokenFile = root.appendingPathComponent("data/admin-token").path
        for _ in 0..<400 where !FileManager.default.fileExists(atPath: tokenFile) { usleep(50_000) }
        let token = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        var answered = false
        for _ in 0..<400 {
            let created = try Self.run(
                ["account", "create", "alice"],
                environment: ["XFER_SERVER": "http://127.0.0.1:\(port)", "XFER_TOKEN": token])
            if created.status == 0 {
                answered = true
                break
            }
            usleep(50_000)
        }
        #expect(answered, "the server of the example file answered on 127.0.0.1:\(port)")
        server.terminate()
        server.waitUntilExit()
        #expect(server.terminationStatus == 0, "SIGTERM stops it gracefully")
    }

    /// The example's commented values (those followed by a comment) are the defaults indeed.
    @Test func theExampleFileStatesTheDefaults() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let text = try Self.example(data: root.path + "/data", listen: "127.0.0.1:8750")
        let defaults = text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# "), let match = line.dropFirst(2).firstMatch(of: /^([a-z-]+): (\S+) +#/) else {
                return nil
            }
            return "\(match.1): \(match.2)"
        }
        #expect(defaults.count >= 8, "\(defaults)")
        let plain = root.appendingPathComponent("plain.yaml")
        let stated = root.appendingPathComponent("stated.yaml")
        try text.write(to: plain, atomically: true, encoding: .utf8)
        try (text + "\n" + defaults.joined(separator: "\n") + "\n").write(to: stated, atomically: true, encoding: .utf8)
        var without = try Self.settings(Self.run(["serve", "--config", plain.path, "--print-config"]))
        var with = try Self.settings(Self.run(["serve", "--config", stated.path, "--print-config"]))
        without["config"] = nil
        with["config"] = nil
        let canonical = { (settings: [String: Any]) in
            String(
                decoding: try JSONSerialization.data(withJSONObject: settings, options: [.sortedKeys]), as: UTF8.self)
        }
        #expect(try canonical(without) == canonical(with))
    }

    @Test func aFlagOverridesTheEnvironmentWhichOverridesTheFile() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("xfer.yaml")
        try "data: \(root.path)/data\nkeep-days: 7\ndefault-quota: 2G\nwithout-feature:\n  - chunks-against\n".write(
            to: file, atomically: true, encoding: .utf8)
        let fromFile = try Self.settings(Self.run(["serve", "--config", file.path, "--print-config"]))
        #expect(fromFile["keep-days"] as? Int == 7)
        #expect(fromFile["default-quota"] as? Int == 2 << 30)
        #expect(fromFile["without-feature"] as? [String] == ["chunks-against"])
        #expect(fromFile["listen"] as? String == "127.0.0.1:8750", "a default where nothing says otherwise")
        let environment = ["XFER_KEEP_DAYS": "8", "XFER_SERVE_CONFIG": file.path]
        let fromEnvironment = try Self.settings(Self.run(["serve", "--print-config"], environment: environment))
        #expect(fromEnvironment["keep-days"] as? Int == 8)
        #expect(fromEnvironment["default-quota"] as? Int == 2 << 30, "the file still gives the rest")
        let fromFlag = try Self.settings(
            Self.run(["serve", "--keep-days", "9", "--print-config"], environment: environment))
        #expect(fromFlag["keep-days"] as? Int == 9)
        #expect(fromFlag["config"] as? String == file.path)
    }

    @Test func aBadFileOrValueIsRefusedNamingItsSource() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data").path
        let misspelt = root.appendingPathComponent("misspelt.yaml")
        try "data: \(data)\nlistn: 0.0.0.0:80\n".write(to: misspelt, atomically: true, encoding: .utf8)
        let unknown = try Self.run(["serve", "--config", misspelt.path])
        #expect(unknown.status == 6)
        #expect(unknown.stderr.contains("'listn'") && unknown.stderr.contains("listen"), "\(unknown.stderr)")
        let notYAML = root.appendingPathComponent("list.yaml")
        try "- data\n- listen\n".write(to: notYAML, atomically: true, encoding: .utf8)
        #expect(try Self.run(["serve", "--config", notYAML.path]).stderr.contains("must be a mapping"))
        let missing = try Self.run(["serve", "--config", root.appendingPathComponent("absent.yaml").path])
        #expect(missing.status == 6 && missing.stderr.contains("cannot read the config file"), "\(missing.stderr)")
        let badValue = try Self.run(["serve", "--data", data], environment: ["XFER_KEEP_DAYS": "a week"])
        #expect(badValue.status == 6)
        #expect(
            badValue.stderr.contains("XFER_KEEP_DAYS") && badValue.stderr.contains("'a week'"), "\(badValue.stderr)")
        // A file of comments alone holds no setting; an empty list variable is unset; a
        // password in the PostgreSQL URL is not printed.
        let comments = root.appendingPathComponent("comments.yaml")
        try "# nothing here yet\n".write(to: comments, atomically: true, encoding: .utf8)
        let quiet = try Self.settings(
            Self.run(
                ["serve", "--config", comments.path, "--data", data, "--print-config"],
                environment: ["XFER_WITHOUT_FEATURE": "", "XFER_METADATA": "postgres://xfer:secret@db:5432/xfer"]))
        #expect(quiet["without-feature"] as? [String] == [])
        #expect(quiet["metadata"] as? String == "postgres://xfer:***@db:5432/xfer")
        let noData = try Self.run(["serve", "--print-config"])
        #expect(noData.status == 6 && noData.stderr.contains("--data DIR"), "\(noData.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data), "nothing was created")
    }
}
