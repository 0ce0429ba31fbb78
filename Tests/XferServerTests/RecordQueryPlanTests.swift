import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// How a records/query is asked, decided from its filters' counts alone (no database), and the
/// SQL of each way. RecordStoreTests checks that every way gives the same answers on both
/// backends.
@Suite struct RecordQueryPlanTests {
    static let cap = RecordQueryPlan.cap

    @Test func aQueryWithoutFiltersThatFindWalksItsRecords() {
        #expect(RecordQueryPlan.ways(counts: [], byName: true) == [.walk(within: nil)])
        #expect(RecordQueryPlan.ways(counts: [], byName: false) == [.walk(within: nil)])
    }

    @Test func theNarrowestFilterFindsTheRecordsWhenItMatchesFew() {
        let counts = [(place: 0, matches: Self.cap), (place: 2, matches: 40), (place: 3, matches: 900)]
        #expect(RecordQueryPlan.ways(counts: counts, byName: true) == [.drive(2)])
        #expect(RecordQueryPlan.ways(counts: counts, byName: false) == [.drive(2)])
    }

    @Test func broadFiltersInNameOrderWalkFirst() {
        #expect(
            RecordQueryPlan.ways(counts: [(place: 1, matches: Self.cap)], byName: true)
                == [.walk(within: RecordQueryPlan.walkLimit), .drive(1)])
        #expect(
            RecordQueryPlan.ways(counts: [(place: 0, matches: Self.cap), (place: 1, matches: Self.cap)], byName: true)
                == [.walk(within: RecordQueryPlan.walkLimit), .intersect([0, 1])])
        // Sorted by a field: every match is read anyway, so no walk.
        #expect(RecordQueryPlan.ways(counts: [(place: 1, matches: Self.cap)], byName: false) == [.drive(1)])
        #expect(
            RecordQueryPlan.ways(counts: [(place: 0, matches: Self.cap), (place: 1, matches: Self.cap)], byName: false)
                == [.intersect([0, 1])])
    }

    @Test func countsAreTakenOnlyWhereTheyChooseTheWay() {
        #expect(!RecordQueryPlan.needsCounts(findable: 0, byName: true))
        #expect(!RecordQueryPlan.needsCounts(findable: 1, byName: false), "one filter, sorted: its matches are read")
        #expect(RecordQueryPlan.needsCounts(findable: 1, byName: true), "walk or find")
        #expect(RecordQueryPlan.needsCounts(findable: 2, byName: false), "which filter finds")
    }

    static func query(_ filters: [RecordFilter], sort: [RecordSort]? = nil) throws -> RecordQuerySQL {
        try RecordQuerySQL(
            RecordQuery(recordType: "Note", filterBy: filters, sortBy: sort), zone: 7, offset: 0, limit: 100,
            dialect: .sqlite)
    }

    static let filters = [
        RecordFilter("stars", .equals, RecordField(value: .int(5))),
        RecordFilter("tags", .notListContains, RecordField(value: .string("odd"))),
        RecordFilter("title", .beginsWith, RecordField(value: .string("Trip")))
    ]

    @Test func eachWayIsItsOwnStatement() throws {
        let query = try Self.query(Self.filters)
        #expect(query.findable == [0, 2] && query.byName)
        let counting = try #require(query.counting(cap: 50))
        #expect(counting.sql.components(separatedBy: "LIMIT 50").count == 3, "\(counting.sql)")
        #expect(counting.values.first == .int(7), "a count reads the zone's index rows")

        let driven = query.statement(.drive(2)).sql
        #expect(driven.components(separatedBy: "r.id IN (SELECT v.record_id").count == 2, "\(driven)")
        #expect(driven.components(separatedBy: "EXISTS").count == 3, "the others are tested per record")
        #expect(driven.contains("NOT EXISTS"))

        let walked = query.statement(.walk(within: 50), through: "n42")
        #expect(!walked.sql.contains(" IN (") && walked.sql.contains("r.name <= ?"), "\(walked.sql)")
        #expect(walked.values.contains(.text("n42")))
        #expect(
            query.walkEnd(within: 50).sql.hasSuffix("LIMIT 1 OFFSET 49"), "the name of the 50th record ends the walk")

        let intersected = query.statement(.intersect([0, 2])).sql
        #expect(intersected.contains(" INTERSECT ") && intersected.contains("NOT EXISTS"), "\(intersected)")
        #expect(intersected.contains("FROM records r NOT INDEXED"), "found by ids, fetched by id")
        #expect(query.statement(.intersect([0])).sql.components(separatedBy: "EXISTS").count == 3)
    }

    @Test func aPerRecordTestLeavesOutTheZoneItsRecordAlreadyHas() throws {
        let (sql, values) = try Self.query(Self.filters).filters[0].perRecord()
        #expect(sql.hasPrefix("(EXISTS (SELECT 1 FROM record_values v WHERE v.record_id = r.id AND v.field = ?"))
        #expect(sql.hasSuffix(") IS TRUE") && !sql.contains("zone_id"), "\(sql)")
        #expect(values.first == .text("stars"))
    }

    @Test func atMostEightFiltersAreCountedAndFindRecords() throws {
        let words = (0..<12).map { "w\($0)" }.joined(separator: " ")
        let query = try Self.query([RecordFilter("title", .containsAllTokens, RecordField(value: .string(words)))])
        #expect(query.filters.count == 12 && query.findable == Array(0..<8))
        let counting = try #require(query.counting(cap: 10))
        #expect(counting.sql.components(separatedBy: "COUNT(*)").count == 9)
    }

    @Test func ownColumnsAndNegationsFindNothing() throws {
        let query = try Self.query([
            RecordFilter("___recordID", .equals, RecordField(value: .string("n1"))),
            RecordFilter("stars", .notEquals, RecordField(value: .int(1)))
        ])
        #expect(query.findable.isEmpty && query.counting(cap: 10) == nil)
    }
}
