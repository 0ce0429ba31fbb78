import Foundation
import Testing
import XferCore

/// `xfer sync --exclude-path`, `--only`, `--include-path` through the binary: what a device
/// leaves out is shown `excluded`, kept on the server, and back when included.
@Suite struct SelectiveSyncCommandTests {
    @Test("a folder left out on one device goes to its trash, stays on the server, and comes back when included")
    func excludeStatusInclude() throws {
        let server = try ServerProcess()
        let a = server.path("a")
        let b = server.path("b")
        let deviceB = SyncCommandTests.device(server, "b")
        for name in ["Documents/keep.txt", "Photos/1.jpg", "Photos/2.jpg"] {
            try DryRunCommandTests.write("content of \(name)", a + "/" + name)
        }
        try FileManager.default.createDirectory(atPath: b, withIntermediateDirectories: true)
        #expect(try server.run("sync", a, "--once").status == 0)
        #expect(try server.run(["sync", b, "--once"], environment: deviceB).status == 0)

        let preview = try server.run(["sync", b, "--dry-run", "--exclude-path", "Photos"], environment: deviceB)
        #expect(preview.status == 0 && preview.stdout.contains("leave out"), "\(preview.stdout)")
        #expect(FileManager.default.fileExists(atPath: b + "/Photos/1.jpg"), "a dry run keeps the selection as it was")

        let left = try server.run(["sync", b, "--once", "--exclude-path", "Photos"], environment: deviceB)
        #expect(left.status == 0, "\(left.stderr)")
        #expect(!FileManager.default.fileExists(atPath: b + "/Photos/1.jpg"))
        let status = try server.run(["status", b], environment: deviceB)
        #expect(status.stdout.contains("excluded") && status.stdout.contains("Photos/2.jpg"), "\(status.stdout)")
        #expect(status.stdout.contains("selection: leaving out Photos"), "\(status.stdout)")
        let asJSON = try server.json(try server.run(["status", b, "--json"], environment: deviceB))
        #expect((asJSON["selection"] as? [String: Any])?["excluded"] as? [String] == ["Photos"], "\(asJSON)")
        #expect(try server.run("sync", a, "--once").status == 0)
        #expect(FileManager.default.fileExists(atPath: a + "/Photos/1.jpg"), "nothing deleted elsewhere")
        let listed = try server.run("ls", "Photos/")
        #expect(listed.stdout.contains("Photos/1.jpg"), "kept on the server: \(listed.stdout)")

        let back = try server.run(["sync", b, "--once", "--include-path", "Photos"], environment: deviceB)
        #expect(back.status == 0, "\(back.stderr)")
        #expect(try String(contentsOfFile: b + "/Photos/1.jpg", encoding: .utf8) == "content of Photos/1.jpg")
        #expect(
            !(try server.run(["status", b], environment: deviceB).stdout.contains("selection:")), "everything again")
        let bad = try server.run(["sync", b, "--once", "--only", "../x"], environment: deviceB)
        #expect(bad.status != 0 && bad.stderr.contains(".."), "\(bad.stderr)")
    }
}
