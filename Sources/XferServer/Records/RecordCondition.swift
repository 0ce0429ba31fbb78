import Foundation
import XferCore

/// One condition of a records/query on a record `r`: a test of its own columns, or that it has
/// (or has not) a row of an index table passing a test. The ways a membership becomes SQL are
/// written here, once for every filter; which way a query takes is ``RecordQueryPlan``'s choice.
enum RecordCondition {
    /// The index tables a filter looks in, with the alias their tests use.
    enum IndexTable: String {
        case values = "record_values v"
        case locations = "record_locations l"

        var alias: String { self == .values ? "v" : "l" }
    }

    /// The zone and record type a query reads: every index row of a record carries them.
    struct Scope {
        let zone: Int64
        let type: String
    }

    case plain(String, [SQLValue])
    /// `test` holds of an index row of the record (`negated`: of none). The test names its
    /// table's alias; it leaves out zone and type, which a record's rows share (``Scope``).
    case has(IndexTable, test: String, values: [SQLValue], negated: Bool)

    /// A membership that is not negated: one a query's page can be found from.
    var isFindable: Bool {
        if case .has(_, _, _, negated: false) = self { return true }
        return false
    }

    /// The ids of the records with a row passing the test, from the table's index that leads
    /// with zone and type (it holds `record_id`, so the table itself is not read).
    func matches(in scope: Scope) -> (String, [SQLValue])? {
        guard case .has(let table, let test, let values, _) = self else { return nil }
        let alias = table.alias
        return (
            "SELECT \(alias).record_id FROM \(table.rawValue) WHERE \(alias).zone_id = ? AND \(alias).type = ? AND \(test)",
            [.int(scope.zone), .text(scope.type)] + values
        )
    }

    /// At most `cap` of the matches, counted: how broad a filter is, for the plan.
    func count(in scope: Scope, cap: Int) -> (String, [SQLValue])? {
        guard let (matches, values) = matches(in: scope) else { return nil }
        return ("(SELECT COUNT(*) FROM (\(matches) LIMIT \(cap)) counted)", values)
    }

    /// As SQL on the record `r` at hand, by the index on `record_id`: one probe per record.
    /// Written `IS TRUE`, so neither backend turns it into a join that reads every match.
    func perRecord() -> (String, [SQLValue]) {
        switch self {
        case .plain(let sql, let values): return (sql, values)
        case .has(let table, let test, let values, let negated):
            let probe = "EXISTS (SELECT 1 FROM \(table.rawValue) WHERE \(table.alias).record_id = r.id AND \(test))"
            return ("(\(negated ? "NOT " : "")\(probe)) IS TRUE", values)
        }
    }

    /// `r` among the records that the memberships `found` find together (their matches
    /// intersected): the planner walks these ids and fetches those records.
    static func among(_ found: [RecordCondition], in scope: Scope) -> (String, [SQLValue]) {
        let sets = found.compactMap { $0.matches(in: scope) }
        return ("r.id IN (\(sets.map(\.0).joined(separator: " INTERSECT ")))", sets.flatMap(\.1))
    }
}
