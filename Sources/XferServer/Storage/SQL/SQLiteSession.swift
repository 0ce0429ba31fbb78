import Foundation
import GRDB
import XferCore

/// A transaction on SQLite: GRDB's connection, inside the `read` or `write` it runs on.
struct SQLiteSession: SQLSession {
    let db: Database

    var dialect: SQLDialect { .sqlite }

    func rows(_ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        // A statement of a few values is prepared once per connection; a long `IN` list or
        // multi-row `VALUES` has as many texts as batch lengths, and caching each would keep
        // hundreds of large prepared statements alive (tens of MB, each parsed once anyway).
        let statement = values.count <= 16 ? try db.cachedStatement(sql: sql) : try db.makeStatement(sql: sql)
        let arguments = StatementArguments(values.map(Self.databaseValue))
        // One array of names for every row of the result (rows share it).
        let names = statement.columnNames
        var result: [SQLRow] = []
        let cursor = try Row.fetchCursor(statement, arguments: arguments)
        while let row = try cursor.next() {
            var values: [SQLValue] = []
            values.reserveCapacity(names.count)
            for value in row.databaseValues { values.append(try Self.value(value)) }
            result.append(SQLRow(names: names, values: values))
        }
        return result
    }

    func lockDeletions(exclusive: Bool) throws {}

    func lockIndexKey(exclusive: Bool) throws {}

    func notifyChanges(container: Int64) throws {}

    static func databaseValue(_ value: SQLValue) -> DatabaseValue {
        switch value {
        case .null: return .null
        case .int(let int): return int.databaseValue
        case .text(let text): return text.databaseValue
        case .blob(let bytes): return Data(bytes).databaseValue
        case .bool(let bool): return (bool ? 1 : 0 as Int64).databaseValue
        case .chunkID(let id): return Data(id.bytes).databaseValue  // as it is (ChunkIDSession binds ids)
        }
    }

    static func value(_ value: DatabaseValue) throws -> SQLValue {
        switch value.storage {
        case .null: return .null
        case .int64(let int): return .int(int)
        case .double(let double):
            throw XferError(.internal, "the metadata store holds a real number (\(double)), which no column has")
        case .string(let text): return .text(text)
        case .blob(let data): return .blob(Array(data))
        }
    }

    /// Registers the functions the shared statements call (``SQLDialect/sqlite``).
    static func prepare(_ db: Database) {
        db.add(
            function: DatabaseFunction("xfer_clock_ns", argumentCount: 0, pure: false) { _ in
                Int64(Date().timeIntervalSince1970 * 1e9)
            })
    }
}
