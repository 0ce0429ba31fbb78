import XferCore

/// A value bound to a statement or read from a row: the few types the metadata schema uses.
enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)
    case blob([UInt8])
    case bool(Bool)
    /// A chunk id, bound as the store keeps it (``ChunkIDSession``): a blob of its bytes, or
    /// of their encipherment when the store has an index key.
    case chunkID(ChunkID)
}

/// Values that bind as one ``SQLValue``.
protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension Int64: SQLBindable { var sqlValue: SQLValue { .int(self) } }
extension Int: SQLBindable { var sqlValue: SQLValue { .int(Int64(self)) } }
extension UInt32: SQLBindable { var sqlValue: SQLValue { .int(Int64(self)) } }
extension String: SQLBindable { var sqlValue: SQLValue { .text(self) } }
extension Bool: SQLBindable { var sqlValue: SQLValue { .bool(self) } }
extension Array: SQLBindable where Element == UInt8 { var sqlValue: SQLValue { .blob(self) } }
extension ChunkID: SQLBindable { var sqlValue: SQLValue { .chunkID(self) } }
extension Optional: SQLBindable where Wrapped: SQLBindable { var sqlValue: SQLValue { self?.sqlValue ?? .null } }

/// One row of a result, its columns by name or position. Every read names the Swift type it
/// expects; a stored value of another type (or NULL where one is required) is an error,
/// never a guess.
struct SQLRow: Sendable {
    let names: [String]
    let values: [SQLValue]
    /// How chunk ids are kept (set by ``ChunkIDSession``); `nil`: as they are.
    var ids: ChunkIDCipher.Contexts? = nil

    /// A chunk id column (``chunkID(_:)-…``): `nil` if it is not an id.
    func chunkID(_ column: String) throws -> ChunkID? { Self.chunkID(try blob(column), ids) }
    func chunkID(_ index: Int) throws -> ChunkID? { Self.chunkID(try blob(index), ids) }

    private static func chunkID(_ stored: [UInt8], _ ids: ChunkIDCipher.Contexts?) -> ChunkID? {
        if let ids { return ids.decipher(stored) }
        return ChunkID(bytes: stored)
    }

    func value(_ column: String) throws -> SQLValue {
        guard let index = names.firstIndex(of: column) else {
            throw XferError(.internal, "the metadata query returned no column \"\(column)\"")
        }
        return values[index]
    }

    func value(_ index: Int) throws -> SQLValue {
        guard values.indices.contains(index) else {
            throw XferError(.internal, "the metadata query returned no column \(index)")
        }
        return values[index]
    }

    func int(_ column: String) throws -> Int64 { try Self.required(Self.int(try value(column)), column) }
    func int(_ index: Int) throws -> Int64 { try Self.required(Self.int(try value(index)), "\(index)") }
    func optionalInt(_ column: String) throws -> Int64? { try Self.int(try value(column)) }
    func optionalInt(_ index: Int) throws -> Int64? { try Self.int(try value(index)) }
    func text(_ column: String) throws -> String { try Self.required(Self.text(try value(column)), column) }
    func text(_ index: Int) throws -> String { try Self.required(Self.text(try value(index)), "\(index)") }
    func optionalText(_ column: String) throws -> String? { try Self.text(try value(column)) }
    func blob(_ column: String) throws -> [UInt8] { try Self.required(Self.blob(try value(column)), column) }
    func blob(_ index: Int) throws -> [UInt8] { try Self.required(Self.blob(try value(index)), "\(index)") }
    func optionalBlob(_ column: String) throws -> [UInt8]? { try Self.blob(try value(column)) }
    func bool(_ column: String) throws -> Bool { try Self.required(Self.bool(try value(column)), column) }

    private static func required<T>(_ value: T?, _ column: String) throws -> T {
        guard let value else {
            throw XferError(.internal, "the metadata store holds NULL in column \(column), where a value is required")
        }
        return value
    }

    private static func int(_ value: SQLValue) throws -> Int64? {
        switch value {
        case .null: return nil
        case .int(let int): return int
        default: throw mismatch(value, "an integer")
        }
    }

    private static func text(_ value: SQLValue) throws -> String? {
        switch value {
        case .null: return nil
        case .text(let text): return text
        default: throw mismatch(value, "text")
        }
    }

    private static func blob(_ value: SQLValue) throws -> [UInt8]? {
        switch value {
        case .null: return nil
        case .blob(let bytes): return bytes
        default: throw mismatch(value, "bytes")
        }
    }

    /// A boolean: PostgreSQL's own type, or SQLite's 0 and 1.
    private static func bool(_ value: SQLValue) throws -> Bool? {
        switch value {
        case .null: return nil
        case .bool(let bool): return bool
        case .int(0): return false
        case .int(1): return true
        default: throw mismatch(value, "a boolean")
        }
    }

    private static func mismatch(_ value: SQLValue, _ expected: String) -> XferError {
        XferError(.internal, "the metadata store holds \(value) where \(expected) was expected")
    }
}

/// Where the two SQL dialects differ. Everything else (`ON CONFLICT`, `RETURNING`, row values,
/// savepoints, `IS DISTINCT FROM`) is one text for both; statements use `?` placeholders.
struct SQLDialect: Sendable {
    /// Appended to a `SELECT` that locks the rows it reads until the transaction ends. Empty
    /// on SQLite, whose one writer holds the whole database.
    var forUpdate: String
    /// Appended to a text column to compare and sort it byte by byte.
    var bytewise: String
    /// The comma-separated list of an integer expression over a group.
    var joinedIntegers: @Sendable (String) -> String
    /// The database's clock, in nanoseconds since 1970, as an expression.
    var clock: String
    /// Makes a query walk the named index: SQLite's `INDEXED BY`, where its planner, without
    /// statistics, takes the unique path index and reads every row to test a name; empty on
    /// PostgreSQL, whose planner weighs the indexes itself.
    var indexedBy: @Sendable (String) -> String
    /// After a table: its rows are fetched by id alone, no other index walked (SQLite's `NOT
    /// INDEXED`, which keeps rowid lookups; PostgreSQL's planner needs no such word).
    var byIDs: String
    /// Whether rows are locked one by one (a statement that writes many rows must then be
    /// preceded by a `SELECT … ORDER BY id FOR UPDATE`, so every transaction takes its locks in
    /// one order); `false` on SQLite, whose one writer holds the whole database.
    var locksRows: Bool
    /// Refreshes the planner's statistics where the database does not by itself: SQLite's
    /// ANALYZE, sampling at most 1,000 rows of each index so that it takes milliseconds;
    /// PostgreSQL's autovacuum analyzes on its own.
    var refreshStatistics: [String]

    static let sqlite = SQLDialect(
        forUpdate: "", bytewise: "",
        joinedIntegers: { "group_concat(\($0))" },
        clock: "xfer_clock_ns()", indexedBy: { " INDEXED BY \($0)" }, byIDs: " NOT INDEXED", locksRows: false,
        refreshStatistics: ["PRAGMA analysis_limit = 1000", "ANALYZE"])

    static let postgres = SQLDialect(
        forUpdate: " FOR UPDATE", bytewise: #" COLLATE "C""#,
        joinedIntegers: { "string_agg(\($0)::text, ',')" },
        clock: "(extract(epoch FROM clock_timestamp()) * 1000000000)::bigint", indexedBy: { _ in "" }, byIDs: "",
        locksRows: true,
        refreshStatistics: [])
}

/// One transaction's statements on one backend: the narrow interface the metadata rules are
/// written against (``MetadataTransaction``). Calls block until the database answers; a
/// backend runs the whole transaction off Swift's cooperative pool.
protocol SQLSession {
    var dialect: SQLDialect { get }

    /// Runs a statement and returns its rows (none for most writes).
    @discardableResult
    func rows(_ sql: String, _ values: [SQLValue]) throws -> [SQLRow]

    /// Takes the lock that orders uploads against a garbage collection's deletion marks:
    /// shared by uploads, exclusive by the marking. Nothing on SQLite, whose writer is one.
    func lockDeletions(exclusive: Bool) throws

    /// Takes the lock that orders a store's first encipherment of its chunk ids (exclusive, by
    /// ``MetadataTransaction/indexKey(_:)``) against transactions that bind plain ids (shared,
    /// by ``ChunkIDSession``), always before the deletions' lock. Nothing on SQLite.
    func lockIndexKey(exclusive: Bool) throws

    /// Wakes other servers' long polls when this transaction commits. Nothing on SQLite.
    func notifyChanges(container: Int64) throws
}

extension SQLSession {
    @discardableResult
    func rows(_ sql: String, _ values: any SQLBindable...) throws -> [SQLRow] {
        try rows(sql, values.map(\.sqlValue))
    }

    func one(_ sql: String, _ values: any SQLBindable...) throws -> SQLRow? {
        try rows(sql, values.map(\.sqlValue)).first
    }

    func int(_ sql: String, _ values: any SQLBindable...) throws -> Int64? {
        try rows(sql, values.map(\.sqlValue)).first?.optionalInt(0)
    }

    /// Runs `body` inside a savepoint: its changes stay if it returns, and are undone if it
    /// throws (the error is rethrown; the transaction goes on).
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        try rows("SAVEPOINT xfer_step", [])
        do {
            let result = try body()
            try rows("RELEASE SAVEPOINT xfer_step", [])
            return result
        } catch {
            try rows("ROLLBACK TO SAVEPOINT xfer_step", [])
            try rows("RELEASE SAVEPOINT xfer_step", [])
            throw error
        }
    }
}

/// The session the metadata rules run on (``MetadataTransaction/sql``): binds chunk ids as the
/// store keeps them, enciphered when it has an index key (``ChunkIDCipher``), and gives rows
/// that read them back. The one place ids cross into the database.
///
/// A session with no cipher makes sure, before the first id it binds in a transaction, that the
/// store has no index key: another server of a fleet given keys may have enciphered the ids
/// while this one ran without them, and plain ids looked up or written there would find nothing
/// or be taken for garbage (docs/SECURITY.md, "Keys and rotation").
struct ChunkIDSession: SQLSession {
    let base: any SQLSession
    /// The cipher's contexts, made once for this transaction (not one per id: a version of
    /// 200,000 chunks binds and reads each id several times).
    let ids: ChunkIDCipher.Contexts?
    private let plainCheck: PlainCheck?

    /// Whether this transaction has found its store's ids plain (one look per transaction).
    private final class PlainCheck {
        var done = false
    }

    /// A session binding ids through `ids`; `checksPlain: false` for the transactions that
    /// make the index key or migrate a store from before it (they must not look for it).
    init(base: any SQLSession, ids: ChunkIDCipher?, checksPlain: Bool = true) {
        self.base = base
        self.ids = ids?.contexts()
        plainCheck = ids == nil && checksPlain ? PlainCheck() : nil
    }

    var dialect: SQLDialect { base.dialect }

    /// Before the first plain id is bound (or the deletions' lock taken): the index key's lock,
    /// shared, so no encipherment can start or finish under this transaction, then a look that
    /// there is none.
    private func checkPlain() throws {
        guard let plainCheck, !plainCheck.done else { return }
        try base.lockIndexKey(exclusive: false)
        guard try base.rows("SELECT 1 FROM sealing_index LIMIT 1", []).isEmpty else {
            throw XferError(
                .internal,
                """
                the store's chunk ids are enciphered under an index key (a server was started on it with encryption keys), \
                and this process has no keys; restart it with --encryption-key
                """)
        }
        plainCheck.done = true
    }

    func rows(_ sql: String, _ values: [SQLValue]) throws -> [SQLRow] {
        if plainCheck != nil, values.contains(where: { if case .chunkID = $0 { true } else { false } }) {
            try checkPlain()
        }
        // Without a cipher the backends bind an id as it is.
        guard let ids else { return try base.rows(sql, values) }
        // A statement's ids enciphered in one call.
        var bound = values
        let positions = values.indices.filter { if case .chunkID = values[$0] { true } else { false } }
        let enciphered = ids.encipher(
            positions.map { if case .chunkID(let id) = values[$0] { id } else { preconditionFailure() } })
        for (position, stored) in zip(positions, enciphered) { bound[position] = .blob(stored) }
        let rows = try base.rows(sql, bound)
        return rows.map { row in
            var row = row
            row.ids = ids
            return row
        }
    }

    func lockDeletions(exclusive: Bool) throws {
        try checkPlain()  // the index key's lock first, always
        try base.lockDeletions(exclusive: exclusive)
    }

    func lockIndexKey(exclusive: Bool) throws { try base.lockIndexKey(exclusive: exclusive) }

    func notifyChanges(container: Int64) throws { try base.notifyChanges(container: container) }
}

/// `?, ?, ?`: placeholders for a list of `count` values.
func sqlPlaceholders(_ count: Int) -> String {
    Array(repeating: "?", count: count).joined(separator: ", ")
}

/// `(?, ?), (?, ?)`: the rows of a multi-row `VALUES` of `count` rows, each `row` (`?, ?`).
func sqlRows(_ row: String, count: Int) -> String {
    Array(repeating: "(\(row))", count: count).joined(separator: ", ")
}

/// How many values one `IN (…)` list or multi-row `VALUES` carries: under SQLite's and
/// PostgreSQL's limits on bound values, and large enough that a batch is one round trip.
let sqlBatchSize = 1_000
