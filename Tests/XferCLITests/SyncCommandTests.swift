import Foundation
import Testing
import XferCore
import XferTestSupport

/// `xfer sync`, `status`, `evict`, `fetch`, `versions`, `resolve`, `kv`, `changes` and the
/// example daemon, as real processes against a real `xfer serve`.
@Suite(.serialized) struct SyncCommandTests {
    /// Environment of a second device (its own state directory).
    static func device(_ server: ServerProcess, _ name: String) -> [String: String] {
        ["XFER_STATE_DIR": server.path("state-" + name)]
    }

    static func lines(_ output: String) throws -> [[String: Any]] {
        try output.split(separator: "\n").map {
            try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
        }
    }

    @Test func syncStatusEvictFetchAndConflictsThroughTheBinary() throws {
        let server = try ServerProcess()
        let a = server.path("a")
        let b = server.path("b")
        try FileManager.default.createDirectory(atPath: a + "/Documents/Deck.pkg", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
        try Data("slide".utf8).write(to: URL(fileURLWithPath: a + "/Documents/Deck.pkg/1.txt"))
        try Data("note".utf8).write(to: URL(fileURLWithPath: a + "/Documents/note.txt"))
        try randomFile(a + "/Documents/big.bin", megabytes: 1, seed: 3)

        let first = try server.run("sync", a, "--once", "--json")
        #expect(first.status == 0, "\(first.stderr)")
        let events = try Self.lines(first.stdout)
        // Three documents and the directory that holds them.
        #expect(events.filter { $0["event"] as? String == "uploaded" }.count == 4)
        #expect((events.last?["summary"] as? [String: Any])?["uploaded"] as? Int == 3)
        #expect((events.last?["summary"] as? [String: Any])?["directories"] as? Int == 1)
        let second = try server.run("sync", b, "--once", environment: Self.device(server, "b"))
        #expect(second.status == 0, "\(second.stderr)")
        #expect(FileManager.default.contents(atPath: b + "/Documents/Deck.pkg/1.txt") == Data("slide".utf8))

        let status = try server.json(try server.run("status", a, "--json"))
        let documents = status["documents"] as? [[String: Any]] ?? []
        #expect(status["reachable"] as? Bool == true)
        #expect(
            documents.map { $0["path"] as? String ?? "" } == [
                "Documents", "Documents/Deck.pkg", "Documents/big.bin", "Documents/note.txt"
            ])
        #expect(documents.allSatisfy { $0["state"] as? String == "synced" })

        // Evict and fetch by local path.
        #expect(try server.run("evict", a + "/Documents/big.bin").status == 0)
        #expect(!FileManager.default.fileExists(atPath: a + "/Documents/big.bin"))
        let evicted = try server.json(try server.run("status", a, "--json"))["documents"] as? [[String: Any]] ?? []
        #expect(evicted.first { $0["path"] as? String == "Documents/big.bin" }?["state"] as? String == "evicted")
        let fetched = try server.run("fetch", a + "/Documents/big.bin", "--json")
        #expect(fetched.status == 0, "\(fetched.stderr)")
        #expect(FileManager.default.fileExists(atPath: a + "/Documents/big.bin"))

        // Both devices edit note.txt; B's edit is later, so A's version becomes a conflict version.
        try Data("from a".utf8).write(to: URL(fileURLWithPath: a + "/Documents/note.txt"))
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: a + "/Documents/note.txt")
        try Data("from b".utf8).write(to: URL(fileURLWithPath: b + "/Documents/note.txt"))
        #expect(try server.run("sync", b, "--once", environment: Self.device(server, "b")).status == 0)
        let conflicted = try server.run("sync", a, "--once")
        #expect(conflicted.status == 0)
        #expect(conflicted.stdout.contains("! Documents/note.txt"))
        let versions =
            try server.json(try server.run("versions", "Documents/note.txt", "--json"))["versions"] as? [[String: Any]]
            ?? []
        #expect(versions.map { $0["state"] as? String ?? "" } == ["conflict", "current", "superseded"])
        #expect(try server.run("ls").stdout.contains("(conflict: v3)"))
        let resolved = try server.run("resolve", "Documents/note.txt", "--keep", "3")
        #expect(resolved.status == 0, "\(resolved.stderr)")
        #expect(try server.run("sync", b, "--once", environment: Self.device(server, "b")).status == 0)
        #expect(FileManager.default.contents(atPath: b + "/Documents/note.txt") == Data("from a".utf8))

        // A second sync on the same directory is refused while one runs.
        let watcher = try server.start(["sync", a, "--watch", "--json"])
        defer {
            if watcher.isRunning {
                watcher.terminate()
                watcher.waitUntilExit()
            }
        }
        // Until `xfer status` says the watcher holds the folder.
        let deadline = Date().addingTimeInterval(30)
        while !(try server.run("status", a).stdout.contains("watching")) && Date() < deadline { usleep(20_000) }
        let refused = try server.run("sync", a, "--once")
        #expect(refused.status == 7 && refused.stderr.contains("already running"))
        watcher.terminate()
        watcher.waitUntilExit()
        #expect(watcher.terminationStatus == 0)
    }

    /// A directory the syncing user cannot read is not a directory whose files were deleted:
    /// the pass says so and deletes nothing under it. (As root, the sync runs as `nobody`
    /// through setpriv, since root reads everything.) `status` shows how the last pass went.
    @Test func anUnreadableDirectoryDeletesNothingAndStatusTellsTheDaemonsHealth() throws {
        let server = try ServerProcess()
        let home = server.path("unprivileged")
        let a = home + "/a"
        try FileManager.default.createDirectory(atPath: a + "/Documents/open", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: a + "/Documents/secret", withIntermediateDirectories: true)
        try Data("open".utf8).write(to: URL(fileURLWithPath: a + "/Documents/open/x.txt"))
        try Data("secret".utf8).write(to: URL(fileURLWithPath: a + "/Documents/secret/y.txt"))
        let asRoot = getuid() == 0
        if asRoot {
            let nobody = getpwnam("nobody")!.pointee
            for path in [
                home, a, a + "/Documents", a + "/Documents/open", a + "/Documents/secret",
                a + "/Documents/open/x.txt", a + "/Documents/secret/y.txt"
            ] {
                #expect(chown(path, nobody.pw_uid, nobody.pw_gid) == 0)
            }
        }
        let environment = server.environment.merging(["XFER_STATE_DIR": home + "/state"]) { $1 }
        func sync(_ arguments: String...) throws -> XferProcess {
            let child = ChildProcess()
            child.executableURL = URL(fileURLWithPath: asRoot ? "/usr/bin/setpriv" : XferProcess.binary.path)
            child.arguments =
                (asRoot ? ["--reuid=nobody", "--regid=nogroup", "--clear-groups", XferProcess.binary.path] : [])
                + arguments
            child.environment = environment
            child.standardOutput = Pipe()
            child.standardError = Pipe()
            try child.run()
            let out = (child.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
            let err = (child.standardError as! Pipe).fileHandleForReading.readDataToEndOfFile()
            child.waitUntilExit()
            return XferProcess(
                stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self),
                status: child.terminationStatus)
        }
        let first = try sync("sync", a, "--once", "--json")
        #expect(first.status == 0, "\(first.stderr)")
        // Two files and three directories (Documents, Documents/open, Documents/secret).
        #expect(try Self.lines(first.stdout).filter { $0["event"] as? String == "uploaded" }.count == 5)

        // The directory becomes unreadable to the syncing user.
        if asRoot { #expect(chown(a + "/Documents/secret", 0, 0) == 0) }
        #expect(chmod(a + "/Documents/secret", 0o000) == 0)
        defer { chmod(a + "/Documents/secret", 0o755) }
        let blind = try sync("sync", a, "--once", "--json")
        #expect(blind.status == 0, "\(blind.stderr)")
        let events = try Self.lines(blind.stdout)
        #expect(
            events.contains {
                $0["event"] as? String == "failed" && ($0["message"] as? String ?? "").contains("cannot read")
            },
            "\(blind.stdout)")
        #expect(!events.contains { $0["event"] as? String == "removed_remotely" }, "\(blind.stdout)")
        let listed = try server.run("ls", "--json")
        #expect(listed.stdout.contains("Documents/secret/y.txt"), "still on the server: \(listed.stdout)")

        // status: the daemon is not running, its last pass and the documents.
        let status = try server.json(try sync("status", a, "--json"))
        let daemon = status["daemon"] as? [String: Any] ?? [:]
        #expect(daemon["running"] as? Bool == false && daemon["phase"] as? String == "stopped", "\(daemon)")
        #expect((daemon["last_pass"] as? [String: Any])?["failed"] as? Int == 1, "\(daemon)")
        #expect(status["pending"] as? Int == 0, "\(status)")
        let text = try sync("status", a)
        #expect(text.stdout.contains("sync: not running; last pass"), "\(text.stdout)")
    }

    @Test func offlineChangesWaitForTheServer() throws {
        let server = try ServerProcess()
        let a = server.path("a")
        try FileManager.default.createDirectory(atPath: a, withIntermediateDirectories: true)
        try Data("one".utf8).write(to: URL(fileURLWithPath: a + "/f.txt"))
        #expect(try server.run("sync", a, "--once").status == 0)
        server.stopServer()

        try Data("two".utf8).write(to: URL(fileURLWithPath: a + "/f.txt"))
        try Data("new".utf8).write(to: URL(fileURLWithPath: a + "/g.txt"))
        let status = try server.json(try server.run("status", a, "--json"))
        #expect(status["reachable"] as? Bool == false)
        let states = (status["documents"] as? [[String: Any]] ?? []).map { $0["state"] as? String ?? "" }
        #expect(states == ["pending_upload", "pending_upload"])
        let offline = try server.run("sync", a, "--once")
        #expect(offline.status == 3 && offline.stderr.contains("cannot reach"))

        try server.startServer()
        let back = try server.run("sync", a, "--once", "--json")
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try Self.lines(back.stdout).filter { $0["event"] as? String == "uploaded" }.count == 2)
        let pulled = server.path("f.txt")
        #expect(try server.run("pull", "f.txt", pulled).status == 0)
        #expect(FileManager.default.contents(atPath: pulled) == Data("two".utf8))
    }

    @Test func keyValueAndChangesThroughTheBinary() throws {
        let server = try ServerProcess()
        #expect(try server.run("kv", "set", "theme", "dark").status == 0)
        #expect(try server.run("kv", "set", "size", "12").status == 0)
        #expect(try server.run("kv", "get", "size").stdout == "12\n")
        #expect(try server.run("kv", "get", "theme").stdout == "\"dark\"\n")
        let list = try server.json(try server.run("kv", "ls", "--json"))
        #expect((list["entries"] as? [[String: Any]])?.map { $0["key"] as? String ?? "" } == ["size", "theme"])
        let tooLong = try server.run("kv", "set", String(repeating: "k", count: 65), "1")
        #expect(tooLong.status != 0 && tooLong.stderr.contains("64 bytes"))
        #expect(try server.run("kv", "rm", "theme").status == 0)
        #expect(try server.run("kv", "get", "theme").status == 5)

        // A waiting `xfer changes` answers when a change arrives.
        let waiting = try server.start(["changes", "--since", "3", "--wait", "30", "--json"])
        try server.waitForParkedPolls()
        #expect(try server.run("kv", "set", "woke", "true").status == 0)
        let output = (waiting.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
        waiting.waitUntilExit()
        let changes = try JSONSerialization.jsonObject(with: output) as? [String: Any] ?? [:]
        #expect((changes["keys"] as? [[String: Any]])?.map { $0["key"] as? String ?? "" } == ["woke"])

        // A value past what one argument may hold (128 KiB) comes from standard input.
        let big = String(repeating: "v", count: 300_000)
        let child = ChildProcess()
        child.executableURL = XferProcess.binary
        child.arguments = ["kv", "set", "big", "-"]
        child.environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }
        let input = Pipe()
        child.standardInput = input
        child.standardOutput = Pipe()
        child.standardError = Pipe()
        try child.run()
        input.fileHandleForWriting.write(Data((big + "\n").utf8))
        try input.fileHandleForWriting.close()
        _ = (child.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
        child.waitUntilExit()
        #expect(child.terminationStatus == 0)
        #expect(try server.run("kv", "get", "big").stdout == "\"\(big)\"\n")
    }

    @Test func theExampleDaemonMergesConflictsItself() throws {
        let server = try ServerProcess()
        let daemon = XferProcess.binary.deletingLastPathComponent().appendingPathComponent("xfer-example-daemon")
        let a = server.path("a")
        let b = server.path("b")
        for directory in [a, b] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
        try Data("line 1\n".utf8).write(to: URL(fileURLWithPath: a + "/todo.txt"))
        #expect(try server.run("sync", a, "--once").status == 0)
        #expect(try server.run("sync", b, "--once", environment: Self.device(server, "b")).status == 0)
        try Data("line 1\nfrom a\n".utf8).write(to: URL(fileURLWithPath: a + "/todo.txt"))
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -60)], ofItemAtPath: a + "/todo.txt")
        try Data("line 1\nfrom b\n".utf8).write(to: URL(fileURLWithPath: b + "/todo.txt"))
        #expect(try server.run("sync", b, "--once", environment: Self.device(server, "b")).status == 0)

        let process = ChildProcess()
        process.executableURL = daemon
        process.arguments = [a, "--once"]
        process.environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(output)")
        #expect(output.contains("merged 2 versions of todo.txt"), "\(output)")
        let merged = String(decoding: FileManager.default.contents(atPath: a + "/todo.txt") ?? Data(), as: UTF8.self)
        #expect(merged.contains("from a") && merged.contains("from b"))
        let versions =
            try server.json(try server.run("versions", "todo.txt", "--json"))["versions"] as? [[String: Any]] ?? []
        #expect(!versions.contains { $0["state"] as? String == "conflict" })
        #expect(try server.run("sync", b, "--once", environment: Self.device(server, "b")).status == 0)
        #expect(
            FileManager.default.contents(atPath: b + "/todo.txt")
                == FileManager.default.contents(atPath: a + "/todo.txt"))
    }
}
