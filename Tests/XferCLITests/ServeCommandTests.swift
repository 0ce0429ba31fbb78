import Foundation
import Testing
import XferCore
import XferTestSupport

/// A real `xfer serve` process on a free loopback port, and helpers to run client commands
/// against it with their own environment.
final class ServerProcess {
    let root: URL
    let port: Int
    var process = ChildProcess()
    var token = ""
    /// Extra `xfer serve` arguments (TLS files, limits).
    let serveArguments: [String]
    /// `http` or `https`.
    let scheme: String
    /// Extra environment for every client command (XFER_CA).
    var clientEnvironment: [String: String]

    init(
        serveArguments: [String] = [], scheme: String = "http", clientEnvironment: [String: String] = [:],
        createAccount: Bool = true, prepare: (URL) throws -> Void = { _ in }
    ) throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-serve-\(UUID().uuidString)")
        self.root = root
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        self.serveArguments = serveArguments.map { $0.replacingOccurrences(of: "$ROOT", with: root.path) }
        self.scheme = scheme
        self.clientEnvironment = clientEnvironment.mapValues { $0.replacingOccurrences(of: "$ROOT", with: root.path) }
        try prepare(root)
        port = try Self.freePort()
        try startServer()
        guard createAccount else { return }
        let created = try XferProcess.run(
            "account", "create", "cli", "--data", root.appendingPathComponent("data").path)
        token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts (or starts again) `xfer serve` on the port and data directory, and waits until it answers.
    func startServer() throws {
        process = ChildProcess()
        process.executableURL = XferProcess.binary
        process.arguments =
            [
                "serve", "--data", root.appendingPathComponent("data").path, "--listen", "127.0.0.1:\(port)",
                "--log-level", "warning"
            ] + serveArguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        for _ in 0..<200 {
            if try run("ls", environment: ["XFER_TOKEN": "none", "XFER_RETRIES": "0"]).status != 3 { break }
            usleep(50_000)
        }
    }

    /// Waits until at least `count` long polls wait on this server's change feed (its
    /// `xfer_feed_waiters` gauge, scraped from /metrics with `admin`, by default this data
    /// directory's admin token), instead of sleeping and hoping a started client got there.
    /// - Throws: if none came within 30 s.
    func waitForParkedPolls(_ count: Int = 1, admin: String? = nil) throws {
        let admin =
            try admin
            ?? String(contentsOfFile: path("data/admin-token"), encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let scrape = ChildProcess()
            scrape.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
            scrape.arguments = ["-sf", "-H", "Authorization: Bearer \(admin)", "\(scheme)://127.0.0.1:\(port)/metrics"]
            let output = Pipe()
            scrape.standardOutput = output
            scrape.standardError = FileHandle.nullDevice
            try scrape.run()
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            scrape.waitUntilExit()
            let waiting =
                text.split(separator: "\n").first { $0.hasPrefix("xfer_feed_waiters ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
            if waiting >= Double(count) { return }
            usleep(20_000)
        }
        throw XferError(.unavailable, "no \(count) long poll(s) parked on the server within 30 s")
    }

    /// Stops the server (SIGTERM) and waits for it to exit.
    func stopServer() {
        process.terminate()
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: root)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    var environment: [String: String] {
        [
            "XFER_SERVER": "\(scheme)://127.0.0.1:\(port)", "XFER_TOKEN": token,
            "XFER_STATE_DIR": root.appendingPathComponent("state").path,
            "XFER_CONFIG": root.appendingPathComponent("no-config.json").path
        ].merging(clientEnvironment) { $1 }
    }

    /// Runs `xfer ARGS` to completion.
    func run(_ arguments: String..., environment extra: [String: String] = [:]) throws -> XferProcess {
        try run(arguments, environment: extra)
    }

    /// Runs `xfer ARGS` to completion, with `input` on its standard input when given.
    func run(_ arguments: [String], environment extra: [String: String] = [:], input: String? = nil) throws
        -> XferProcess
    {
        let child = try start(arguments, environment: extra, input: input)
        let stdout = (child.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
        let stderr = (child.standardError as! Pipe).fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        return XferProcess(
            stdout: String(decoding: stdout, as: UTF8.self), stderr: String(decoding: stderr, as: UTF8.self),
            status: child.terminationStatus)
    }

    /// Starts `xfer ARGS` without waiting.
    func start(_ arguments: [String], environment extra: [String: String] = [:], input: String? = nil) throws
        -> ChildProcess
    {
        let child = ChildProcess()
        child.executableURL = XferProcess.binary
        child.arguments = arguments
        child.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }.merging(extra) { $1 }
        child.standardOutput = Pipe()
        child.standardError = Pipe()
        let stdin = input.map { _ in Pipe() }
        if let stdin { child.standardInput = stdin }
        try child.run()
        if let stdin, let input {
            stdin.fileHandleForWriting.write(Data(input.utf8))
            try stdin.fileHandleForWriting.close()
        }
        return child
    }

    func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }

    func json(_ result: XferProcess) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
    }

    /// Blocks allocated to a file or the files under a directory, in bytes.
    static func allocated(_ path: String) -> Int64 {
        var total: Int64 = 0
        let enumerator = FileManager.default.enumerator(atPath: path)
        let paths = enumerator.map { ($0.allObjects as? [String] ?? []).map { path + "/" + $0 } } ?? []
        for item in paths + [path] {
            var info = stat()
            if lstat(item, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG { total += Int64(info.st_blocks) * 512 }
        }
        return total
    }
}

func randomFile(_ path: String, megabytes: Int, seed: UInt64) throws {
    var generator = SplitMix64(seed: seed)
    var data = Data(count: megabytes << 20)
    data.withUnsafeMutableBytes { raw in
        for i in 0..<(raw.count / 8) { raw.storeBytes(of: generator.next(), toByteOffset: i * 8, as: UInt64.self) }
    }
    try data.write(to: URL(fileURLWithPath: path))
}

@Suite(.serialized) struct ServeCommandTests {
    @Test func pushPullLsRmThroughTheBinary() throws {
        let server = try ServerProcess()
        #expect(server.token.hasPrefix("xfer_") && !server.token.contains("\n"))
        let source = server.path("tree")
        try FileManager.default.createDirectory(atPath: source + "/sub", withIntermediateDirectories: true)
        try randomFile(source + "/data.bin", megabytes: 2, seed: 4)
        try Data("hello\n".utf8).write(to: URL(fileURLWithPath: source + "/sub/hello.txt"))

        let push = try server.run("push", source, "Documents/tree", "--json")
        #expect(push.status == 0, "\(push.stderr)")
        let pushed = try server.json(push)
        for key in [
            "document", "version", "files", "bytes", "chunks", "chunks_sent", "bytes_sent", "bytes_reused", "seconds"
        ] {
            #expect(pushed[key] != nil, "push --json lacks \(key)")
        }
        #expect(pushed["files"] as? Int == 2 && pushed["version"] as? Int == 1)

        let ls = try server.run("ls", "--json")
        #expect(ls.stdout.contains("\"Documents/tree\""))
        let lsText = try server.run("ls", "Documents/")
        #expect(lsText.status == 0 && lsText.stdout.contains("Documents/tree"))
        let lsLong = try server.run("ls", "-l")
        #expect(
            lsLong.stdout.contains("Documents/tree  [") && lsLong.stdout.hasSuffix("]\n"),
            "the device that pushed it: \(lsLong.stdout)")

        let pull = try server.run(
            "pull", "Documents/tree", server.path("copy"), "--json",
            environment: ["XFER_STATE_DIR": server.path("state-2")])
        #expect(pull.status == 0, "\(pull.stderr)")
        let pulled = try server.json(pull)
        for key in [
            "document", "version", "files", "bytes", "chunks_fetched", "bytes_fetched", "chunks_reused", "seconds"
        ] {
            #expect(pulled[key] != nil, "pull --json lacks \(key)")
        }
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: server.path("copy")))

        let quota = try server.json(try server.run("quota", "--json"))
        #expect(quota["name"] as? String == "cli" && (quota["used"] as? Int ?? 0) >= 2 << 20)
        #expect(quota["quota"] as? Int == 5 << 30)
        let quotaText = try server.run("quota")
        #expect(quotaText.status == 0 && quotaText.stdout.contains("used of 5.00 GiB"))

        let rm = try server.run("rm", "Documents/tree")
        #expect(rm.status == 0 && rm.stdout.contains("deleted"))
        let gone = try server.run("pull", "Documents/tree", server.path("again"))
        #expect(gone.status == 5 && gone.stderr.contains("deleted"))
        // The deleted document is listed by --deleted, and no more by ls; -l adds time and device.
        #expect(!(try server.run("ls").stdout.contains("Documents/tree")))
        let deleted = try server.run("ls", "--deleted", "-l")
        #expect(deleted.status == 0 && deleted.stdout.contains("Documents/tree  (deleted)"), "\(deleted.stdout)")
        #expect(deleted.stdout.range(of: #"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"#, options: .regularExpression) != nil)
    }

    @Test func errorsHaveCodesAndChangeNothing() throws {
        let server = try ServerProcess()
        try Data("x".utf8).write(to: URL(fileURLWithPath: server.path("f")))
        let badToken = try server.run("push", server.path("f"), "f", environment: ["XFER_TOKEN": "xfer_wrong"])
        #expect(badToken.status == 4 && badToken.stderr.contains("token"))
        let noToken = try server.run("ls", environment: ["XFER_TOKEN": ""])
        #expect(noToken.status == 4 && noToken.stderr.contains("--token"))
        for bad in ["../escape", "/abs", "a/../b"] {
            let result = try server.run("push", server.path("f"), bad)
            #expect(result.status == 6, "\(bad): \(result.stderr)")
        }
        #expect(try server.run("ls", "--json").stdout.contains("\"documents\":[]"))
        let unreachable = try server.run("ls", environment: ["XFER_SERVER": "http://127.0.0.1:1"])
        #expect(unreachable.status == 3 && unreachable.stderr.contains("cannot reach"))
        let once = try server.run("ls", "--retries", "0", environment: ["XFER_SERVER": "http://127.0.0.1:1"])
        #expect(once.status == 3)
        let badRetries = try server.run("ls", environment: ["XFER_RETRIES": "many"])
        #expect(badRetries.status == 6 && badRetries.stderr.contains("XFER_RETRIES"))
        let missing = try server.run("pull", "nothing-here", server.path("n"))
        #expect(missing.status == 5)
        let json = try server.run("pull", "nothing-here", server.path("n"), "--json")
        #expect(json.status == 5 && json.stdout.contains("\"code\":\"not_found\""))
    }

    @Test func theAdminListsShowsAndSetsQuotasFromTheCommandLine() throws {
        let server = try ServerProcess()
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        try Data("x".utf8).write(to: URL(fileURLWithPath: server.path("f")))
        #expect(try server.run("push", server.path("f"), "f").status == 0)
        let list = try server.run("account", "list", "--json", environment: ["XFER_TOKEN": admin])
        #expect(
            list.status == 0 && list.stdout.contains("\"name\":\"cli\"") && list.stdout.contains("\"documents\":1"),
            "\(list.stdout)")
        let set = try server.run("account", "set-quota", "cli", "1M", environment: ["XFER_TOKEN": admin])
        #expect(set.status == 0 && set.stdout.contains("1.00 MiB"), "\(set.stdout)")
        let local = try server.run("account", "show", "cli", "--data", server.path("data"), "--json")
        #expect(local.status == 0 && local.stdout.contains("\"quota\":1048576"), "\(local.stdout)")
        #expect(try server.run("account", "show", "nobody", environment: ["XFER_TOKEN": admin]).status == 5)
        #expect(try server.run("account", "list").status == 4, "an account's token is not the admin's")

        // Deleting: nothing without --yes; --dry-run says what would go; then it is gone, token and all.
        let unasked = try server.run("account", "delete", "cli", environment: ["XFER_TOKEN": admin])
        #expect(
            unasked.status == 6 && unasked.stderr.contains("--yes") && unasked.stderr.contains("1 document"),
            "\(unasked.stderr)")
        let preview = try server.run("account", "delete", "cli", "--dry-run", environment: ["XFER_TOKEN": admin])
        #expect(preview.status == 0 && preview.stdout.contains("would delete"))
        #expect(try server.run("ls").status == 0, "still there")
        let deleted = try server.run("account", "delete", "cli", "--yes", "--json", environment: ["XFER_TOKEN": admin])
        #expect(
            deleted.status == 0 && deleted.stdout.contains("\"documents\":1")
                && deleted.stdout.contains("\"dry_run\":false"), "\(deleted.stdout)")
        #expect(try server.run("ls").status == 4, "its token is refused")
        #expect(try server.run("account", "show", "cli", "--data", server.path("data")).status == 5)
    }

    @Test func loginStoresADeviceTokenAndLogoutRevokesIt() throws {
        let server = try ServerProcess()
        let config = server.path("home/.config/xfer/config.json")
        // No token anywhere but the config file from here on; the account token comes on stdin.
        let environment = ["XFER_CONFIG": config, "XFER_TOKEN": ""]
        let login = try server.run(
            ["login", "--device", "laptop", "--container", "notes"], environment: environment,
            input: server.token + "\n")
        #expect(login.status == 0 && login.stdout.contains("device laptop"), "\(login.stderr)")
        #expect(!login.stdout.contains(server.token) && !login.stderr.contains(server.token))
        var info = stat()
        #expect(stat(config, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(server.path("home/.config/xfer"), &info) == 0 && info.st_mode & 0o777 == 0o700)
        let stored = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: config))) as? [String: Any])
        let deviceToken = try #require(stored["token"] as? String)
        #expect(
            deviceToken != server.token && stored["device"] as? String == "laptop"
                && stored["container"] as? String == "notes")
        // Commands now need no token; what this device commits names it.
        try Data("x".utf8).write(to: URL(fileURLWithPath: server.path("f")))
        #expect(try server.run(["push", server.path("f"), "f"], environment: environment).status == 0)
        let versions = try server.run(["versions", "f", "--json"], environment: environment)
        #expect(versions.stdout.contains("\"device\":\"laptop\""), "\(versions.stdout)")
        let tokens = try server.run(["token", "list"], environment: environment)
        #expect(
            tokens.status == 0 && tokens.stdout.contains("laptop") && tokens.stdout.contains("(this token)"),
            "\(tokens.stdout)")
        // A second login is refused: the stored token is not dropped silently.
        let again = try server.run(["login"], environment: environment, input: server.token + "\n")
        #expect(again.status == 7 && again.stderr.contains("xfer logout"))
        // A narrower token for another device: read-only, so its push is refused and changes nothing.
        let readOnly = try server.run(
            ["token", "new", "--device", "phone", "--read-only", "--expires", "1d"], environment: environment)
        let phone = readOnly.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(readOnly.status == 0 && phone.hasPrefix("xfer_"))
        let refused = try server.run(
            ["push", server.path("f"), "g"], environment: ["XFER_TOKEN": phone, "XFER_CONTAINER": "notes"])
        #expect(refused.status == 4 && refused.stderr.contains("read-only"), "\(refused.stderr)")
        #expect(
            try server.run(
                ["pull", "f", server.path("copy")], environment: ["XFER_TOKEN": phone, "XFER_CONTAINER": "notes"]
            ).status == 0)
        // The admin sees every token by id and device, never the token.
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let listed = try server.run(["account", "tokens", "cli"], environment: ["XFER_TOKEN": admin])
        #expect(
            listed.status == 0 && listed.stdout.contains("phone") && listed.stdout.contains("read-only")
                && !listed.stdout.contains(phone))
        // Logout revokes the device's token on the server and removes it from the file.
        let logout = try server.run(["logout"], environment: environment)
        #expect(logout.status == 0 && logout.stdout.contains("revoked"), "\(logout.stderr)")
        #expect(try server.run(["ls"], environment: ["XFER_TOKEN": deviceToken]).status == 4)
        let after = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: config))) as? [String: Any])
        #expect(after["token"] == nil && after["server"] as? String != nil && after["container"] as? String == "notes")
        #expect(try server.run(["logout"], environment: environment).status == 5)
        // The account's own token still works: only this device's access ended.
        #expect(try server.run("ls").status == 0)

        // Logged in again, with the account token then revoked: this device's token is the
        // account's only one of full access, and logout will not lock the account out unasked.
        #expect(try server.run(["login"], environment: environment, input: server.token + "\n").status == 0)
        let accountTokenID =
            try #require(try server.json(server.run(["token", "list", "--json"]))["tokens"] as? [[String: Any]])
            .first { $0["current"] as? Bool == true }?["id"] as? String
        #expect(try server.run(["token", "revoke", try #require(accountTokenID)], environment: environment).status == 0)
        let lockout = try server.run(["logout"], environment: environment)
        #expect(lockout.status == 4 && lockout.stderr.contains("only one with full access"), "\(lockout.stderr)")
        #expect(try server.run(["ls"], environment: environment).status == 0, "nothing was revoked")
        #expect(try server.run(["logout", "--yes"], environment: environment).status == 0)

        // A token written into the file by hand is neither replaced by login nor revoked by logout.
        let handMade = server.path("hand/config.json")
        try FileManager.default.createDirectory(atPath: server.path("hand"), withIntermediateDirectories: true)
        try Data("{\"token\": \"xfer_handmade\", \"server\": \"elsewhere\"}".utf8).write(
            to: URL(fileURLWithPath: handMade))
        let refusedLogin = try server.run(
            ["login"], environment: ["XFER_CONFIG": handMade, "XFER_TOKEN": ""], input: "xfer_x\n")
        #expect(refusedLogin.status == 7 && refusedLogin.stderr.contains("did not store"), "\(refusedLogin.stderr)")
        #expect(try server.run(["logout"], environment: ["XFER_CONFIG": handMade]).status == 6)
        let forgot = try server.run(["logout", "--forget"], environment: ["XFER_CONFIG": handMade])
        #expect(forgot.status == 0 && forgot.stdout.contains("not revoked"))
        let left = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: handMade))) as? [String: Any])
        #expect(left["token"] == nil && left["server"] as? String == "elsewhere")
    }

    @Test func bwlimitHoldsChunkDataToTheRateBothWays() throws {
        let server = try ServerProcess()
        // 512 KiB of incompressible data at 256 KiB a second: two seconds, less the quarter
        // second a burst may take at once. (Only the floor is checked: nothing can go faster
        // than the limit however busy the machine.)
        try randomFile(server.path("r.bin"), megabytes: 1, seed: 5)
        let half = try Data(contentsOf: URL(fileURLWithPath: server.path("r.bin"))).prefix(512 << 10)
        try half.write(to: URL(fileURLWithPath: server.path("half.bin")))
        let start = Date()
        let push = try server.run("push", server.path("half.bin"), "half.bin", "--bwlimit", "256K")
        let pushed = Date().timeIntervalSince(start)
        #expect(push.status == 0, "\(push.stderr)")
        #expect(pushed >= 1.6, "512 KiB at 256 KiB/s took \(pushed) s")
        let pullStart = Date()
        let pull = try server.run(
            ["pull", "half.bin", server.path("back.bin")],
            environment: ["XFER_BWLIMIT": "256K", "XFER_STATE_DIR": server.path("s2")])
        let pulled = Date().timeIntervalSince(pullStart)
        #expect(pull.status == 0, "\(pull.stderr)")
        #expect(pulled >= 1.6, "512 KiB at 256 KiB/s took \(pulled) s")
        #expect(FileManager.default.contentsEqual(atPath: server.path("half.bin"), andPath: server.path("back.bin")))
        let bad = try server.run(["ls"], environment: ["XFER_BWLIMIT": "fast"])
        #expect(bad.status == 6 && bad.stderr.contains("XFER_BWLIMIT"))
        #expect(try server.run("ls", "--bwlimit", "8K").status == 6, "under 16K a second is refused")
    }

    @Test func verboseLogsEachRequestAndQuietSaysNothing() throws {
        let server = try ServerProcess()
        let ls = try server.run("ls", "-v")
        #expect(ls.status == 0)
        #expect(
            ls.stderr.contains("request=GET /v1/containers/default/documents") && ls.stderr.contains("status=200"),
            "\(ls.stderr)")
        #expect(
            !ls.stderr.contains(server.token) && !ls.stderr.contains("AsyncHTTPClient"),
            "one line a request, never the token")
        // A request sent again says so (the server is not there: every try is logged, then exit 3).
        let unreachable = try server.run(
            ["ls", "--retries", "1"], environment: ["XFER_SERVER": "http://127.0.0.1:1", "XFER_LOG_LEVEL": "info"])
        #expect(
            unreachable.status == 3 && unreachable.stderr.contains("sending again")
                && unreachable.stderr.contains("try=2 of 2"), "\(unreachable.stderr)")
        #expect(try server.run(["ls"], environment: ["XFER_LOG_LEVEL": "loud"]).status == 6)
        #expect(try server.run("ls").stderr.isEmpty, "silent by default")
        let gc = try server.run("gc", "--data", server.path("data"), "--quiet")
        #expect(gc.status == 0 && gc.stdout.isEmpty)
        let verify = try server.run("verify", "--data", server.path("data"), "-q")
        #expect(verify.status == 0 && verify.stdout.isEmpty)
    }

    @Test func aKilledPushResumesSendingOnlyWhatIsMissing() throws {
        let server = try ServerProcess()
        let file = server.path("big.bin")
        try randomFile(file, megabytes: 192, seed: 11)
        let push = try server.start(["push", file, "big.bin"])
        let chunks = server.path("data/chunks")
        var stored = 0
        for _ in 0..<600 where push.isRunning {
            stored = (try? FileManager.default.subpathsOfDirectory(atPath: chunks).filter { $0.count > 60 }.count) ?? 0
            if stored >= 100 { break }
            usleep(10_000)
        }
        kill(push.processIdentifier, SIGKILL)
        push.waitUntilExit()
        let rerun = try server.run("push", file, "big.bin", "--json")
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let report = try server.json(rerun)
        let total = report["chunks"] as? Int ?? 0
        let sent = report["chunks_sent"] as? Int ?? Int.max
        #expect(total > 0 && sent < total, "re-run sent \(sent) of \(total) chunks after \(stored) had arrived")
        let pull = try server.run(
            "pull", "big.bin", server.path("copy.bin"), environment: ["XFER_STATE_DIR": server.path("s2")])
        #expect(pull.status == 0)
        #expect(FileManager.default.contentsEqual(atPath: file, andPath: server.path("copy.bin")))
    }

    @Test func aKilledPullLeavesTheOldFileAndResumes() throws {
        let server = try ServerProcess()
        let file = server.path("big.bin")
        try randomFile(file, megabytes: 8, seed: 1)
        #expect(try server.run("push", file, "big.bin").status == 0)
        let reader = ["XFER_STATE_DIR": server.path("reader")]
        let target = server.path("copy.bin")
        #expect(try server.run("pull", "big.bin", target, environment: reader).status == 0)
        let old = try Data(contentsOf: URL(fileURLWithPath: target))

        try randomFile(file, megabytes: 192, seed: 2)
        #expect(try server.run("push", file, "big.bin").status == 0)
        let pull = try server.start(["pull", "big.bin", target], environment: reader)
        let staging = server.path(".copy.bin.xfer-2.partial")
        for _ in 0..<600 where pull.isRunning {
            if ServerProcess.allocated(staging) > 24 << 20 { break }
            usleep(10_000)
        }
        kill(pull.processIdentifier, SIGKILL)
        pull.waitUntilExit()
        // The target is the old file, whole; the new one is only in the staging copy.
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == old)
        let rerun = try server.run("pull", "big.bin", target, "--json", environment: reader)
        #expect(rerun.status == 0, "\(rerun.stderr)")
        let report = try server.json(rerun)
        #expect((report["chunks_reused"] as? Int ?? 0) > 0, "\(rerun.stdout)")
        #expect(FileManager.default.contentsEqual(atPath: file, andPath: target))
        #expect(!FileManager.default.fileExists(atPath: staging))
    }

    @Test func sigtermStopsTheServerGracefully() throws {
        let server = try ServerProcess()
        server.process.terminate()
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus == 0)
        let mode =
            try FileManager.default.attributesOfItem(atPath: server.path("data/admin-token"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    /// `changes --wait` (and `--follow`) without `--since` starts from now: what was there
    /// before is not replayed; without either it lists from the beginning.
    @Test func waitingForChangesStartsFromNow() throws {
        let server = try ServerProcess()
        try Data("old".utf8).write(to: URL(fileURLWithPath: server.path("old")))
        try Data("new".utf8).write(to: URL(fileURLWithPath: server.path("new")))
        #expect(try server.run("push", server.path("old"), "old.txt").status == 0)
        let waiting = try server.start(["changes", "--wait", "30s", "--json"])
        try server.waitForParkedPolls()
        #expect(try server.run("push", server.path("new"), "new.txt").status == 0)
        let answer = String(
            decoding: (waiting.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waiting.waitUntilExit()
        #expect(answer.contains("new.txt") && !answer.contains("old.txt"), "\(answer)")
        let history = try server.run("changes", "--json")
        #expect(history.stdout.contains("old.txt") && history.stdout.contains("new.txt"))
    }

    /// A long poll parked on the change feed (a `changes --wait`, a live `find --watch` whose
    /// client is gone) is answered at once when the server is told to stop, not drained for up
    /// to its wait: the client gets what changed so far and resumes from there elsewhere.
    @Test func sigtermAnswersParkedLongPollsAtOnce() throws {
        let server = try ServerProcess()
        let poll = try server.start(["changes", "--wait", "60", "--json"])
        try server.waitForParkedPolls()
        let started = Date()
        server.process.terminate()
        server.process.waitUntilExit()
        poll.waitUntilExit()
        #expect(Date().timeIntervalSince(started) < 20, "the server drained the poll instead of answering it")
        #expect(server.process.terminationStatus == 0)
        let answer = (poll.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
        #expect(poll.terminationStatus == 0 && String(decoding: answer, as: UTF8.self).contains("\"cursor\""))
    }
}
