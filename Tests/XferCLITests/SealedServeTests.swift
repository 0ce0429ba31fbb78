import Foundation
import Testing
import XferCore

/// `xfer server-key` and `xfer serve --encryption-key`: a key file made once and never
/// overwritten, a server that seals what it stores and will not start without its key.
@Suite struct SealedServeTests {
    @Test func aKeyFileIsMadeOnceWithMode600() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-key-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let made = try XferProcess.run("server-key", "new", root + "/key", "--json")
        #expect(made.status == 0, "\(made.stderr)")
        let id = try #require(try JSONSerialization.jsonObject(with: Data(made.stdout.utf8)) as? [String: String])["id"]
        #expect(ServeHardeningTests.mode(root + "/key") & 0o777 == 0o600)
        let before = try #require(FileManager.default.contents(atPath: root + "/key"))
        let again = try XferProcess.run("server-key", "new", root + "/key")
        #expect(again.status != 0)
        #expect(again.stderr.contains("never overwritten"))
        #expect(FileManager.default.contents(atPath: root + "/key") == before)
        let shown = try XferProcess.run("server-key", "show", "--encryption-key", root + "/key")
        #expect(shown.stdout.contains(try #require(id)))
    }

    @Test func aSealedServerStoresNoPlainBytesAndWillNotStartWithoutItsKey() throws {
        let server = try ServerProcess(serveArguments: ["--encryption-key", "$ROOT/key"], createAccount: false) {
            root in
            let made = try XferProcess.run("server-key", "new", root.appendingPathComponent("key").path)
            #expect(made.status == 0, "\(made.stderr)")
        }
        let data = server.path("data")
        let key = server.path("key")
        let created = try server.run("account", "create", "cli", "--data", data, "--encryption-key", key)
        #expect(created.status == 0, "\(created.stderr)")
        server.token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let line = "a line of the platypus diary that no disk should show in the clear\n"
        try Data(String(repeating: line, count: 400).utf8).write(
            to: URL(fileURLWithPath: server.path("diary-platypus.txt")))
        try randomFile(server.path("blob.bin"), megabytes: 1, seed: 9)
        let blob = try #require(FileManager.default.contents(atPath: server.path("blob.bin")))
        try FileManager.default.createDirectory(atPath: server.path("tree"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: server.path("diary-platypus.txt"), toPath: server.path("tree/diary-platypus.txt"))
        try FileManager.default.copyItem(atPath: server.path("blob.bin"), toPath: server.path("tree/blob.bin"))
        let pushed = try server.run("push", server.path("tree"), "journal")
        #expect(pushed.status == 0, "\(pushed.stderr)")

        // Nothing in the data directory shows the text, the names or the random bytes.
        let secrets = [
            Data(line.utf8), Data("diary-platypus".utf8), blob.subdata(in: 4096..<4160),
            blob.subdata(in: 700_000..<700_064)
        ]
        for file in FileManager.default.enumerator(atPath: data)!.compactMap({ $0 as? String }) {
            guard let bytes = FileManager.default.contents(atPath: data + "/" + file) else { continue }
            for secret in secrets { #expect(bytes.range(of: secret) == nil, "\(file) shows \(secret.prefix(16))") }
        }

        server.stopServer()
        let keyless = try server.run("serve", "--data", data, "--listen", "127.0.0.1:\(server.port)")
        #expect(keyless.status != 0)
        #expect(keyless.stderr.contains("sealed with encryption key"), "\(keyless.stderr)")
        let keylessVerify = try server.run("verify", "--data", data)
        #expect(keylessVerify.status == 6)
        #expect(keylessVerify.stderr.contains("sealed with encryption key"), "\(keylessVerify.stderr)")

        // The key from the environment works as the file does.
        let keyText = try String(contentsOfFile: key, encoding: .utf8)
        let verified = try server.run("verify", "--data", data, environment: ["XFER_ENCRYPTION_KEY": keyText])
        #expect(verified.status == 0, "\(verified.stdout) \(verified.stderr)")
        try server.startServer()
        let pulled = try server.run("pull", "journal", server.path("copy"))
        #expect(pulled.status == 0, "\(pulled.stderr)")
        #expect(FileManager.default.contents(atPath: server.path("copy/blob.bin")) == blob)
        #expect(
            FileManager.default.contents(atPath: server.path("copy/diary-platypus.txt"))
                == Data(String(repeating: line, count: 400).utf8))
    }
}
