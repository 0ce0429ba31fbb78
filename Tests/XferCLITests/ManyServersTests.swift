import Foundation
import Testing
import XferCore

/// Two `xfer serve` processes sharing one PostgreSQL database and one S3 bucket (tools/ops/pg-up.sh,
/// tools/ops/ceph-up.sh), when XFER_POSTGRES_URL and XFER_S3_ENDPOINT are set.
@Suite(.serialized) struct ManyServersTests {
    static let environment = ProcessInfo.processInfo.environment
    static let enabled = environment["XFER_POSTGRES_URL"] != nil && environment["XFER_S3_ENDPOINT"] != nil

    @Test(.enabled(if: enabled)) func twoServersShareDocumentsVersionsConflictsKeysAndTheFeed() throws {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let shared = [
            "--metadata", Self.environment["XFER_POSTGRES_URL"]! + "?schema=many_\(unique)",
            "--chunks", "s3://xfer-many-\(unique)/c", "--s3-endpoint", Self.environment["XFER_S3_ENDPOINT"]!
        ]
        let a = try ServerProcess(serveArguments: shared, createAccount: false)
        let b = try ServerProcess(serveArguments: shared, createAccount: false)
        // One admin token for the deployment, written by the first server to start.
        let admin = try String(contentsOfFile: a.path("data/admin-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
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
        try b.waitForParkedPolls(admin: admin)
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

    /// Quota is one account-wide figure whichever server counts it, and gc run by both servers
    /// at once, while a push through one of them reuses the chunks being swept, loses nothing.
    @Test(.enabled(if: enabled)) func quotaAndConcurrentGarbageCollectionWithTwoServers() throws {
        let unique = UUID().uuidString.prefix(8).lowercased()
        // No superseded versions kept, so a removal frees its chunks at once.
        let shared = [
            "--metadata", Self.environment["XFER_POSTGRES_URL"]! + "?schema=gc_\(unique)",
            "--chunks", "s3://xfer-gc-\(unique)/c", "--s3-endpoint", Self.environment["XFER_S3_ENDPOINT"]!,
            "--keep-versions", "0", "--keep-days", "0"
        ]
        let a = try ServerProcess(serveArguments: shared, createAccount: false)
        let b = try ServerProcess(serveArguments: shared, createAccount: false)
        let admin = try String(contentsOfFile: a.path("data/admin-token"), encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        let created = try a.run("account", "create", "gc", "--quota", "\(10 << 20)", environment: ["XFER_TOKEN": admin])
        #expect(created.status == 0, "\(created.stderr)")
        a.token = created.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        b.token = a.token
        func used(_ server: ServerProcess) throws -> Int64 {
            (try server.json(try server.run("quota", "--json"))["used"] as? NSNumber)?.int64Value ?? -1
        }

        // 4 MiB through each server: both count 8 MiB.
        try randomFile(a.path("a.bin"), megabytes: 4, seed: 80)
        try randomFile(b.path("b.bin"), megabytes: 4, seed: 81)
        #expect(try a.run("push", a.path("a.bin"), "a.bin", "--quiet").status == 0)
        #expect(try b.run("push", b.path("b.bin"), "b.bin", "--quiet").status == 0)
        #expect(try used(a) == 8 << 20)
        #expect(try used(b) == 8 << 20)

        // 4 MiB more passes the 10 MiB quota through either server, and records nothing.
        try randomFile(b.path("c.bin"), megabytes: 4, seed: 82)
        let refused = try b.run("push", b.path("c.bin"), "c.bin", "--quiet")
        #expect(refused.status == 8, "\(refused.stderr)")
        #expect(try a.run("pull", "c.bin", a.path("c.out"), "--quiet").status != 0, "c.bin has no committed version")
        #expect(try used(a) == 8 << 20)

        // Removing a.bin through B gives its 4 MiB back at once, seen through A.
        #expect(try b.run("rm", "a.bin").status == 0)
        #expect(try used(a) == 4 << 20)

        // Both servers collect at once (no grace: every unheld chunk is a candidate) while a
        // push through B stores a.bin's bytes again under another name, reusing those chunks.
        let gcA = try a.start(["gc", "--grace", "0s", "--json"], environment: ["XFER_TOKEN": admin])
        let gcB = try b.start(["gc", "--grace", "0s", "--json"], environment: ["XFER_TOKEN": admin])
        var again = try b.run("push", a.path("a.bin"), "again.bin", "--json")
        for child in [gcA, gcB] {
            let output = (child.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
            child.waitUntilExit()
            #expect(child.terminationStatus == 0, "\(String(decoding: output, as: UTF8.self))")
        }
        if again.status != 0 {
            // With no grace, a gc may take the push's pending version or chunks as abandoned:
            // the push must then fail with a clear error (its version gone, or chunks missing),
            // and a re-run once the collections are over must succeed.
            let code = (try a.json(again)["error"] as? [String: Any])?["code"] as? String
            #expect(
                [5, 9].contains(again.status) && ["not_found", "missing_chunks"].contains(code ?? ""), "\(again.stdout)"
            )
            again = try b.run("push", a.path("a.bin"), "again.bin", "--json")
        }
        #expect(again.status == 0, "\(again.stdout)")

        // Nothing committed is lost: both documents pull intact from either server, the quota
        // counts exactly the two documents, and both servers find the store consistent.
        #expect(try a.run("pull", "again.bin", a.path("again.out"), "--quiet").status == 0)
        #expect(FileManager.default.contentsEqual(atPath: a.path("a.bin"), andPath: a.path("again.out")))
        #expect(try b.run("pull", "b.bin", a.path("b.out"), "--quiet").status == 0)
        #expect(FileManager.default.contentsEqual(atPath: b.path("b.bin"), andPath: a.path("b.out")))
        #expect(try used(a) == 8 << 20)
        #expect(try used(b) == 8 << 20)
        for server in [a, b] {
            let verified = try server.run("verify", "--remote", "--json", environment: ["XFER_TOKEN": admin])
            #expect(verified.status == 0, "\(verified.stdout)")
        }

        // A last gc has nothing left to remove: the concurrent ones swept everything unheld.
        let last = try a.json(try a.run("gc", "--grace", "0s", "--json", environment: ["XFER_TOKEN": admin]))
        #expect((last["chunks_removed"] as? Int) == 0, "\(last)")
    }
}
