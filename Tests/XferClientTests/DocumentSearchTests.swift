import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// Search and live queries through the library, on a real server with small pages (in the
/// end-to-end pass the same answers come from a device that opens every name itself).
@Suite struct DocumentSearchTests {
    static func smallPages() -> ServerLimits {
        var limits = ServerLimits()
        limits.listPage = 2
        return limits
    }

    @Test func findSelectsByNameKindScopeAndSizeInTheAskedOrder() async throws {
        try await LiveServer.run(limits: Self.smallPages()) { server in
            let source = server.root + "/source"
            try Files.write(source + "/a.pdf", Array(repeating: 1, count: 10))
            try Files.write(source + "/B.PDF", Array(repeating: 2, count: 3000))
            try Files.write(source + "/notes.txt", Array("notes".utf8))
            try Files.write(source + "/Album.pkg/cover.pdf", Array("cover".utf8))
            try Files.write(source + "/Album.pkg/track.txt", Array("track".utf8))
            for (file, name) in [
                ("a.pdf", "Documents/a.pdf"), ("B.PDF", "Documents/B.PDF"), ("notes.txt", "Documents/notes.txt"),
                ("Album.pkg", "Documents/Album.pkg"), ("a.pdf", "Data/x.pdf")
            ] {
                _ = try await server.push(source + "/" + file, name)
            }
            let client = server.client()
            func paths(_ query: DocumentQuery, limit: Int? = nil) async throws -> [String] {
                try await client.find(query, limit: limit).documents.map(\.path.value)
            }
            #expect(
                try await paths(DocumentQuery(name: "*.pdf")) == ["Data/x.pdf", "Documents/B.PDF", "Documents/a.pdf"])
            #expect(
                try await paths(DocumentQuery(name: "*.PDF", scope: .documents, sort: .size, descending: true))
                    == ["Documents/B.PDF", "Documents/a.pdf"])
            #expect(try await paths(DocumentQuery(kinds: [.package])) == ["Documents/Album.pkg"])
            #expect(
                try await paths(DocumentQuery(name: "a*", sort: .name)) == ["Documents/a.pdf", "Documents/Album.pkg"])
            // A package is one document: the files inside it are not found on their own.
            #expect(try await paths(DocumentQuery(name: "cover*")).isEmpty)
            let first = try await client.find(DocumentQuery(sort: .path), limit: 3)
            #expect(first.documents.count == 3 && first.more)
            #expect(try await paths(DocumentQuery(), limit: 100).count == 5)
            // Deleted documents are found only when asked for.
            _ = try await client.delete("Documents/notes.txt")
            #expect(try await paths(DocumentQuery(name: "notes*")).isEmpty)
            #expect(try await paths(DocumentQuery(name: "notes*", state: .deleted)) == ["Documents/notes.txt"])
            // A query no server answers is refused here, before anything is sent.
            await #expect(throws: XferError.self) { _ = try await client.find(DocumentQuery(name: "a/b")) }
            await #expect(throws: XferError.self) {
                _ = try await client.find(DocumentQuery(minimumSize: 10, maximumSize: 1))
            }
        }
    }

    // A guard against a hang, not a timing: with every test of a pass running at once on two
    // loaded cores, a test that takes 2 s alone has taken over 2 minutes (CI, 2026-11-27).
    @Test(.timeLimit(.minutes(10)))
    func aLiveQueryHandsOutWhatEntersLeavesAndChanges() async throws {
        try await LiveServer.run(limits: Self.smallPages()) { server in
            let source = server.root + "/source"
            for name in ["one.pdf", "two.pdf", "skip.txt"] { try Files.write(source + "/" + name, Array(name.utf8)) }
            for name in ["one.pdf", "two.pdf", "skip.txt"] {
                _ = try await server.push(source + "/" + name, "Documents/" + name)
            }
            var updates = server.client().watch(DocumentQuery(name: "*.pdf", scope: .documents), wait: 5)
                .makeAsyncIterator()
            let first = try #require(try await updates.next())
            #expect(first.initial && first.documents.map(\.path.value) == ["Documents/one.pdf", "Documents/two.pdf"])
            #expect(first.added.count == 2 && first.removed.isEmpty)

            // Reads updates until `done` holds for the latest; what they added, removed and changed, together.
            func until(_ done: (QueryUpdate) -> Bool) async throws -> (
                last: QueryUpdate, added: [String], removed: [String], changed: [String]
            ) {
                var added: [String] = []
                var removed: [String] = []
                var changed: [String] = []
                while true {
                    let update = try #require(try await updates.next())
                    #expect(!update.initial)
                    added += update.added.map(\.path.value)
                    removed += update.removed.map(\.path.value)
                    changed += update.changed.map(\.path.value)
                    if done(update) { return (update, added, removed, changed) }
                }
            }

            // Another device: a change outside the result moves nothing; the next one inside does
            // (a new document enters as soon as it is announced, uploading, and changes as it commits).
            let other = server.client(server.otherDevice("other"), device: "other")
            try Files.write(source + "/more.txt", Array("more".utf8))
            _ = try await other.push(source + "/more.txt", as: "Documents/more.txt")
            try Files.write(source + "/three.PDF", Array("three".utf8))
            _ = try await other.push(source + "/three.PDF", as: "Documents/three.PDF")
            let added = try await until {
                $0.documents.first { $0.path.value == "Documents/three.PDF" }?.state == .current
            }
            #expect(
                added.added == ["Documents/three.PDF"] && added.removed.isEmpty
                    && Set(added.changed).isSubset(of: ["Documents/three.PDF"]))
            #expect(
                added.last.documents.map(\.path.value) == [
                    "Documents/one.pdf", "Documents/three.PDF", "Documents/two.pdf"
                ])

            // An edit (from the device that pushed it) changes a document in place; an edit from
            // a device that never had it is a conflict, which changes it too; a deletion takes one out.
            try Files.write(source + "/one.pdf", Array("one, edited".utf8))
            _ = try await server.push(source + "/one.pdf", "Documents/one.pdf")
            let changed = try await until { $0.documents.first?.version == 2 }
            #expect(Set(changed.changed) == ["Documents/one.pdf"] && changed.added.isEmpty && changed.removed.isEmpty)
            try Files.write(source + "/two.pdf", Array("two, elsewhere".utf8))
            _ = try await other.push(source + "/two.pdf", as: "Documents/two.pdf")
            let conflicted = try await until { $0.documents.last?.conflicts?.count == 1 }
            #expect(
                Set(conflicted.changed) == ["Documents/two.pdf"] && conflicted.added.isEmpty
                    && conflicted.removed.isEmpty)
            _ = try await server.client().delete("Documents/two.pdf")
            let removed = try await until { $0.documents.count == 2 }
            #expect(removed.removed == ["Documents/two.pdf"] && removed.added.isEmpty)
            #expect(removed.last.documents.map(\.path.value) == ["Documents/one.pdf", "Documents/three.PDF"])
            #expect(removed.last.cursor > first.cursor)
        }
    }
}
