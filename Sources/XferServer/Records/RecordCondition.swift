import Foundation
import XferCore

/// One condition of a records/query on a record `r`: a test of its own columns, or that it has
/// (or has not) a row of an index table passing a test. How such a membership becomes SQL is
/// decided here, once for every filter (``render(_:dialect:oneRecord:)``).
enum RecordCondition {
    /// The index tables a filter looks in, with the alias their tests use.
    enum IndexTable: String {
        case values = "record_values v"
        case locations = "record_locations l"

        var alias: String { self == .values ? "v" : "l" }
    }

    case plain(String, [SQLValue])
    case has(IndexTable, test: String, values: [SQLValue], negated: Bool)

    /// As SQL. A `driving` membership is `r.id IN (…)`: the planner walks the index for the ids
    /// and fetches those records. Any other is `EXISTS (…)` per record the driver found, by the
    /// index on `record_id`: cheap for few records, where `IN` would read every match of a broad
    /// filter only to intersect it.
    func sql(driving: Bool) -> (String, [SQLValue]) {
        switch self {
        case .plain(let sql, let values): return (sql, values)
        case .has(let table, let test, let values, let negated):
            if driving {
                return (
                    "r.id \(negated ? "NOT IN" : "IN") (SELECT \(table.alias).record_id FROM \(table.rawValue) WHERE \(test))",
                    values
                )
            }
            return (
                "\(negated ? "NOT " : "")EXISTS (SELECT 1 FROM \(table.rawValue) WHERE \(table.alias).record_id = r.id AND \(test))",
                values
            )
        }
    }

    /// The conditions of one query as SQL, in order. PostgreSQL's planner weighs `IN` against
    /// its statistics and joins by itself, so there every membership is `IN`. SQLite reads
    /// every `IN` list whole, so there the first membership that is not negated drives and the
    /// rest are `EXISTS` (put the most selective filter first). A test of one record (a query
    /// subscription) drives by its id, so none drives there.
    static func render(_ conditions: [RecordCondition], dialect: SQLDialect, oneRecord: Bool) -> [(String, [SQLValue])]
    {
        let driver: Int?
        if oneRecord {
            driver = nil
        } else if dialect.weighsMemberships {
            return conditions.map { $0.sql(driving: true) }
        } else {
            driver = conditions.firstIndex {
                if case .has(_, _, _, negated: false) = $0 { return true }
                return false
            }
        }
        return conditions.enumerated().map { index, condition in condition.sql(driving: index == driver) }
    }
}
