import Foundation
import Testing
import XferTestSupport

/// `xfer container share|members|list|unshare|leave` against a real server: a member reaches
/// the owner's container as OWNER/NAME with the ordinary document commands, as its role allows,
/// until it is unshared.
@Suite struct ContainerShareCommandTests {
    /// The server's `cli` account owns `team` holding `Documents/plan.txt`; `bob` is a second
    /// account. Returns bob's environment.
    static func owned(_ server: ServerProcess) throws -> [String: String] {
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let created = try server.run("account", "create", "bob", environment: ["XFER_TOKEN": admin])
        #expect(created.status == 0, "\(created.stderr)")
        let plan = server.path("plan.txt")
        try Data("the plan\n".utf8).write(to: URL(fileURLWithPath: plan))
        #expect(try server.run("push", plan, "Documents/plan.txt", "--container", "team", "-q").status == 0)
        return ["XFER_TOKEN": created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]
    }

    @Test(
        "a reader pulls and cannot push; made a writer it pushes into the owner's container; unshared it reaches nothing"
    )
    func readerWriterUnshared() throws {
        let server = try ServerProcess()
        let bob = try Self.owned(server)
        let shared = try server.run("container", "share", "team", "bob", "--role", "reader")
        #expect(shared.status == 0 && shared.stdout.contains("bob as reader"), "\(shared.stderr)")
        let members = try server.json(try server.run("container", "members", "team", "--json"))
        let listed = try #require(members["members"] as? [[String: Any]])
        #expect(
            listed.count == 1 && listed[0]["account"] as? String == "bob" && listed[0]["role"] as? String == "reader")
        let theirs = try server.run("container", "list", environment: bob)
        #expect(theirs.stdout.contains("cli/team  (reader)"), "\(theirs.stdout)")

        let pulled = server.path("pulled.txt")
        let pull = try server.run(["pull", "Documents/plan.txt", pulled, "--container", "cli/team"], environment: bob)
        #expect(pull.status == 0, "\(pull.stderr)")
        #expect(try String(contentsOfFile: pulled, encoding: .utf8) == "the plan\n")
        let note = server.path("note.txt")
        try Data("from bob\n".utf8).write(to: URL(fileURLWithPath: note))
        let refused = try server.run(["push", note, "Documents/note.txt", "--container", "cli/team"], environment: bob)
        #expect(refused.status != 0 && refused.stderr.contains("may not change"), "\(refused.stderr)")

        #expect(try server.run("container", "share", "team", "bob", "--role", "writer").status == 0)
        let pushed = try server.run(
            ["push", note, "Documents/note.txt", "--container", "cli/team", "-q"], environment: bob)
        #expect(pushed.status == 0, "\(pushed.stderr)")
        let mine = server.path("mine.txt")
        #expect(try server.run("pull", "Documents/note.txt", mine, "--container", "team").status == 0)
        #expect(try String(contentsOfFile: mine, encoding: .utf8) == "from bob\n", "in the owner's container")
        let quota = try server.json(try server.run("quota", "--json", environment: bob))
        #expect(quota["used"] as? Int == 0, "what bob pushed counts against the owner's quota")

        #expect(try server.run("container", "unshare", "team", "bob").status == 0)
        let gone = try server.run(["pull", "Documents/plan.txt", pulled, "--container", "cli/team"], environment: bob)
        #expect(gone.status != 0 && gone.stderr.contains("no container cli/team is shared"), "\(gone.stderr)")
        #expect(try server.run("container", "members", "team").stdout.contains("shared with no one"))
    }

    @Test("a writer's synced folder holds the owner's documents and sends its own into the owner's container")
    func writerSyncs() throws {
        let server = try ServerProcess()
        var bob = try Self.owned(server)
        bob["XFER_STATE_DIR"] = server.path("bob-state")
        #expect(try server.run("container", "share", "team", "bob", "--role", "writer").status == 0)
        let folder = server.path("bob-team")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let first = try server.run(["sync", folder, "--once", "--container", "cli/team"], environment: bob)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try String(contentsOfFile: folder + "/Documents/plan.txt", encoding: .utf8) == "the plan\n")
        try Data("bob's part\n".utf8).write(to: URL(fileURLWithPath: folder + "/Documents/part.txt"))
        let second = try server.run(["sync", folder, "--once", "--container", "cli/team"], environment: bob)
        #expect(second.status == 0, "\(second.stderr)")
        let listed = try server.run("ls", "Documents/", "--container", "team")
        #expect(listed.stdout.contains("Documents/part.txt"), "\(listed.stdout)")
    }

    @Test("a writer mounts OWNER/NAME: it reads the owner's documents, and what it writes there the owner pulls")
    func writerMounts() throws {
        let server = try ServerProcess()
        var bob = try Self.owned(server)
        bob["XFER_STATE_DIR"] = server.path("bob-state")
        #expect(try server.run("container", "share", "team", "bob", "--role", "writer").status == 0)
        let mount = try MountedContainer(server, arguments: ["--container", "cli/team"], environment: bob)
        #expect(try String(contentsOfFile: mount.directory + "/Documents/plan.txt", encoding: .utf8) == "the plan\n")
        try Data("written in bob's mount\n".utf8).write(to: URL(fileURLWithPath: mount.directory + "/Documents/m.txt"))
        let pulled = server.path("m.txt")
        let deadline = Date().addingTimeInterval(20)
        while try server.run("pull", "Documents/m.txt", pulled, "--container", "team").status != 0, Date() < deadline {
            usleep(200_000)
        }
        #expect(try String(contentsOfFile: pulled, encoding: .utf8) == "written in bob's mount\n")
        #expect(try mount.stop(signal: nil).status == 0)
    }

    @Test("sharing with no account, with oneself, or another's container is refused; a member may leave")
    func refusalsAndLeave() throws {
        let server = try ServerProcess()
        let bob = try Self.owned(server)
        let nobody = try server.run("container", "share", "team", "nobody")
        #expect(nobody.status != 0 && nobody.stderr.contains("no account named"), "\(nobody.stderr)")
        let me = try server.run("container", "share", "team", "cli")
        #expect(me.status != 0 && me.stderr.contains("owns container"), "\(me.stderr)")
        let role = try server.run("container", "share", "team", "bob", "--role", "owner")
        #expect(role.status != 0, "the owner role is not given")
        #expect(try server.run("container", "share", "team", "bob").status == 0)
        let reshare = try server.run(["container", "share", "cli/team", "cli"], environment: bob)
        #expect(reshare.status != 0 && reshare.stderr.contains("only cli"), "\(reshare.stderr)")
        let left = try server.run(["container", "leave", "cli/team"], environment: bob)
        #expect(left.status == 0, "\(left.stderr)")
        #expect(try server.run("container", "list", environment: bob).stdout.contains("no containers"))
    }
}
