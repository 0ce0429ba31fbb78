import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import Synchronization
import XferCore

/// A transaction on PostgreSQL: one connection of the pool, inside `withTransaction`.
///
/// The metadata rules are synchronous (SQLite runs them on GRDB's writer), so a PostgreSQL
/// transaction runs them on a thread of ``threads``, and each statement blocks that thread
/// (never the cooperative pool, never an event loop) until postgres-nio answers.
struct PostgresSession: SQLSession {
    let connection: PostgresConnection
    let logger: Logger

    var dialect: SQLDialect { .postgres }

    /// The threads PostgreSQL transactions run on: as many as the pool has connections, so a
    /// transaction holding a connection always has a thread.
    static let threads: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: PostgresMetadataStore.maximumConnections)
        pool.start()
        return pool
    }()

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
        let connection = connection
        let logger = logger
        return try Self.blocking {
            var rows: [SQLRow] = []
            var names: [String]? = nil
            for try await row in try await connection.query(query, logger: logger) {
                var values: [SQLValue] = []
                for cell in row { values.append(try Self.value(cell)) }
                // One array of names for every row of the result (rows share it).
                if names == nil { names = row.map(\.columnName) }
                rows.append(SQLRow(names: names ?? [], values: values))
            }
            return rows
        }
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

    /// Runs `operation` on the cooperative pool and waits for it on this (pool) thread.
    static func blocking<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                let value = try await operation()
                result.withLock { $0 = .success(value) }
            } catch {
                result.withLock { $0 = .failure(error) }
            }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0! }.get()
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
