import Foundation
import Testing
import XferCore

/// `--exclude` on `xfer sync` and `xfer push`, through the binary.
@Suite(.serialized) struct ExcludeCommandTests {
    @Test func excludeKeepsPathsOutOfSyncAndPush() throws {
        let server = try ServerProcess()
        let a = server.path("a")
        try FileManager.default.createDirectory(atPath: a + "/logs", withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: a + "/keep.txt"))
        try Data("log".utf8).write(to: URL(fileURLWithPath: a + "/logs/run.log"))
        try Data("tmp".utf8).write(to: URL(fileURLWithPath: a + "/x.tmp"))
        try Data("vim".utf8).write(to: URL(fileURLWithPath: a + "/.keep.txt.swp"))

        let synced = try server.run("sync", a, "--once", "--exclude", "logs/", "--exclude", "*.tmp", "--json")
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(
            try server.run("ls").stdout.split(separator: "\n").map {
                $0.split(separator: " ").last.map(String.init) ?? ""
            } == ["keep.txt"])

        let package = server.path("Site.pkg")
        try FileManager.default.createDirectory(atPath: package + "/cache", withIntermediateDirectories: true)
        try Data("<html>".utf8).write(to: URL(fileURLWithPath: package + "/index.html"))
        try Data("cached".utf8).write(to: URL(fileURLWithPath: package + "/cache/page"))
        let pushed = try server.run("push", package, "Site.pkg", "--exclude", "cache/", "--json")
        #expect(pushed.status == 0, "\(pushed.stderr)")
        #expect(try server.json(pushed)["files"] as? Int == 1)

        let refused = try server.run("sync", a, "--once", "--exclude", "# nothing")
        #expect(refused.status != 0 && refused.stderr.contains("--exclude"))
        #expect(try server.run("sync", "--help").stdout.contains("--exclude <PATTERN>"))
    }
}
