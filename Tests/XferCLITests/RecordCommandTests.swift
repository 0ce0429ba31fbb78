import Foundation
import Testing
import XferTestSupport

/// `xfer records …` against a real server, in CloudKit Web Services' JSON: saving with change
/// tags, a conflict handed back with the server's record, queries, changes, and a reader of a
/// shared container reading but not saving.
@Suite struct RecordCommandTests {
    @Test func recordsAreSavedQueriedFollowedAndConflictsReported() throws {
        let server = try ServerProcess()
        let create = """
            {"operations": [
              {"operationType": "create", "record": {"recordName": "n1", "recordType": "Note",
                "fields": {"title": {"value": "Groceries"}, "stars": {"value": 4}, "due": {"value": 1790000000000, "type": "TIMESTAMP"}}}},
              {"operationType": "create", "record": {"recordName": "n2", "recordType": "Note",
                "fields": {"title": {"value": "Trip"}, "stars": {"value": 2}}}}]}
            """
        let made = try server.run("records", "modify", create, "--container", "notes")
        #expect(made.status == 0, "\(made.stderr)")
        let records = try #require(try server.json(made)["records"] as? [[String: Any]])
        let tag = try #require(records[0]["recordChangeTag"] as? String)
        #expect(
            records[0]["recordName"] as? String == "n1"
                && (records[0]["created"] as? [String: Any])?["userRecordName"] as? String == "cli")

        // A stale tag: exit 7, the answer names CONFLICT and carries the server's record.
        let update = { (tag: String, title: String) in
            """
            {"operations": [{"operationType": "update", "record": {"recordName": "n1", "recordChangeTag": "\(tag)",
              "fields": {"title": {"value": "\(title)"}}}}]}
            """
        }
        #expect(
            try server.run("records", "modify", update(tag, "Groceries, Saturday"), "--container", "notes").status == 0)
        let stale = try server.run("records", "modify", update(tag, "lost"), "--container", "notes")
        #expect(stale.status == 7, "\(stale.stderr)")
        let conflict = try #require(try server.json(stale)["records"] as? [[String: Any]])[0]
        #expect(conflict["serverErrorCode"] as? String == "CONFLICT")
        #expect(
            ((conflict["serverRecord"] as? [String: Any])?["fields"] as? [String: Any]).flatMap {
                ($0["title"] as? [String: Any])?["value"] as? String
            } == "Groceries, Saturday")

        let query = """
            {"query": {"recordType": "Note", "filterBy": [{"comparator": "GREATER_THAN", "fieldName": "stars", "fieldValue": {"value": 3}}],
              "sortBy": [{"fieldName": "stars", "ascending": false}]}}
            """
        let found = try server.run("records", "query", query, "--container", "notes")
        #expect(found.status == 0, "\(found.stderr)")
        #expect(
            (try server.json(found)["records"] as? [[String: Any]])?.compactMap { $0["recordName"] as? String } == [
                "n1"
            ])
        let changes = try server.run(
            "records", "changes", #"{"zones": [{"zoneID": {"zoneName": "_defaultZone"}}]}"#, "--container", "notes")
        let zone = try #require(try server.json(changes)["zones"] as? [[String: Any]])[0]
        #expect((zone["records"] as? [[String: Any]])?.count == 2 && zone["moreComing"] as? Bool == false)

        // A zone subscription is told of the next change; a wait with nothing new answers empty.
        let subscribe =
            #"{"operations": [{"operationType": "create", "subscription": {"subscriptionID": "all", "subscriptionType": "zone"}}]}"#
        #expect(try server.run("records", "subscribe", subscribe, "--container", "notes").status == 0)
        #expect(try server.run("records", "modify", update(tag, "again"), "--container", "notes").status == 7)
        let forced = #"{"operations": [{"operationType": "forceDelete", "record": {"recordName": "n2"}}]}"#
        #expect(try server.run("records", "modify", forced, "--container", "notes").status == 0)
        let told = try server.json(try server.run("records", "notifications", "--container", "notes"))
        let notes = try #require(told["notifications"] as? [[String: Any]])
        #expect(
            notes.count == 1 && notes[0]["reason"] as? String == "delete" && notes[0]["recordName"] as? String == "n2")
        let cursor = try #require(told["cursor"] as? Int)
        let started = Date()
        let waited = try server.json(
            try server.run("records", "notifications", "--since", "\(cursor)", "--wait", "1", "--container", "notes"))
        #expect((waited["notifications"] as? [Any])?.isEmpty == true && Date().timeIntervalSince(started) < 10)

        // An asset names a document of the container: pushed first, then saved with it.
        let photo = server.path("photo.jpg")
        try Data("not really a photo".utf8).write(to: URL(fileURLWithPath: photo))
        #expect(try server.run("push", photo, "Photos/one.jpg", "--container", "notes", "-q").status == 0)
        let withAsset =
            #"{"operations": [{"operationType": "create", "record": {"recordName": "p1", "recordType": "Photo", "fields": {"image": {"value": {"path": "Photos/one.jpg"}}}}}]}"#
        let saved = try server.run("records", "modify", withAsset, "--container", "notes")
        #expect(saved.status == 0, "\(saved.stdout)")
        #expect(saved.stdout.contains(#""type":"ASSETID""#))

        let bad = try server.run("records", "query", #"{"query": {}}"#, "--container", "notes")
        #expect(bad.status == 6 && bad.stderr.contains("recordType"), "\(bad.stderr)")

        // A reader of the shared container reads the records and saves none.
        let admin = try String(contentsOfFile: server.path("data/admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let bob = try server.run("account", "create", "bob", environment: ["XFER_TOKEN": admin])
        let bobEnv = ["XFER_TOKEN": bob.stdout.trimmingCharacters(in: .whitespacesAndNewlines)]
        #expect(try server.run("container", "share", "notes", "bob", "--role", "reader").status == 0)
        let read = try server.run(["records", "query", query, "--container", "cli/notes"], environment: bobEnv)
        #expect(read.status == 0, "\(read.stderr)")
        let refused = try server.run(["records", "modify", create, "--container", "cli/notes"], environment: bobEnv)
        #expect(refused.status != 0 && refused.stderr.contains("may not change"), "\(refused.stderr)")
    }

    /// A field marked isEncrypted in an end-to-end encrypted container: sealed on the device,
    /// never seen by the server in the clear, opened on the way back, and refused by queries; in
    /// a plain container such a field is refused before anything is sent.
    @Test func encryptedFieldsAreSealedOnTheDevice() async throws {
        try await Self.offThePool { try Self.encryptedFields() }
    }

    /// Runs a test that waits on processes on a dispatch thread, so that it holds none of the
    /// few threads the suite's in-process servers run on.
    static func offThePool(_ body: @escaping @Sendable () throws -> Void) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    static func encryptedFields() throws {
        let server = try ServerProcess()
        let owner = ["XFER_PASSPHRASE": "correct horse", "XFER_CONTAINER": "vault"]
        #expect(try server.run(["container", "create", "vault", "--encrypted"], environment: owner).status == 0)
        let contact = """
            {"operations": [{"operationType": "create", "record": {"recordName": "c1", "recordType": "Contact",
              "fields": {"name": {"value": "Ada"}, "phone": {"value": "+44 20 7946 0000", "isEncrypted": true}}}}]}
            """
        let saved = try server.run(["records", "modify", contact], environment: owner)
        #expect(saved.status == 0, "\(saved.stderr)")
        func phone(_ result: XferProcess) throws -> [String: Any]? {
            let records = try server.json(result)["records"] as? [[String: Any]]
            return (records?.first?["fields"] as? [String: Any])?["phone"] as? [String: Any]
        }
        #expect(try phone(saved)?["value"] as? String == "+44 20 7946 0000")
        #expect(try phone(saved)?["isEncrypted"] as? Bool == true)

        // What the server holds: ENCRYPTED_BYTES, not the number.
        let raw = try shell(
            "curl -sf -X POST -H 'Authorization: Bearer \(server.token)' -H 'Content-Type: application/json' "
                + "-d '{\"records\": [{\"recordName\": \"c1\"}]}' http://127.0.0.1:\(server.port)/v1/containers/vault/records/lookup"
        ).output
        #expect(raw.contains("ENCRYPTED_BYTES") && !raw.contains("7946") && raw.contains("Ada"), "\(raw)")
        let looked = try server.run(["records", "lookup", #"{"records": [{"recordName": "c1"}]}"#], environment: owner)
        #expect(try phone(looked)?["value"] as? String == "+44 20 7946 0000", "\(looked.stdout)")

        let equals = { (field: String, value: String) in
            #"{"query": {"recordType": "Contact", "filterBy": [{"comparator": "EQUALS", "fieldName": ""#
                + field + #"", "fieldValue": {"value": ""# + value + #""}}]}}"#
        }
        let refused = try server.run(["records", "query", equals("phone", "x")], environment: owner)
        #expect(refused.status == 6 && refused.stderr.contains("sealed on the device"), "\(refused.stderr)")
        let found = try server.run(["records", "query", equals("name", "Ada")], environment: owner)
        #expect(try phone(found)?["value"] as? String == "+44 20 7946 0000", "\(found.stderr)")

        // A plain container: refused on the device, nothing saved; marked but unsealed on the wire: refused.
        let plain = try server.run("records", "modify", contact, "--container", "notes")
        #expect(plain.status != 0 && plain.stderr.contains("not end-to-end encrypted"), "\(plain.stderr)")
        let none = try server.run("records", "lookup", #"{"records": [{"recordName": "c1"}]}"#, "--container", "notes")
        #expect(none.stdout.contains("NOT_FOUND"), "\(none.stdout)")
        let unsealed = try shell(
            "curl -s -X POST -H 'Authorization: Bearer \(server.token)' -H 'Content-Type: application/json' "
                + "-d '\(contact.replacingOccurrences(of: "\n", with: " "))' http://127.0.0.1:\(server.port)/v1/containers/notes/records/modify"
        ).output
        #expect(unsealed.contains("not sealed") && !unsealed.contains("recordChangeTag"), "\(unsealed)")
    }

    /// `--webhooks off`: the server runs (no deliverer among its services) and refuses a
    /// subscription that asks for a webhook; the default refuses one to loopback.
    @Test func webhooksOffServesAndRefusesWebhooks() async throws {
        try await Self.offThePool { try Self.webhooksOff() }
    }

    static func webhooksOff() throws {
        let hook = """
            {"operations": [{"operationType": "create", "subscription": {"subscriptionID": "h", "subscriptionType": "zone",
              "webhook": {"url": "http://127.0.0.1:9/hook"}}}]}
            """
        let off = try ServerProcess(serveArguments: ["--webhooks", "off"])
        let refused = try off.run("records", "subscribe", hook, "--container", "notes")
        #expect(refused.status != 0 && refused.stderr.contains("delivers no webhooks"), "\(refused.stderr)")
        #expect(try off.run("records", "zones", "--container", "notes").status == 0, "the server is still up")
        let standard = try ServerProcess()
        let loopback = try standard.run("records", "subscribe", hook, "--container", "notes")
        #expect(loopback.status != 0 && loopback.stderr.contains("not a public address"), "\(loopback.stderr)")
    }
}
