import Foundation
import Testing
import XferCore

/// `--dry-run` on `sync`, `push` and `pull`, through the binary: the server's change cursor and
/// the local tree are byte-for-byte unchanged afterwards, and the printed plan is what a real
/// run then does.
@Suite(.serialized) struct DryRunCommandTests {
    /// Every entry under `root` (the client's trash and staging names included): path, kind,
    /// mode, mtime and the bytes of each file, so any change at all shows.
    static func tree(_ root: String) throws -> [String: String] {
        var result: [String: String] = [:]
        guard let walker = FileManager.default.enumerator(atPath: root) else { return result }
        for case let relative as String in walker {
            let path = root + "/" + relative
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            var line = "\(info.st_mode) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) \(info.st_size)"
            if (info.st_mode & S_IFMT) == S_IFREG, let data = FileManager.default.contents(atPath: path) {
                line += " " + ChunkID.of([UInt8](data)).hex
            }
            result[relative] = line
        }
        return result
    }

    /// The server's cursor and every change on its feed.
    static func feed(_ server: ServerProcess) throws -> String {
        let changes = try server.run("changes", "--json")
        #expect(changes.status == 0, "\(changes.stderr)")
        return changes.stdout
    }

    static func write(_ text: String, _ path: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    @Test func syncDryRunChangesNothingAndListsWhatTheRealPassDoes() throws {
        let server = try ServerProcess()
        let a = server.path("a")
        let b = server.path("b")
        let deviceB = SyncCommandTests.device(server, "b")
        for name in ["keep", "edit-here", "edit-there", "delete-here", "delete-there"] {
            try Self.write("first \(name)", a + "/Documents/\(name).txt")
        }
        try Self.write("slide", a + "/Documents/Deck.pkg/1.txt")
        try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
        #expect(try server.run("sync", a, "--once").status == 0)
        #expect(try server.run("sync", b, "--once", environment: deviceB).status == 0)

        // Changes on both sides: three here, four there (one a package).
        try Self.write("second edit-here", a + "/Documents/edit-here.txt")
        try Self.write("new here", a + "/Documents/new-here.txt")
        try FileManager.default.removeItem(atPath: a + "/Documents/delete-here.txt")
        try Self.write("second edit-there", b + "/Documents/edit-there.txt")
        try Self.write("new there", b + "/Documents/new-there.txt")
        try Self.write("slide two", b + "/Documents/Deck.pkg/2.txt")
        try FileManager.default.removeItem(atPath: b + "/Documents/delete-there.txt")
        #expect(try server.run("sync", b, "--once", environment: deviceB).status == 0)

        let treeBefore = try Self.tree(a)
        let feedBefore = try Self.feed(server)
        let dry = try server.run("sync", a, "--dry-run", "--json")
        #expect(dry.status == 0, "\(dry.stderr)")
        let preview = try server.json(dry)
        let steps = (preview["steps"] as? [[String: Any]] ?? []).map {
            "\($0["action"] as? String ?? "") \($0["path"] as? String ?? "")"
        }
        let expected: [String] = [
            "download Documents/Deck.pkg", "delete_remote Documents/delete-here.txt",
            "delete_local Documents/delete-there.txt", "upload Documents/edit-here.txt",
            "download Documents/edit-there.txt", "upload Documents/new-here.txt", "download Documents/new-there.txt"
        ]
        #expect(steps == expected)
        #expect(try Self.tree(a) == treeBefore)
        #expect(try Self.feed(server) == feedBefore)

        // The text form says the same and that nothing was changed.
        let text = try server.run("sync", a, "--dry-run")
        #expect(
            text.status == 0 && text.stdout.contains("↑ upload") && text.stdout.contains("nothing was changed"),
            "\(text.stdout)")
        #expect(try Self.tree(a) == treeBefore)

        // The real pass does exactly what was listed.
        let real = try server.run("sync", a, "--once", "--json")
        #expect(real.status == 0, "\(real.stderr)")
        let names = [
            "uploaded": "upload", "downloaded": "download", "removed_locally": "delete_local",
            "removed_remotely": "delete_remote"
        ]
        let done = try SyncCommandTests.lines(real.stdout).compactMap { event -> String? in
            guard let name = names[event["event"] as? String ?? ""] else { return nil }
            return "\(name) \(event["path"] as? String ?? "")"
        }
        #expect(Set(done) == Set(steps))
        #expect(try server.json(try server.run("sync", a, "--dry-run", "--json"))["steps"] as? [Any] != nil)
        #expect((try server.json(try server.run("sync", a, "--dry-run", "--json"))["steps"] as? [Any])?.isEmpty == true)
    }

    @Test func syncDryRunOfANewDirectoryBindsNothing() throws {
        let server = try ServerProcess()
        let a = server.path("fresh")
        try Self.write("hello", a + "/hello.txt")
        let dry = try server.json(try server.run("sync", a, "--dry-run", "--json"))
        #expect((dry["steps"] as? [[String: Any]])?.map { $0["action"] as? String } == ["upload"])
        // Not bound by the dry run: another container can still be chosen for it.
        let other = try server.run("sync", a, "--once", "--container", "other")
        #expect(other.status == 0, "\(other.stderr)")
        // Once bound, a dry run checks the binding as a real pass does.
        let elsewhere = try server.run("sync", a, "--dry-run")
        #expect(
            elsewhere.status == 7 && elsewhere.stderr.contains("is synced with container other"), "\(elsewhere.stderr)")
        #expect(try server.run("sync", a, "--dry-run", "--container", "other").status == 0)
        #expect(try server.run("sync", a, "--watch", "--dry-run").status != 0)
    }

    @Test func pushDryRunSaysCreateUpdateUnchangedOrConflict() throws {
        let server = try ServerProcess()
        let file = server.path("report.txt")
        try Self.write("one", file)
        func plan(_ extra: String..., environment: [String: String] = [:]) throws -> [String: Any] {
            let result = try server.run(
                ["push", file, "Documents/report.txt", "--dry-run", "--json"] + extra, environment: environment)
            #expect(result.status == 0, "\(result.stderr)")
            return try server.json(result)
        }
        let feed = try Self.feed(server)
        #expect(try plan()["action"] as? String == "create")
        #expect(try plan()["files_to_read"] as? Int == 1)
        #expect(try Self.feed(server) == feed)
        #expect(try server.run("push", file, "Documents/report.txt").status == 0)
        #expect(try plan()["action"] as? String == "unchanged")
        try Self.write("two", file)
        let update = try plan()
        #expect(
            update["action"] as? String == "update"
                && update["synced_version"] as? Int == update["server_version"] as? Int)
        // Another device pushes first: this copy's push would be a conflict; --force replaces.
        let other = server.path("other.txt")
        try Self.write("elsewhere", other)
        #expect(try server.run("push", other, "Documents/report.txt", "--force").status == 0)
        #expect(try plan()["action"] as? String == "conflict")
        #expect(try plan("--force")["action"] as? String == "replace")
        #expect(try server.run("push", server.path("missing.txt"), "Documents/x.txt", "--dry-run").status == 5)
    }

    @Test func pullDryRunSaysCreateReplaceUnchangedOrRefusedAndWritesNothing() throws {
        let server = try ServerProcess()
        let source = server.path("source")
        try Self.write("alpha", source + "/a.txt")
        try Self.write("beta", source + "/sub/b.txt")
        #expect(try server.run("push", source, "Docs/Album.pkg").status == 0)

        // Into a directory that does not exist: nothing is created, not even the parent.
        let fresh = server.path("new/place/Album.pkg")
        let create = try server.run("pull", "Docs/Album.pkg", fresh, "--dry-run", "--json")
        #expect(create.status == 0, "\(create.stderr)")
        let plan = try server.json(create)
        #expect(
            plan["action"] as? String == "create" && plan["files"] as? Int == 2 && plan["chunks_to_fetch"] as? Int == 2)
        #expect(plan["bytes_to_fetch"] as? Int == 9)
        #expect(!FileManager.default.fileExists(atPath: server.path("new")))

        // Over an unrelated file: refused (exit 7, as the real pull), the file untouched.
        let unrelated = server.path("Album.pkg")
        try Self.write("mine", unrelated)
        let refused = try server.run("pull", "Docs/Album.pkg", unrelated, "--dry-run", "--json")
        #expect(refused.status == 7)
        #expect(try server.json(refused)["action"] as? String == "refused")
        #expect(FileManager.default.contents(atPath: unrelated) == Data("mine".utf8))
        #expect(
            try server.json(try server.run("pull", "Docs/Album.pkg", unrelated, "--dry-run", "--force", "--json"))[
                "action"] as? String == "replace")

        // After a real pull: unchanged; after an edit there: refused.
        let copy = server.path("copy/Album.pkg")
        #expect(try server.run("pull", "Docs/Album.pkg", copy).status == 0)
        let before = try Self.tree(server.path("copy"))
        #expect(
            try server.json(try server.run("pull", "Docs/Album.pkg", copy, "--dry-run", "--json"))["action"] as? String
                == "unchanged")
        #expect(try Self.tree(server.path("copy")) == before)
        try Self.write("gamma", source + "/c.txt")
        #expect(try server.run("push", source, "Docs/Album.pkg").status == 0)
        let replace = try server.json(try server.run("pull", "Docs/Album.pkg", copy, "--dry-run", "--json"))
        #expect(replace["action"] as? String == "replace" && replace["chunks_to_fetch"] as? Int == 1)
        try Self.write("edited", copy + "/a.txt")
        let edited = try server.run("pull", "Docs/Album.pkg", copy, "--dry-run")
        #expect(edited.status == 7 && edited.stdout.contains("refused"), "\(edited.stdout)")
    }
}
