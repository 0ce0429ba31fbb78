import Foundation
import Testing

/// `xfer container create --encrypted` and `xfer key …` through the binary: the recovery key
/// printed once, a second device unlocking with the passphrase from the environment or a file,
/// a wrong one refused with its exit code, and a push and pull by devices holding the key.
@Suite struct EncryptedContainerCommandTests {
    @Test func aContainerMadeEncryptedIsUnlockedElsewhereAndCarriesSealedDocuments() throws {
        let server = try ServerProcess()
        let made = try server.run(
            "container", "create", "vault", "--encrypted", "--json", environment: ["XFER_PASSPHRASE": "correct horse"])
        #expect(made.status == 0, "\(made.stderr)")
        let answer = try server.json(made)
        let recovery = try #require(answer["recovery_key"] as? String)
        let keyID = try #require(answer["key_id"] as? String)
        #expect(recovery.count == 65 && keyID.count == 16)

        let plain = try server.run("container", "create", "other")
        #expect(plain.status != 0 && plain.stderr.contains("--encrypted"), "\(plain.stderr)")
        let again = try server.run("container", "create", "vault", "--encrypted", environment: ["XFER_PASSPHRASE": "x"])
        #expect(again.status == 7, "\(again.stderr)")

        let shown = try server.run("container", "show", "vault")
        #expect(
            shown.status == 0 && shown.stdout.contains("end-to-end encrypted, key \(keyID), unlocked"),
            "\(shown.stdout)")

        // Another device (its own state directory): locked, a wrong passphrase refused, then unlocked from a file.
        let elsewhere = ["XFER_STATE_DIR": server.path("state-b"), "XFER_CONTAINER": "vault"]
        #expect(try server.run("container", "show", environment: elsewhere).stdout.contains("locked on this device"))
        let wrong = try server.run("key", "unlock", environment: elsewhere.merging(["XFER_PASSPHRASE": "wrong"]) { $1 })
        #expect(wrong.status == 4 && wrong.stderr.contains("wrong passphrase"), "\(wrong.stderr)")
        try Data("correct horse\n".utf8).write(to: URL(fileURLWithPath: server.path("pass")))
        let unlocked = try server.run("key", "unlock", "--passphrase-file", server.path("pass"), environment: elsewhere)
        #expect(unlocked.status == 0 && unlocked.stdout.contains(keyID), "\(unlocked.stderr)")
        let exported = try server.run("key", "export-recovery", environment: elsewhere)
        #expect(exported.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == recovery)

        // The passphrase changes from that device; the old one no longer unlocks a third.
        let changed = try server.run(
            "key", "change", environment: elsewhere.merging(["XFER_NEW_PASSPHRASE": "battery staple"]) { $1 })
        #expect(changed.status == 0, "\(changed.stderr)")
        let third = ["XFER_STATE_DIR": server.path("state-c"), "XFER_CONTAINER": "vault"]
        #expect(
            try server.run("key", "unlock", environment: third.merging(["XFER_PASSPHRASE": "correct horse"]) { $1 })
                .status == 4)
        try Data(recovery.lowercased().utf8).write(to: URL(fileURLWithPath: server.path("recovery")))
        let recovered = try server.run(
            "key", "recover", "--recovery-file", server.path("recovery"),
            environment: third.merging(["XFER_NEW_PASSPHRASE": "new one"]) { $1 })
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(
            try server.run("key", "unlock", environment: third.merging(["XFER_PASSPHRASE": "new one"]) { $1 }).status
                == 0)

        // A device holding the key pushes; the server lists only a sealed name; another device
        // pulls the same bytes; one without the key is told to unlock (exit 4), and sends nothing.
        try Data("plain text".utf8).write(to: URL(fileURLWithPath: server.path("note.txt")))
        let pushed = try server.run("push", server.path("note.txt"), "note.txt", "--json", environment: elsewhere)
        #expect(pushed.status == 0, "\(pushed.stderr)")
        #expect(try server.json(pushed)["document"] as? String == "note.txt")
        // Listed by a device holding the key, with its name opened there.
        #expect(try server.run("ls", environment: elsewhere).stdout.contains("note.txt"))
        let pulled = try server.run("pull", "note.txt", server.path("note-c.txt"), environment: third)
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(FileManager.default.contents(atPath: server.path("note-c.txt")) == Data("plain text".utf8))
        // Key-value entries too: set on one device, read on another.
        #expect(try server.run("kv", "set", "theme", "harbour dark", environment: elsewhere).status == 0)
        let theme = try server.run("kv", "get", "theme", environment: third)
        #expect(theme.status == 0 && theme.stdout.contains("harbour dark"), "\(theme.stderr)")
        let fourth = ["XFER_STATE_DIR": server.path("state-d"), "XFER_CONTAINER": "vault"]
        let locked = try server.run("push", server.path("note.txt"), "other.txt", environment: fourth)
        #expect(locked.status == 4 && locked.stderr.contains("xfer key unlock"), "\(locked.stderr)")
        #expect(try server.run("ls", environment: fourth).status == 4)
    }

    /// `--key-file` (or XFER_KEY_FILE): the key lives in a file of the user's choosing, mode
    /// 0600, not in the state directory; a device given that file reads the container, one
    /// without it is locked, and a file others can read is refused.
    @Test func aKeyFileOfTheUsersChoosing() throws {
        let server = try ServerProcess()
        let keyFile = server.path("vault.key")
        let device = ["XFER_STATE_DIR": server.path("state-k"), "XFER_CONTAINER": "vault"]
        let made = try server.run(
            "container", "create", "vault", "--encrypted", "--key-file", keyFile,
            environment: device.merging(["XFER_PASSPHRASE": "correct horse"]) { $1 })
        #expect(made.status == 0, "\(made.stderr)")
        var info = stat()
        #expect(stat(keyFile, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(!FileManager.default.fileExists(atPath: server.path("state-k/keys")), "nothing in the state directory")
        let shown = try server.run("container", "show", environment: device.merging(["XFER_KEY_FILE": keyFile]) { $1 })
        #expect(shown.stdout.contains("unlocked on this device"), "\(shown.stdout)")
        let exported = try server.run("key", "export-recovery", "--json", "--key-file", keyFile, environment: device)
        #expect(try server.json(exported)["key_file"] as? String == keyFile, "\(exported.stdout)")

        try Data("kept in a key file\n".utf8).write(to: URL(fileURLWithPath: server.path("note.txt")))
        #expect(
            try server.run("push", server.path("note.txt"), "note.txt", "--key-file", keyFile, environment: device)
                .status == 0)
        // Without the file this device holds no key: locked (exit 4), nothing pulled.
        let locked = try server.run("pull", "note.txt", server.path("locked.txt"), environment: device)
        #expect(locked.status == 4 && locked.stderr.contains("xfer key unlock"), "\(locked.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.path("locked.txt")))
        // Another state directory given the same file reads the container.
        let other = ["XFER_STATE_DIR": server.path("state-l"), "XFER_CONTAINER": "vault", "XFER_KEY_FILE": keyFile]
        #expect(try server.run("pull", "note.txt", server.path("copy.txt"), environment: other).status == 0)
        #expect(FileManager.default.contents(atPath: server.path("copy.txt")) == Data("kept in a key file\n".utf8))
        // A key file others can read is refused, and says why.
        chmod(keyFile, 0o644)
        let open = try server.run("pull", "note.txt", server.path("open.txt"), environment: other)
        #expect(open.status != 0 && open.stderr.contains(keyFile), "\(open.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.path("open.txt")))
    }

    @Test func twoFoldersSyncAnEncryptedContainerByPlainNames() throws {
        let server = try ServerProcess()
        let a = ["XFER_CONTAINER": "vault"]
        #expect(
            try server.run(
                "container", "create", "vault", "--encrypted", environment: a.merging(["XFER_PASSPHRASE": "pw"]) { $1 }
            ).status == 0)
        let b = ["XFER_STATE_DIR": server.path("state-b"), "XFER_CONTAINER": "vault"]
        #expect(try server.run("key", "unlock", environment: b.merging(["XFER_PASSPHRASE": "pw"]) { $1 }).status == 0)
        let folderA = server.path("a")
        let folderB = server.path("b")
        try FileManager.default.createDirectory(atPath: folderA + "/Harbour plans", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: folderB, withIntermediateDirectories: true)
        try Data("phase two".utf8).write(to: URL(fileURLWithPath: folderA + "/Harbour plans/notes.txt"))

        let first = try server.run("sync", folderA, "--once", "--json", environment: a)
        #expect(first.status == 0, "\(first.stderr)")
        // A dry run on the other device names what would come, by plain names.
        let dry = try server.run("sync", folderB, "--dry-run", environment: b)
        #expect(dry.status == 0 && dry.stdout.contains("Harbour plans/notes.txt"), "\(dry.stdout)\(dry.stderr)")
        let second = try server.run("sync", folderB, "--once", environment: b)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(FileManager.default.contents(atPath: folderB + "/Harbour plans/notes.txt") == Data("phase two".utf8))
        let status = try server.json(try server.run("status", folderB, "--json", environment: b))
        let documents = status["documents"] as? [[String: Any]] ?? []
        #expect(
            documents.map { $0["path"] as? String ?? "" } == ["Harbour plans", "Harbour plans/notes.txt"],
            "\(documents)")
        #expect(documents.allSatisfy { $0["state"] as? String == "synced" })
        // Evict and fetch, and `xfer verify` of the folder, by plain names.
        #expect(try server.run("evict", folderB + "/Harbour plans/notes.txt", environment: b).status == 0)
        #expect(!FileManager.default.fileExists(atPath: folderB + "/Harbour plans/notes.txt"))
        #expect(try server.run("fetch", folderB + "/Harbour plans/notes.txt", environment: b).status == 0)
        #expect(FileManager.default.contents(atPath: folderB + "/Harbour plans/notes.txt") == Data("phase two".utf8))
        let verified = try server.run("verify", folderB, environment: b)
        #expect(verified.status == 0, "\(verified.stdout)\(verified.stderr)")
        // The server's copy, checked by a device holding the key.
        let remote = try server.run("verify", "--documents", "--json", environment: b)
        #expect(remote.status == 0, "\(remote.stdout)\(remote.stderr)")
        #expect(
            try server.json(remote)["documents_checked"] as? Int == 2 && server.json(remote)["ok"] as? Bool == true,
            "\(remote.stdout)")

        // A device without the key syncs nothing and is told to unlock (exit 4).
        let folderC = server.path("c")
        try FileManager.default.createDirectory(atPath: folderC, withIntermediateDirectories: true)
        let locked = try server.run(
            "sync", folderC, "--once",
            environment: ["XFER_STATE_DIR": server.path("state-c"), "XFER_CONTAINER": "vault"])
        #expect(locked.status == 4 && locked.stderr.contains("xfer key unlock"), "\(locked.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folderC).filter { !$0.hasPrefix(".") }.isEmpty)

        // Damage on the server (a byte in the middle of every pack) is what the device's check
        // reports, by document, with exit 9; mended, the check is clean again.
        let packs = server.path("data/packs")
        let names = (FileManager.default.enumerator(atPath: packs)?.compactMap { $0 as? String } ?? []).filter {
            var isDirectory: ObjCBool = false
            return !$0.contains("/.")
                && FileManager.default.fileExists(atPath: packs + "/" + $0, isDirectory: &isDirectory)
                && !isDirectory.boolValue
        }
        try #require(!names.isEmpty)
        var originals: [String: Data] = [:]
        for name in names {
            let original = try Data(contentsOf: URL(fileURLWithPath: packs + "/" + name))
            originals[name] = original
            var damaged = original
            damaged[damaged.count / 2] ^= 0x20
            try damaged.write(to: URL(fileURLWithPath: packs + "/" + name))
        }
        let damaged = try server.run("verify", "--documents", "--json", environment: b)
        #expect(damaged.status == 9, "\(damaged.stdout)\(damaged.stderr)")
        let report = try server.json(damaged)
        #expect(
            report["ok"] as? Bool == false && (report["problems"] as? [[String: Any]])?.isEmpty == false,
            "\(damaged.stdout)")
        for (name, original) in originals { try original.write(to: URL(fileURLWithPath: packs + "/" + name)) }
        #expect(try server.run("verify", "--documents", environment: b).status == 0)
    }
}
