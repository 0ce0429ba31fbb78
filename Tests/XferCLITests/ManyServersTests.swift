import Foundation
import Testing
import XferCore

/// Two `xfer serve` processes sharing one PostgreSQL database and one S3 bucket (tools/pg-up.sh,
/// tools/ceph-up.sh), when XFER_POSTGRES_URL and XFER_S3_ENDPOINT are set.
@Suite(.serialized) struct ManyServersTests {
    static let environment = ProcessInfo.processInfo.environment
    static let enabled = environment["XFER_POSTGRES_URL"] != nil && environment["XFER_S3_ENDPOINT"] != nil

    @Test(.enabled(if: enabled)) func twoServersShareDocumentsVersionsConflictsKeysAndTheFeed() throws {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let shared = ["--metadata", Self.environment["XFER_POSTGRES_URL"]! + "?schema=many_\(unique)",
                      "--chunks", "s3://xfer-many-\(unique)/c", "--s3-endpoint", Self.environment["XFER_S3_ENDPOINT"]!]
        let a = try ServerProcess(serveArguments: shared, createAccount: false)
        let b = try ServerProcess(serveArguments: shared, createAccount: false)
        // One admin token for the deployment, written by the first server to start.
        let admin = try String(contentsOfFile: a.path("data/admin-token"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let created = try a.run("account", "create", "shared", environment: ["XFER_TOKEN": admin])
        #expect(created.status == 0, "\(created.stderr)")
        a.token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        b.token = a.token

        // A document pushed to A pulls from B.
        let source = a.path("doc.bin")
        try randomFile(source, megabytes: 3, seed: 70)
        #expect(try a.run("push", source, "doc.bin", "--quiet").status == 0)
        #expect(try b.run("pull", "doc.bin", b.path("copy.bin"), "--quiet").status == 0)
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: b.path("copy.bin")))

        // A client waiting on B's feed wakes when a push commits on A.
        let cursor = try b.json(try b.run("changes", "--json"))["cursor"] as? Int ?? 0
        let waiter = try b.start(["changes", "--since", "\(cursor)", "--wait", "30", "--json"])
        usleep(300_000)
        let started = Date()
        try randomFile(source, megabytes: 1, seed: 71)
        #expect(try a.run("push", source, "doc.bin", "--quiet").status == 0)
        let output = (waiter.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
        waiter.waitUntilExit()
        let woke = Date().timeIntervalSince(started)
        #expect(String(decoding: output, as: UTF8.self).contains("doc.bin"))
        #expect(woke < 10, "the waiter on B woke \(woke) s after the push on A began (a 30 s wait)")

        // A stale push through B becomes a conflict version that A sees.
        let stale = b.path("copy.bin")
        try Data("an edit made from version 1".utf8).write(to: URL(fileURLWithPath: stale))
        let pushed = try b.run("push", stale, "doc.bin", "--json")
        #expect(pushed.status == 0)
        let versions = try a.run("versions", "doc.bin")
        #expect(versions.stdout.contains("conflict"), "\(versions.stdout)")

        // Key-value writes on one are read on the other.
        #expect(try a.run("kv", "set", "theme", "\"dark\"").status == 0)
        #expect(try b.run("kv", "get", "theme").stdout.contains("dark"))

        // Both see a consistent store.
        let verified = try b.run("verify", "--remote", "--json", environment: ["XFER_TOKEN": admin])
        #expect(verified.status == 0, "\(verified.stdout)")
    }
}
