import Foundation
import GRDB
import XferCore

/// A bounded cache of the chunks of recently synced small files, in the client state
/// database: what a changed small file is sent against (``ChunkEncoding/zstdAgainst``), so an
/// edit of a source file moves bytes on the order of the edit, not of the file. The server holds
/// every chunk it stores; this is how the client holds the previous content of a file it has
/// since overwritten.
///
/// Chunks are kept as stored (zstd), verified against their id when read, and the least
/// recently used go first once the payloads pass ``maximumBytes``. Losing the cache costs only
/// bytes on the wire: a chunk whose reference is not here is sent whole.
public struct ChunkCache: Sendable {
    /// Files no larger than this (the default largest chunk) have their chunks kept, and are
    /// the ones sent against their previous content: a larger file's edit already moves only
    /// the chunks around it.
    public static let fileLimit: Int64 = 256 << 10
    /// Payload bytes kept at most, by default.
    public static let defaultMaximumBytes = 32 << 20

    /// What one transfer offers the cache: its small files' chunks, the first that come, up to
    /// the cache's bound in plain bytes. A transfer of more would only have the cache evict, in
    /// the same transfer, what it had just written: a first push of 200,000 small files wrote
    /// 800 MB of payloads into the state database to keep the last 32 MiB of them.
    public struct Admission: Sendable {
        /// Plain bytes still admitted.
        public private(set) var left: Int64

        /// A budget of `maximumBytes` plain bytes.
        public init(maximumBytes: Int) { left = Int64(maximumBytes) }

        /// Whether a chunk of `length` plain bytes of a file of `size` bytes is kept (and, if
        /// so, counts against the budget).
        public mutating func admits(_ length: Int, ofFileSized size: Int64) -> Bool {
            size <= ChunkCache.fileLimit && admits(length)
        }

        /// Whether a small file's chunk of `length` plain bytes is kept (and, if so, counts
        /// against the budget).
        public mutating func admits(_ length: Int) -> Bool {
            guard Int64(length) <= left else { return false }
            left -= Int64(length)
            return true
        }
    }

    /// A budget for one transfer (``Admission``).
    public func admission() -> Admission { Admission(maximumBytes: maximumBytes) }

    let database: StateDatabase
    /// Payload bytes kept at most.
    public let maximumBytes: Int

    /// The cache in a state database.
    /// - Parameters:
    ///   - database: The client state database it lives in.
    ///   - maximumBytes: Payload bytes kept at most.
    public init(database: StateDatabase, maximumBytes: Int = ChunkCache.defaultMaximumBytes) {
        self.database = database
        self.maximumBytes = maximumBytes
    }

    /// Keeps chunks (as stored: a chunk sent against a reference is not kept), then lets the
    /// least recently used go until the cache is within its bound.
    /// - Throws: `io` if the state database fails.
    public func keep(_ chunks: [EncodedChunk]) throws {
        let maximumBytes = maximumBytes
        let chunks = chunks.filter { $0.encoding != .zstdAgainst && $0.payload.count <= maximumBytes }
        guard !chunks.isEmpty else { return }
        let now = Syscall.wallClockNanoseconds()
        try database.run { db in
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO chunk_cache (id, length, encoding, payload, size, used_ns) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (id) DO UPDATE SET used_ns = excluded.used_ns
                    """)
            for chunk in chunks {
                try insert.execute(arguments: [
                    Data(chunk.id.bytes), chunk.length, Int(chunk.encoding.rawValue), Data(chunk.payload),
                    chunk.payload.count, now
                ])
            }
            var total = try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(size), 0) FROM chunk_cache") ?? 0
            guard total > maximumBytes else { return }
            // The oldest go first, in one pass over the use order (both from the index alone).
            var evict: [Int64] = []
            let rows = try Row.fetchCursor(db, sql: "SELECT rowid, size FROM chunk_cache ORDER BY used_ns")
            while total > maximumBytes, let row = try rows.next() {
                evict.append(row[0])
                total -= row[1] as Int
            }
            for batch in evict.batched(atMost: 500) {
                try db.execute(
                    sql:
                        "DELETE FROM chunk_cache WHERE rowid IN (\(Array(repeating: "?", count: batch.count).joined(separator: ",")))",
                    arguments: StatementArguments(batch))
            }
        }
    }

    /// The plain bytes of those of `ids` the cache holds and that verify against their id
    /// (one that does not is dropped from the cache); each one read counts as a use.
    /// - Throws: `io` if the state database fails.
    public func plain(_ ids: some Collection<ChunkID>) throws -> [ChunkID: [UInt8]] {
        let ids = Array(Set(ids))
        guard !ids.isEmpty else { return [:] }
        let now = Syscall.wallClockNanoseconds()
        return try database.run { db in
            var result: [ChunkID: [UInt8]] = [:]
            var damaged: [Data] = []
            for batch in ids.batched(atMost: 500) {
                let keys = batch.map { Data($0.bytes) }
                let marks = Array(repeating: "?", count: keys.count).joined(separator: ",")
                for row in try Row.fetchAll(
                    db, sql: "SELECT id, length, encoding, payload FROM chunk_cache WHERE id IN (\(marks))",
                    arguments: StatementArguments(keys))
                {
                    let key: Data = row["id"]
                    let payload: Data = row["payload"]
                    guard let id = ChunkID(bytes: key),
                        let encoding = ChunkEncoding(rawValue: UInt8(clamping: row["encoding"] as Int)),
                        encoding != .sealed,
                        let plain = try? EncodedChunk(
                            id: id, length: row["length"], encoding: encoding, payload: Array(payload)
                        )
                        .decoded(maximumLength: ChunkerConfiguration.maximumAllowedSize)
                    else {
                        damaged.append(key)
                        continue
                    }
                    result[id] = plain
                }
                try db.execute(
                    sql: "UPDATE chunk_cache SET used_ns = ? WHERE id IN (\(marks))",
                    arguments: StatementArguments([now] + keys))
            }
            for key in damaged { try db.execute(sql: "DELETE FROM chunk_cache WHERE id = ?", arguments: [key]) }
            return result
        }
    }

    /// Payload bytes and chunks held now.
    /// - Throws: `io` if the state database fails.
    public func usage() throws -> (bytes: Int, chunks: Int) {
        try database.run { db in
            let row = try Row.fetchOne(
                db, sql: "SELECT COALESCE(SUM(size), 0) AS bytes, COUNT(*) AS chunks FROM chunk_cache")!
            return (row["bytes"], row["chunks"])
        }
    }

    /// Lets every kept chunk go.
    /// - Throws: `io` if the state database fails.
    public func removeAll() throws {
        try database.run { db in try db.execute(sql: "DELETE FROM chunk_cache") }
    }
}
