import Foundation
import Testing
import XferCore

/// `xfer find` through the binary against a real `xfer serve`.
@Suite(.serialized) struct FindCommandTests {
    @Test func findFiltersSortsAndSpeaksJSON() throws {
        let server = try ServerProcess()
        let source = server.path("files")
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        for (name, size) in [("Report.PDF", 3000), ("report-old.pdf", 10), ("notes.txt", 500)] {
            try Data(repeating: 7, count: size).write(to: URL(fileURLWithPath: source + "/" + name))
            #expect(try server.run("push", source + "/" + name, "Documents/" + name).status == 0)
        }
        let text = try server.run("find", "report*", "--sort", "size", "--reverse")
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdout.split(separator: "\n")
        #expect(
            lines.count == 2 && lines[0].hasSuffix("Documents/Report.PDF")
                && lines[1].hasSuffix("Documents/report-old.pdf"))
        let json = try server.json(try server.run("find", "*.PDF", "--min-size", "1K", "--json"))
        let documents = json["documents"] as? [[String: Any]] ?? []
        #expect(documents.map { $0["path"] as? String } == ["Documents/Report.PDF"])
        let limited = try server.run("find", "--limit", "1")
        #expect(
            limited.status == 0 && limited.stdout.split(separator: "\n").count == 1
                && limited.stderr.contains("more match"))
        let recent = try server.run("find", "--modified-after", "1h")
        #expect(recent.stdout.split(separator: "\n").count == 3)
        let future = try server.run("find", "--modified-after", "2200-01-01")
        #expect(future.status == 0 && future.stdout.isEmpty)

        // Bad input: a clear error and exit 64 (usage), nothing sent.
        for arguments in [
            ["find", "a/b"], ["find", "--conflicts", "--deleted"], ["find", "--modified-after", "yesterday"],
            ["find", "--min-size", "lots"], ["find", "--modified-before", "2999-01-01"], ["find", "--kind", "folder"],
            ["find", "--limit", "0"]
        ] {
            let refused = try server.run(arguments)
            #expect(refused.status == 64, "\(arguments): \(refused.status) \(refused.stderr)")
            #expect(!refused.stderr.isEmpty)
        }
    }

    @Test(.timeLimit(.minutes(2))) func watchPrintsWhatEntersAndLeaves() throws {
        let server = try ServerProcess()
        let source = server.path("files")
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try Data("a".utf8).write(to: URL(fileURLWithPath: source + "/a.md"))
        #expect(try server.run("push", source + "/a.md", "Documents/a.md").status == 0)

        let watcher = try server.start(["find", "*.md", "--watch", "--json"], environment: [:])
        defer { if watcher.isRunning { watcher.terminate() } }
        let output = (watcher.standardOutput as! Pipe).fileHandleForReading
        var buffered = Data()
        func nextLine() -> [String: Any]? {
            while true {
                if let newline = buffered.firstIndex(of: 10) {
                    let line = buffered[buffered.startIndex..<newline]
                    buffered = Data(buffered[(newline + 1)...])
                    return try? JSONSerialization.jsonObject(with: line) as? [String: Any]
                }
                let more = output.availableData
                if more.isEmpty { return nil }
                buffered += more
            }
        }
        func paths(_ update: [String: Any]?, _ key: String) -> [String] {
            (update?[key] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        }
        let first = nextLine()
        #expect(first?["initial"] as? Bool == true && paths(first, "documents") == ["Documents/a.md"])

        try Data("b".utf8).write(to: URL(fileURLWithPath: source + "/b.md"))
        #expect(
            try server.run(
                "push", source + "/b.md", "Documents/b.md", environment: ["XFER_STATE_DIR": server.path("other")]
            ).status == 0)
        // A new document enters as it is announced (uploading), then changes as it commits.
        let added = nextLine()
        #expect(
            paths(added, "added") == ["Documents/b.md"]
                && paths(added, "documents") == ["Documents/a.md", "Documents/b.md"])
        var update = added
        while let documents = update?["documents"] as? [[String: Any]], documents.last?["state"] as? String != "current"
        {
            update = nextLine()
            #expect(paths(update, "changed") == ["Documents/b.md"])
        }

        #expect(try server.run("rm", "Documents/a.md").status == 0)
        let removed = nextLine()
        #expect(paths(removed, "removed") == ["Documents/a.md"] && paths(removed, "documents") == ["Documents/b.md"])
        watcher.terminate()
        watcher.waitUntilExit()
    }
}
