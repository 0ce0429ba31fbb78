import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Search on every backend (MetadataStoreTests' stores): SQL narrows and DocumentQuery decides,
/// so each answer, read page by page, must be exactly what DocumentQuery's own rule gives when
/// applied to every document and sorted by its own order.
@Suite struct QueryStoreTests {
    static let container = try! ContainerName("c")

    /// Documents of several names, sizes and times; one deleted, one with a conflict.
    static func fill(_ store: any MetadataStore, _ account: Int64) async throws -> [DocumentInfo] {
        let names = [
            "Documents/Report.PDF", "Documents/report-2025.pdf", "Documents/notes/a_b.txt", "Documents/notes/a%b.txt",
            "Documents/notes/axb.txt", "Documents/Été.txt", "Documents/éTÉ2.TXT", "Documents/[x].md",
            "Documents/\u{600}%.txt", "Data/cache.db",
            "Data/REPORT.pdf.bak", "Documents/zz"
        ]
        for (index, name) in names.enumerated() {
            let chunk = MetadataStoreTests.chunk(UInt8(index + 1), length: 1000 * (index % 4 + 1))
            _ = try await store.addChunks(account: account, [chunk])
            _ = try await MetadataStoreTests.put(
                store, account, name, [chunk], base: nil, mtime: Int64(index % 3) * 1_000 + 5)
        }
        let (x, y, z) = (MetadataStoreTests.chunk(101), MetadataStoreTests.chunk(102), MetadataStoreTests.chunk(103))
        _ = try await store.addChunks(account: account, [x, y, z])
        let gone = try await MetadataStoreTests.put(store, account, "Documents/gone.pdf", [x], base: nil)
        _ = try await store.delete(
            account: account, container: container, path: try DocumentPath("Documents/gone.pdf"),
            baseVersion: gone.version)
        let first = try await store.document(
            account: account, container: container, path: try DocumentPath("Documents/zz"), version: nil)
        _ = try await MetadataStoreTests.put(store, account, "Documents/zz", [y], base: first.version, mtime: 100_000)
        _ = try await MetadataStoreTests.put(store, account, "Documents/zz", [z], base: first.version, mtime: 1)
        // Every document's newest state, deleted ones included: what the rule is applied to.
        var all: [DocumentInfo] = []
        for name in names + ["Documents/gone.pdf"] {
            all.append(
                try await store.document(
                    account: account, container: container, path: try DocumentPath(name), version: nil))
        }
        return all
    }

    /// Every page of `query`, `limit` at a time.
    static func read(_ store: any MetadataStore, _ account: Int64, _ query: DocumentQuery, limit: Int) async throws
        -> [String]
    {
        var seen: [String] = []
        var page: String? = nil
        var pages = 0
        repeat {
            let list = try await store.query(account: account, container: container, query, after: page, limit: limit)
            #expect(list.documents.count <= limit)
            seen += list.documents.map(\.path.value)
            #expect(list.more == (list.next != nil))
            page = list.next
            pages += 1
        } while page != nil && pages < 100
        return seen
    }

    static let queries: [DocumentQuery] = [
        DocumentQuery(),
        DocumentQuery(name: "*.pdf"),
        DocumentQuery(name: "REPORT*"),
        DocumentQuery(name: "a_b.txt"),
        DocumentQuery(name: "a%b.txt"),
        DocumentQuery(name: "a?b.txt"),
        DocumentQuery(name: "a[_x]b.txt"),
        DocumentQuery(name: "été*"),
        DocumentQuery(name: "\\[x\\].md"),
        DocumentQuery(name: "[!a-z]*"),
        DocumentQuery(name: "[unterminated"),
        DocumentQuery(name: "\u{600}%*"),
        DocumentQuery(name: "[[:x]:]*"),
        DocumentQuery(scope: .documents, prefix: "notes/"),
        DocumentQuery(scope: .data),
        DocumentQuery(modifiedAfter: 1_000, modifiedBefore: 2_000),
        DocumentQuery(minimumSize: 2_000, maximumSize: 3_000),
        DocumentQuery(state: .deleted),
        DocumentQuery(state: .conflict),
        DocumentQuery(name: "*.PDF", sort: .name),
        DocumentQuery(sort: .name, descending: true),
        DocumentQuery(sort: .modified),
        DocumentQuery(sort: .modified, descending: true),
        DocumentQuery(sort: .size),
        DocumentQuery(name: "*t*", sort: .size, descending: true),
        DocumentQuery(kinds: [.package]),
        DocumentQuery(kinds: [.file, .directory], sort: .path, descending: true),
        DocumentQuery(prefix: "Documents/notes/a"),
        DocumentQuery(prefix: "Documents/é", sort: .name),
        DocumentQuery(prefix: "Documents/", sort: .size, descending: true),
        DocumentQuery(state: .deleted, sort: .modified),
        DocumentQuery(state: .conflict, sort: .size, descending: true),
        DocumentQuery(name: "*", sort: .modified, descending: true),
        DocumentQuery(name: "*.txt", minimumSize: 2_000, sort: .size)
    ]

    @Test func aPrefixRangeEndsAtItsSuccessor() {
        #expect(MetadataTransaction.successor(of: "Documents/a/") == "Documents/a0")
        #expect(MetadataTransaction.successor(of: "a\u{10FFFF}") == "b")
        #expect(MetadataTransaction.successor(of: "\u{10FFFF}\u{10FFFF}") == nil)
        #expect(MetadataTransaction.successor(of: "x\u{D7FF}") == "x\u{E000}")
        #expect(MetadataTransaction.successor(of: "é") == "ê")
        #expect(MetadataTransaction.successor(of: "") == nil)
    }

    @Test(arguments: MetadataStoreTests.backends) func everyQueryPageByPageIsTheRuleAppliedToEveryDocument(
        _ kind: String
    ) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let all = try await Self.fill(store, account)
            for query in Self.queries {
                let expected = all.filter(query.matches).sorted(by: query.precedes).map(\.path.value)
                for limit in [1, 2, 100] {
                    let got = try await Self.read(store, account, query, limit: limit)
                    #expect(got == expected, "\(query.parameters) limit \(limit)")
                }
            }
            // Spot checks that the rule itself says what it should.
            let pdfs = all.filter(DocumentQuery(name: "*.pdf").matches).map(\.path.value).sorted()
            #expect(pdfs == ["Documents/Report.PDF", "Documents/report-2025.pdf"])
            #expect(all.filter(DocumentQuery(name: "a_b.txt").matches).map(\.path.value) == ["Documents/notes/a_b.txt"])
            #expect(
                all.filter(DocumentQuery(name: "\u{600}%*").matches).map(\.path.value) == ["Documents/\u{600}%.txt"])
            #expect(all.filter(DocumentQuery(name: "ÉTÉ*").matches).count == 2)
            #expect(all.filter(DocumentQuery(state: .conflict).matches).map(\.path.value) == ["Documents/zz"])
            #expect(all.filter(DocumentQuery(state: .deleted).matches).map(\.path.value) == ["Documents/gone.pdf"])
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func aTokenIsReadOnlyInItsOwnOrder(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, account in
            _ = try await Self.fill(store, account)
            let first = try await store.query(
                account: account, container: Self.container, DocumentQuery(sort: .size), after: nil, limit: 2)
            let token = try #require(first.next)
            for other in [DocumentQuery(), DocumentQuery(sort: .size, descending: true), DocumentQuery(sort: .modified)]
            {
                await #expect(throws: XferError.self) {
                    _ = try await store.query(
                        account: account, container: Self.container, other, after: token, limit: 2)
                }
            }
            for garbage in [
                "", "!!!", String(repeating: "A", count: 20_000),
                QueryPosition(sort: .size, descending: false, key: "x", path: "p").token
            ] {
                let error = await #expect(throws: XferError.self) {
                    _ = try await store.query(
                        account: account, container: Self.container, DocumentQuery(sort: .size), after: garbage,
                        limit: 2)
                }
                #expect(error?.code == .badRequest)
            }
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func aStoreFromBeforeQueriesFoldsItsNamesWhenOpened(_ kind: String)
        async throws
    {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-fold-\(unique)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func open() async throws -> any MetadataStore {
            if kind == "postgres", let url = MetadataStoreTests.postgres {
                return try await PostgresMetadataStore(url: url, schema: "f_\(unique)")
            }
            return try SQLiteMetadataStore(path: directory + "/metadata.sqlite")
        }
        let store = try await open()
        let made = try await store.createAccount(
            name: try AccountName("alice"), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(unique)"))
        let account = try await MetadataStoreTests.accountID(store, made.name)
        _ = try await Self.fill(store, account)
        // As a release before queries left it: no folded names.
        try await (store as! any SQLMetadataStore).execute("UPDATE documents SET name_folded = NULL", [])
        #expect(
            try await store.query(
                account: account, container: Self.container, DocumentQuery(name: "*.pdf"), after: nil, limit: 10
            ).documents.isEmpty)
        (store as? PostgresMetadataStore)?.shutdown()
        let reopened = try await open()
        defer { (reopened as? PostgresMetadataStore)?.shutdown() }
        let found = try await reopened.query(
            account: account, container: Self.container, DocumentQuery(name: "*.pdf"), after: nil, limit: 10)
        #expect(found.documents.map(\.path.value) == ["Documents/Report.PDF", "Documents/report-2025.pdf"])
    }
}
