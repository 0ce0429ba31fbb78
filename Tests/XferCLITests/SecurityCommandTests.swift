import Foundation
import Testing
import XferCore
import XferTestSupport

/// TLS, tokens, verify and gc through the real binaries.
@Suite(.serialized) struct SecurityCommandTests {
    /// A throwaway CA and a server certificate for 127.0.0.1 signed by it, made with openssl.
    static func makeCertificates(in root: URL, name: String = "") throws {
        let script = """
            set -e
            cd '\(root.path)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca\(name).key -out ca\(name).pem -days 2 -subj /CN=xfer-test-ca\(name) 2>/dev/null
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' > ext.cnf
            openssl x509 -req -in server.csr -CA ca\(name).pem -CAkey ca\(name).key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf 2>/dev/null
            """
        let shell = ChildProcess()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", script]
        try shell.run()
        shell.waitUntilExit()
        guard shell.terminationStatus == 0 else { throw XferError(.io, "openssl failed") }
    }

    @Test func tlsWithAPrivateCA() throws {
        let server = try ServerProcess(
            serveArguments: ["--tls-cert", "$ROOT/server.pem", "--tls-key", "$ROOT/server.key"], scheme: "https",
            clientEnvironment: ["XFER_CA": "$ROOT/ca.pem"]
        ) { try Self.makeCertificates(in: $0) }
        let source = server.path("secret.bin")
        try randomFile(source, megabytes: 3, seed: 41)
        let pushed = try server.run("push", source, "secret.bin", "--quiet")
        #expect(pushed.status == 0, "\(pushed.stderr)")
        #expect(try server.run("pull", "secret.bin", server.path("copy.bin"), "--quiet").status == 0)
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: server.path("copy.bin")))
        // Without the CA the system's roots do not vouch for it: refused, clearly.
        let untrusted = try server.run("ls", environment: ["XFER_CA": ""])
        #expect(untrusted.status == 3)
        #expect(untrusted.stderr.contains("not trusted"), "\(untrusted.stderr)")
        // A certificate from another CA is refused too.
        try Self.makeCertificates(
            in: server.root.appendingPathComponent("other", isDirectory: true).creatingDirectory(), name: "2")
        let wrong = try server.run("ls", environment: ["XFER_CA": server.path("other/ca2.pem")])
        #expect(wrong.status == 3)
        // Plain HTTP to the TLS port does not get an answer either, and a missing CA file is named.
        #expect(try server.run("ls", environment: ["XFER_SERVER": "http://127.0.0.1:\(server.port)"]).status != 0)
        let missing = try server.run("ls", environment: ["XFER_CA": server.path("nope.pem")])
        #expect(missing.status == 6 && missing.stderr.contains("nope.pem"))
    }

    @Test func tokensVerifyAndGarbageCollection() throws {
        let server = try ServerProcess()
        let data = server.path("data")
        var info = stat()
        stat(data, &info)
        #expect(info.st_mode & 0o777 == 0o700, "the data directory is private")
        let source = server.path("doc.bin")
        try randomFile(source, megabytes: 2, seed: 42)
        #expect(try server.run("push", source, "doc.bin", "--quiet").status == 0)

        // verify: clean, then a flipped byte in a pack (the last payload byte of its last chunk) is found (exit 9).
        let clean = try server.run("verify", "--data", data, "--json")
        #expect(clean.status == 0)
        #expect(try server.json(clean)["ok"] as? Bool == true)
        let packs = data + "/packs"
        let files = try FileManager.default.contentsOfDirectory(atPath: packs).sorted().flatMap { fan in
            try FileManager.default.contentsOfDirectory(atPath: packs + "/" + fan).filter { !$0.hasPrefix(".") }.map {
                packs + "/" + fan + "/" + $0
            }
        }
        let file = try #require(files.first)
        var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        bytes[bytes.count - 1] ^= 1
        try bytes.write(to: URL(fileURLWithPath: file))
        let damaged = try server.run("verify", "--data", data)
        #expect(damaged.status == 9)
        #expect(damaged.stdout.contains("corrupt"))
        #expect(
            try server.run("verify", "--remote", environment: ["XFER_TOKEN": server.token]).status == 4,
            "an account may not verify the server")
        let admin = try String(contentsOfFile: data + "/admin-token", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(try server.run("verify", "--remote", environment: ["XFER_TOKEN": admin]).status == 9)

        // gc: a dry run through the server, then a real one on the directory.
        let dry = try server.run("gc", "--dry-run", "--grace", "0", "--json", environment: ["XFER_TOKEN": admin])
        #expect(dry.status == 0)
        #expect(try server.json(dry)["dry_run"] as? Bool == true)
        let gc = try server.run("gc", "--data", data, "--grace", "0")
        #expect(gc.status == 0 && gc.stdout.contains("removed 0 of"), "\(gc.stdout)")
        #expect(try server.run("gc", "--grace", "soon").status == 64)

        // Tokens: a second one, then revocation of the first; a revoked token gets exit 4.
        let second = try server.run("account", "new-token", "cli", "--data", data).stdout.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(second.hasPrefix("xfer_") && second != server.token)
        let revoked = try server.run(
            "account", "revoke-token", server.token, "--json", environment: ["XFER_TOKEN": admin])
        let revokedCount = try server.json(revoked)["revoked"] as? Int
        #expect(revoked.status == 0 && revokedCount == 1)
        let refused = try server.run("ls")
        #expect(refused.status == 4)
        #expect(!refused.stderr.contains(server.token), "a token is never echoed")
        #expect(try server.run("ls", environment: ["XFER_TOKEN": second]).status == 0)
        #expect(try server.run("account", "revoke-token", server.token, "--data", data).status == 5)
        let all = try server.run("account", "revoke-token", "--account", "cli", "--data", data)
        #expect(all.status == 0 && all.stdout.contains("revoked 1 token"))
        #expect(try server.run("ls", environment: ["XFER_TOKEN": second]).status == 4)
    }
}

extension URL {
    func creatingDirectory() throws -> URL {
        try FileManager.default.createDirectory(at: self, withIntermediateDirectories: true)
        return self
    }
}

/// `xfer serve --chunks s3://…` against a real S3-compatible endpoint (tools/ops/ceph-up.sh), when
/// XFER_S3_ENDPOINT and the AWS_* credentials are set.
@Suite(.serialized) struct S3ServeTests {
    static let endpoint = ProcessInfo.processInfo.environment["XFER_S3_ENDPOINT"]

    @Test(.enabled(if: endpoint != nil)) func pushPullVerifyAndGcWithChunksInS3() throws {
        let bucket = "xfer-cli-\(UUID().uuidString.prefix(8).lowercased())"
        let server = try ServerProcess(serveArguments: ["--chunks", "s3://\(bucket)/c", "--s3-endpoint", Self.endpoint!]
        )
        let source = server.path("doc.bin")
        try randomFile(source, megabytes: 4, seed: 60)
        let pushed = try server.run("push", source, "doc.bin", "--json")
        #expect(pushed.status == 0, "\(pushed.stderr)")
        #expect(try server.run("pull", "doc.bin", server.path("copy.bin"), "--quiet").status == 0)
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: server.path("copy.bin")))
        // `account create --data` opened the directory (and its empty pack directories) before `serve` ran.
        let packs = server.path("data/packs")
        let local = ((try? FileManager.default.subpathsOfDirectory(atPath: packs)) ?? []).filter {
            $0.count > 3 && !$0.contains("/.")
        }
        #expect(local.isEmpty, "chunks went to S3, not to the data directory: \(local.prefix(3))")
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let verified = try server.run("verify", "--remote", "--json", environment: ["XFER_TOKEN": admin])
        #expect(verified.status == 0, "\(verified.stdout)")
        let checked = try server.json(verified)["chunks_checked"] as? Int ?? 0
        #expect(checked > 10)
        #expect(try server.run("rm", "doc.bin").status == 0)
        let gc = try server.run("gc", "--grace", "0", "--json", environment: ["XFER_TOKEN": admin])
        #expect(gc.status == 0)
        let removed = try server.json(gc)["chunks_removed"] as? Int
        #expect(removed == 0, "the deletion version keeps history; nothing is unreferenced yet")
        // The data directory alone is not the whole store: gc and verify on it refuse, and change nothing.
        let before = try FileManager.default.subpathsOfDirectory(atPath: server.path("data")).sorted()
        for command in [["gc", "--grace", "0"], ["verify"]] {
            let offline = try server.run(command + ["--data", server.path("data")])
            #expect(offline.status != 0 && offline.stderr.contains("chunks in S3"), "\(command): \(offline.stderr)")
        }
        #expect(try FileManager.default.subpathsOfDirectory(atPath: server.path("data")).sorted() == before)
    }
}
