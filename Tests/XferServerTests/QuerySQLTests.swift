import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// The SQL a search runs, decided from the query alone (no database): which table leads, what
/// narrows the rows, and where each page starts. QueryStoreTests checks the answers on every
/// backend.
@Suite struct QuerySQLTests {
    @Test func anOrderByTimeOrSizeOrTheDeletedWalkVersions() {
        for query in [
            DocumentQuery(sort: .modified), DocumentQuery(sort: .size, descending: true),
            DocumentQuery(state: .deleted)
        ] {
            let plan = QuerySQL(container: 7, query, dialect: .sqlite)
            #expect(plan.source.hasPrefix("versions v JOIN documents d"))
            #expect(plan.conditions.first == "v.container_id = ?")
            #expect(plan.values.first == .int(7))
        }
        let byPath = QuerySQL(container: 7, DocumentQuery(), dialect: .sqlite)
        #expect(byPath.source.hasPrefix("documents d JOIN versions v"))
        #expect(byPath.conditions == ["d.container_id = ?", "v.state != 'deleted'"])
        #expect(byPath.key == nil && byPath.order == "d.path")
    }

    @Test func aNamePatternInPathOrderWalksTheIndexThatHoldsBoth() {
        let sqlite = QuerySQL(container: 1, DocumentQuery(name: "*.pdf"), dialect: .sqlite)
        #expect(sqlite.source.hasPrefix("documents d INDEXED BY documents_by_path_name JOIN"))
        #expect(sqlite.conditions.last == "d.name_folded LIKE ? ESCAPE '\\'")
        #expect(sqlite.values.last == .text("%.pdf"))
        let postgres = QuerySQL(container: 1, DocumentQuery(name: "*.pdf"), dialect: .postgres)
        #expect(postgres.source.hasPrefix("documents d JOIN"), "PostgreSQL's planner chooses")
        let byName = QuerySQL(container: 1, DocumentQuery(name: "*.pdf", sort: .name), dialect: .sqlite)
        #expect(!byName.source.contains("INDEXED BY"))
    }

    @Test func eachBoundIsAConditionWithItsValueInOrder() {
        let query = DocumentQuery(
            kinds: [.package, .file], prefix: "Documents/a", modifiedAfter: 10, modifiedBefore: 20, minimumSize: 1,
            maximumSize: 2, state: .conflict)
        let plan = QuerySQL(container: 3, query, dialect: .postgres)
        #expect(plan.values.count == plan.conditions.joined().filter { $0 == "?" }.count)
        #expect(plan.values.first == .int(3))
        #expect(plan.values[1] == .int(3), "the conflicted are looked up in the same container")
        #expect(Array(plan.values[2...3]) == [.text("file"), .text("package")], "kinds in a stable order")
        #expect(plan.conditions.contains(#"d.path COLLATE "C" >= ?"#))
        #expect(plan.conditions.contains(#"d.path COLLATE "C" < ?"#))
        #expect(plan.values.contains(.text("Documents/b")), "the prefix's successor ends its range")
        #expect(Array(plan.values.suffix(4)) == [.int(10), .int(20), .int(1), .int(2)])
    }

    @Test func aPageStartsAfterThePositionInTheQuerysOrder() {
        let bySize = QuerySQL(container: 1, DocumentQuery(sort: .size, descending: true), dialect: .sqlite)
        #expect(bySize.order == "v.size DESC, d.path DESC")
        let first = bySize.page(after: nil, batch: 11, columns: "x")
        #expect(first.sql.contains("ORDER BY v.size DESC, d.path DESC LIMIT ?"))
        #expect(first.values == bySize.values + [.int(11)])
        let position = QueryPosition(sort: .size, descending: true, key: "500", path: "Documents/m")
        let next = bySize.page(after: position, batch: 11, columns: "x")
        #expect(next.sql.contains("v.size <= ? AND (v.size < ? OR d.path < ?)"))
        #expect(next.values == bySize.values + [.int(500), .int(500), .text("Documents/m"), .int(11)])
        let byName = QuerySQL(container: 1, DocumentQuery(sort: .name), dialect: .sqlite)
        let named = byName.page(
            after: QueryPosition(sort: .name, descending: false, key: "été", path: "Documents/Été"), batch: 2,
            columns: "x")
        #expect(named.values.suffix(4) == [.text("été"), .text("été"), .text("Documents/Été"), .int(2)])
        let byPath = QuerySQL(container: 1, DocumentQuery(), dialect: .sqlite)
        let paged = byPath.page(
            after: QueryPosition(sort: .path, descending: false, key: "", path: "Documents/a"), batch: 5, columns: "x")
        #expect(paged.sql.contains("AND d.path > ?"))
    }
}
