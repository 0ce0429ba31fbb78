import Foundation
import Testing
import XferTestSupport

/// Sharing an end-to-end encrypted container (docs/SHARING.md, "Encrypted containers") with the
/// real commands: fingerprints compared before a key is wrapped, a member unlocking with its
/// account key, and a removal rotating the key so that members carry on and new data is sealed
/// under a key the removed one never had.
@Suite struct EncryptedShareCommandTests {
    /// An account of the server's with a state directory of its own (its device).
    static func account(_ server: ServerProcess, _ name: String) throws -> [String: String] {
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let created = try server.run("account", "create", name, environment: ["XFER_TOKEN": admin])
        #expect(created.status == 0, "\(created.stderr)")
        return [
            "XFER_TOKEN": created.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
            "XFER_STATE_DIR": server.path("\(name)-state")
        ]
    }

    static func fingerprint(_ server: ServerProcess, _ environment: [String: String] = [:]) throws -> String {
        let shown = try server.json(try server.run(["account", "key", "--json"], environment: environment))
        return try #require(shown["fingerprint"] as? String)
    }

    static func write(_ server: ServerProcess, _ name: String, _ text: String) throws -> String {
        let path = server.path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func aMemberOpensTheSharedKeyAndARemovalRotatesIt() throws {
        let server = try ServerProcess()
        let owner = ["XFER_PASSPHRASE": "correct horse", "XFER_CONTAINER": "vault"]
        #expect(try server.run(["container", "create", "vault", "--encrypted"], environment: owner).status == 0)
        let plan = try Self.write(server, "plan.txt", "the plan\n")
        #expect(try server.run(["push", plan, "Documents/plan.txt", "-q"], environment: owner).status == 0)
        let bob = try Self.account(server, "bob")
        let carol = try Self.account(server, "carol")
        let bobPrint = try Self.fingerprint(server, bob)
        let carolPrint = try Self.fingerprint(server, carol)

        // No terminal and no fingerprint, or a wrong one: nothing is shared.
        let unasked = try server.run(["container", "share", "vault", "bob"], environment: owner)
        #expect(unasked.status != 0 && unasked.stderr.contains("no terminal"), "\(unasked.stderr)")
        let wrong = try server.run(
            ["container", "share", "vault", "bob", "--fingerprint", carolPrint], environment: owner)
        #expect(wrong.status == 4 && wrong.stderr.contains("not \(carolPrint)"), "\(wrong.stderr)")
        #expect(try server.run(["container", "members", "vault"], environment: owner).stdout.contains("no one"))

        let shared = try server.run(
            ["container", "share", "vault", "bob", "--role", "writer", "--fingerprint", bobPrint], environment: owner)
        #expect(shared.status == 0 && shared.stdout.contains("wrapped to bob's key \(bobPrint)"), "\(shared.stderr)")
        let ownerPrint = try Self.fingerprint(server, owner)
        #expect(
            try server.run(
                ["container", "share", "vault", "carol", "--fingerprint", carolPrint], environment: owner
            ).status == 0)

        // Bob: locked until he checks the owner's fingerprint, then reads and writes.
        let locked = try server.run(
            ["pull", "Documents/plan.txt", server.path("b.txt"), "--container", "cli/vault"], environment: bob)
        #expect(locked.status == 4 && locked.stderr.contains("xfer key unlock"), "\(locked.stderr)")
        let unlocked = try server.run(
            ["key", "unlock", "--container", "cli/vault", "--owner-fingerprint", ownerPrint], environment: bob)
        #expect(unlocked.status == 0, "\(unlocked.stderr)")
        let pulled = try server.run(
            ["pull", "Documents/plan.txt", server.path("b.txt"), "--container", "cli/vault"], environment: bob)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(try String(contentsOfFile: server.path("b.txt"), encoding: .utf8) == "the plan\n")
        let note = try Self.write(server, "note.txt", "from bob\n")
        #expect(
            try server.run(["push", note, "Documents/note.txt", "--container", "cli/vault", "-q"], environment: bob)
                .status == 0)
        #expect(try server.run(["pull", "Documents/note.txt", server.path("o.txt")], environment: owner).status == 0)
        #expect(try String(contentsOfFile: server.path("o.txt"), encoding: .utf8) == "from bob\n")
        #expect(
            try server.run(
                ["key", "unlock", "--container", "cli/vault", "--owner-fingerprint", ownerPrint], environment: carol
            ).status == 0)

        // Another device of the owner's, unlocked before the rotation.
        let laptop = owner.merging(["XFER_STATE_DIR": server.path("laptop-state")]) { $1 }
        #expect(try server.run(["key", "unlock"], environment: laptop).status == 0)

        // Carol is removed: the key rotates, wrapped again to bob only.
        let before = try server.json(try server.run(["container", "show", "vault", "--json"], environment: owner))
        let unshared = try server.run(["container", "unshare", "vault", "carol", "--json"], environment: owner)
        #expect(unshared.status == 0, "\(unshared.stderr)")
        let rotation = try #require(try server.json(unshared)["rotation"] as? [String: Any])
        let newKey = try #require(rotation["key_id"] as? String)
        #expect(newKey != before["key_id"] as? String)
        #expect(rotation["rewrapped"] as? [String] == ["bob"] && rotation["generation"] as? Int == 2)

        let after = try Self.write(server, "after.txt", "after carol left\n")
        #expect(try server.run(["push", after, "Documents/after.txt", "-q"], environment: owner).status == 0)
        // Bob's device takes the new key by itself; what was written before still opens.
        for name in ["after.txt", "plan.txt"] {
            let again = try server.run(
                ["pull", "Documents/\(name)", server.path("b-\(name)"), "--container", "cli/vault"], environment: bob)
            #expect(again.status == 0, "\(again.stderr)")
        }
        #expect(try String(contentsOfFile: server.path("b-after.txt"), encoding: .utf8) == "after carol left\n")
        let bobShow = try server.run(["container", "show", "--container", "cli/vault"], environment: bob)
        #expect(bobShow.stdout.contains("key \(newKey), unlocked"), "\(bobShow.stdout)")

        // The laptop holds the older key: it says so, and the passphrase unlocks the ring again.
        let stale = try server.run(["pull", "Documents/after.txt", server.path("l.txt")], environment: laptop)
        #expect(stale.status == 4 && stale.stderr.contains("rotated"), "\(stale.stderr)")
        #expect(try server.run(["key", "unlock"], environment: laptop).status == 0)
        for name in ["after.txt", "plan.txt"] {
            #expect(
                try server.run(["pull", "Documents/\(name)", server.path("l-\(name)")], environment: laptop).status == 0
            )
        }
        #expect(try String(contentsOfFile: server.path("l-plan.txt"), encoding: .utf8) == "the plan\n")

        // Carol's key file holds the first key only: not the one new data is sealed under.
        let carolKeys = try FileManager.default.contentsOfDirectory(atPath: server.path("carol-state/keys"))
        #expect(carolKeys.count == 1)
        let carolFile = try String(contentsOfFile: server.path("carol-state/keys/\(carolKeys[0])"), encoding: .utf8)
        #expect(carolFile.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.hasPrefix("owner-key") }.count == 1)
    }
}
