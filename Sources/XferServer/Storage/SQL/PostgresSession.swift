import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import XferCore

/// A transaction on PostgreSQL: one connection of the pool, inside `withTransaction`.
///
/// The metadata rules are synchronous (SQLite runs them on GRDB's writer), so a PostgreSQL
/// transaction runs them on a thread of the process's blocking pool (`NIOThreadPool.singleton`),
/// and each statement is a synchronous call there, as a SQLite statement is: postgres-nio sends
/// it and reads the answer on the connection's event loop, and the pool thread waits for that
/// future. No task of the cooperative pool is started or waited for, so a busy cooperative pool
/// cannot hold up a statement.
struct PostgresSession: SQLSession {
    let connection: PostgresConnection
    let logger: Logger

    var dialect: SQLDialect { .postgres }

    @discardableResult
    func rows(_ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values {
            switch value {
            case .null: bindings.appendNull()
            case .int(let int): bindings.append(int)
            case .text(let text): bindings.append(text)
            case .blob(let bytes): bindings.append(ByteBuffer(bytes: bytes))
            case .bool(let bool): bindings.append(bool)
            case .chunkID(let id): bindings.append(ByteBuffer(bytes: id.bytes))  // as it is (ChunkIDSession binds ids)
            }
        }
        let query = PostgresQuery(unsafeSQL: Self.numbered(sql), binds: bindings)
        let result = try connection.query(query, logger: logger).wait()
        // One array of names for every row of the result (rows share it).
        let names = result.rows.first.map { $0.map(\.columnName) } ?? []
        var rows: [SQLRow] = []
        rows.reserveCapacity(result.rows.count)
        for row in result.rows {
            var values: [SQLValue] = []
            values.reserveCapacity(names.count)
            for cell in row { values.append(try Self.value(cell)) }
            rows.append(SQLRow(names: names, values: values))
        }
        return rows
    }

    static let deletionLock: Int64 = 7304

    func lockDeletions(exclusive: Bool) throws {
        try rows(
            exclusive ? "SELECT pg_advisory_xact_lock(?)" : "SELECT pg_advisory_xact_lock_shared(?)",
            [.int(Self.deletionLock)])
    }

    static let indexKeyLock: Int64 = 7305

    func lockIndexKey(exclusive: Bool) throws {
        try rows(
            exclusive ? "SELECT pg_advisory_xact_lock(?)" : "SELECT pg_advisory_xact_lock_shared(?)",
            [.int(Self.indexKeyLock)])
    }

    func notifyChanges(container: Int64) throws {
        try rows("SELECT pg_notify('xfer_changes', ?)", [.text(String(container))])
    }

    /// `?` placeholders as PostgreSQL's `$1`, `$2`, …, outside quoted text and names.
    static func numbered(_ sql: String) -> String {
        var result = ""
        result.reserveCapacity(sql.utf8.count + 16)
        var number = 0
        var quote: Character? = nil
        for character in sql {
            if let open = quote {
                if character == open { quote = nil }
                result.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                result.append(character)
            } else if character == "?" {
                number += 1
                result += "$\(number)"
            } else {
                result.append(character)
            }
        }
        return result
    }

    static func value(_ cell: PostgresCell) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .void: return .null
        case .int8: return .int(try cell.decode(Int64.self))
        case .int4: return .int(Int64(try cell.decode(Int32.self)))
        case .int2: return .int(Int64(try cell.decode(Int16.self)))
        case .bool: return .bool(try cell.decode(Bool.self))
        case .text, .varchar, .name, .bpchar: return .text(try cell.decode(String.self))
        case .bytea:
            var buffer = try cell.decode(ByteBuffer.self)
            return .blob(buffer.readBytes(length: buffer.readableBytes) ?? [])
        default:
            throw XferError(
                .internal,
                "the metadata query returned column \(cell.columnName) of PostgreSQL type \(cell.dataType), which xfer does not read"
            )
        }
    }
}
