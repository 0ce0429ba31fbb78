import Foundation
import GRDB
import XferCore

/// A bounded on-disk cache of chunks as the server sent them (compressed; end to end, sealed),
/// for reads that come back to what was read before (`xfer mount`): segment files of about
/// ``segmentBytes`` that chunks are appended to, and an index in SQLite of where each lies.
///
/// Nothing is fsynced: a chunk is checked against its id whenever it is read, and one that is
/// not all there or not right (a power cut, a damaged disk) is dropped and fetched again. When
/// the segments pass ``maximumBytes``, the least recently used segment goes whole. Each
/// process appends to segments of its own, so two mounts may share a cache directory.
///
/// Pinned chunks (``pin(_:version:chunks:)``: what a pinned document needs) go to segments of
/// their own, which are never evicted and do not count against the bound.
public final class SegmentChunkCache: Sendable {
    /// The largest a segment grows before the next one starts, by default.
    public static let defaultSegmentBytes: Int64 = 64 << 20

    /// The cache's directory: `index.sqlite` and `NNNNNNNN.seg` files.
    public let directory: String
    /// Bytes of segments kept at most (the segment being written to always stays).
    public let maximumBytes: Int64
    /// The largest a segment grows before the next one starts.
    public let segmentBytes: Int64
    private let index: DatabaseQueue
    /// A segment this process appends to: its number, descriptor and size.
    typealias Appending = (number: Int64, fd: Int32, size: Int64)
    /// The segments this process appends to: for chunks kept, and for chunks pinned.
    private let current = Locked<(kept: Appending?, pinned: Appending?)>((nil, nil))

    /// Opens (creating) the cache in `directory`.
    /// - Throws: `io` if the directory or its index cannot be made.
    public init(directory: String, maximumBytes: Int64, segmentBytes: Int64 = defaultSegmentBytes) throws {
        self.directory = directory
        self.maximumBytes = maximumBytes
        self.segmentBytes = segmentBytes
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var configuration = Configuration()
            configuration.busyMode = .timeout(30)
            index = try DatabaseQueue(path: directory + "/index.sqlite", configuration: configuration)
            try index.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = OFF")
                try db.execute(
                    sql: """
                        CREATE TABLE IF NOT EXISTS chunks (
                            id BLOB PRIMARY KEY, segment INTEGER NOT NULL, offset INTEGER NOT NULL,
                            size INTEGER NOT NULL, length INTEGER NOT NULL, encoding INTEGER NOT NULL) WITHOUT ROWID;
                        CREATE INDEX IF NOT EXISTS chunks_segment ON chunks (segment);
                        CREATE TABLE IF NOT EXISTS segments (
                            number INTEGER PRIMARY KEY AUTOINCREMENT, bytes INTEGER NOT NULL, used_ns INTEGER NOT NULL,
                            pinned INTEGER NOT NULL DEFAULT 0);
                        CREATE TABLE IF NOT EXISTS pins (name TEXT PRIMARY KEY, version INTEGER NOT NULL);
                        CREATE TABLE IF NOT EXISTS pinned_chunks (
                            pin TEXT NOT NULL, id BLOB NOT NULL, PRIMARY KEY (pin, id)) WITHOUT ROWID;
                        CREATE INDEX IF NOT EXISTS pinned_chunks_id ON pinned_chunks (id);
                        CREATE TABLE IF NOT EXISTS manifests (
                            name TEXT PRIMARY KEY, version INTEGER NOT NULL, bytes BLOB NOT NULL, used_ns INTEGER NOT NULL);
                        """)
            }
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(.io, "cannot open the chunk cache in \(directory): \(error)")
        }
    }

    deinit {
        for fd in [current.value.kept?.fd, current.value.pinned?.fd].compactMap({ $0 }) { close(fd) }
    }

    /// Keeps `chunks` (those not kept already), then lets the least recently used segments go
    /// until the cache is within its bound. Pinned, they go to a pinned segment (one kept in
    /// an ordinary segment is written there again).
    /// - Throws: `io` if a segment cannot be written or the index fails.
    public func keep(_ chunks: [EncodedChunk], pinned: Bool = false) throws {
        let wanted = chunks.filter { $0.encoding != .zstdAgainst }
        guard !wanted.isEmpty else { return }
        try current.withLock { current in
            let held = try self.locate(wanted.map(\.id)).filter { !pinned || $0.pinned }
            var seen = Set(held.map(\.id))
            let fresh = wanted.filter { seen.insert($0.id).inserted }
            guard !fresh.isEmpty else { return }
            if pinned {
                current.pinned = try write(fresh, to: current.pinned, pinned: true)
            } else {
                current.kept = try write(fresh, to: current.kept, pinned: false)
                try evict(keeping: current.kept!.number)
            }
        }
    }

    /// Appends `chunks` to `segment` (or a new one, once it is full) and indexes them there.
    /// - Returns: The segment as it now is.
    private func write(_ chunks: [EncodedChunk], to segment: Appending?, pinned: Bool) throws -> Appending {
        let segment = try self.segment(segment, pinned: pinned)
        try append(chunks, to: segment)
        let written = chunks.reduce(Int64(0)) { $0 + Int64($1.payload.count) }
        try record(chunks, segment: segment.number, at: segment.size, bytes: written)
        return (segment.number, segment.fd, segment.size + written)
    }

    /// Pins `chunks` under `name` (a document, at `version`): those held in an ordinary segment are
    /// written again to a pinned one; those not held are left to the caller to fetch and keep
    /// pinned. A name pinned again replaces what it pinned before.
    /// - Returns: The chunks not held, which the caller fetches.
    public func pin(_ name: String, version: Int64, chunks ids: [ChunkID]) throws -> [ChunkID] {
        let held = try locate(ids)
        try keep(held.filter { !$0.pinned }.compactMap { try? self.encoded($0) }, pinned: true)
        try index.write { db in
            try db.execute(sql: "DELETE FROM pinned_chunks WHERE pin = ?", arguments: [name])
            try db.execute(
                sql: "INSERT INTO pins (name, version) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET version = ?",
                arguments: [name, version, version])
            let insert = try db.cachedStatement(sql: "INSERT OR IGNORE INTO pinned_chunks (pin, id) VALUES (?, ?)")
            for id in Set(ids) { try insert.execute(arguments: [name, Data(id.bytes)]) }
        }
        try releasePinnedSegments()
        let located = Set(try locate(ids).filter(\.pinned).map(\.id))
        return Array(Set(ids).subtracting(located))
    }

    /// Unpins `name`: its chunks stay cached, evicted as any others once no pin needs them.
    /// - Returns: Whether it was pinned.
    @discardableResult
    public func unpin(_ name: String) throws -> Bool {
        let removed = try index.write { db in
            try db.execute(sql: "DELETE FROM pinned_chunks WHERE pin = ?", arguments: [name])
            try db.execute(sql: "DELETE FROM pins WHERE name = ?", arguments: [name])
            return db.changesCount > 0
        }
        try releasePinnedSegments()
        return removed
    }

    /// The pinned names, with the version each was pinned at.
    public func pins() throws -> [String: Int64] {
        try index.read { db in
            Dictionary(
                try Row.fetchAll(db, sql: "SELECT name, version FROM pins").map { ($0["name"], $0["version"]) },
                uniquingKeysWith: { a, _ in a })
        }
    }

    /// Those of `ids` the cache holds (without reading them).
    public func holds(_ ids: [ChunkID]) throws -> Set<ChunkID> {
        Set(try locate(ids).map(\.id))
    }

    /// The most manifests kept (``keepManifest(_:version:bytes:)``); the least recently kept go.
    public static let manifestLimit = 10_000

    /// Keeps a document's manifest (checked by the caller), so the document opens without the
    /// server: the newest version per name.
    public func keepManifest(_ name: String, version: Int64, bytes: [UInt8]) throws {
        try index.write { db in
            try db.execute(
                sql: """
                    INSERT INTO manifests (name, version, bytes, used_ns) VALUES (?, ?, ?, ?)
                    ON CONFLICT (name) DO UPDATE SET version = excluded.version, bytes = excluded.bytes,
                    used_ns = excluded.used_ns WHERE excluded.version >= manifests.version
                    """, arguments: [name, version, Data(bytes), Syscall.wallClockNanoseconds()])
            try db.execute(
                sql: """
                    DELETE FROM manifests WHERE name IN (
                        SELECT name FROM manifests ORDER BY used_ns DESC LIMIT -1 OFFSET ?)
                    """, arguments: [Self.manifestLimit])
        }
    }

    /// A kept manifest's bytes, if `version` of `name` is the one kept.
    public func manifest(_ name: String, version: Int64) throws -> [UInt8]? {
        try index.read { db in
            try Data.fetchOne(
                db, sql: "SELECT bytes FROM manifests WHERE name = ? AND version = ?", arguments: [name, version]
            ).map { Array($0) }
        }
    }

    /// The version of each manifest kept, by name.
    public func keptManifests() throws -> [String: Int64] {
        try index.read { db in
            var kept: [String: Int64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT name, version FROM manifests") {
                kept[row["name"]] = row["version"]
            }
            return kept
        }
    }

    /// Pinned segments none of whose chunks a pin needs become ordinary ones.
    private func releasePinnedSegments() throws {
        try index.write { db in
            try db.execute(
                sql: """
                    UPDATE segments SET pinned = 0 WHERE pinned = 1 AND NOT EXISTS (
                        SELECT 1 FROM chunks JOIN pinned_chunks ON pinned_chunks.id = chunks.id
                        WHERE chunks.segment = segments.number)
                    """)
        }
    }

    /// The plain bytes of those of `ids` the cache holds and that check out under `codec`
    /// (one that does not is dropped); each segment read from counts as used.
    public func plain(_ ids: some Collection<ChunkID>, codec: ChunkCodec) throws -> [ChunkID: [UInt8]] {
        let rows = try locate(Array(Set(ids)))
        guard !rows.isEmpty else { return [:] }
        var result: [ChunkID: [UInt8]] = [:]
        var damaged: [ChunkID] = []
        var files: [Int64: Int32] = [:]
        defer { files.values.forEach { close($0) } }
        for row in rows {
            let fd = files[row.segment] ?? open(path(of: row.segment), O_RDONLY | O_CLOEXEC)
            files[row.segment] = fd
            guard fd >= 0, let plain = Self.read(row, from: fd, codec: codec) else {
                damaged.append(row.id)
                continue
            }
            result[row.id] = plain
        }
        try touch(Set(rows.map(\.segment)), dropping: damaged)
        return result
    }

    /// Bytes of segments (pinned ones not counted) and chunks indexed.
    public func usage() throws -> (bytes: Int64, chunks: Int) {
        try index.read { db in
            let bytes =
                try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(bytes), 0) FROM segments WHERE pinned = 0") ?? 0
            return (bytes, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM chunks") ?? 0)
        }
    }

    // MARK: Segments

    private struct Located {
        var id: ChunkID
        var segment: Int64
        var offset: Int64
        var size: Int
        var length: Int
        var encoding: ChunkEncoding
        var pinned: Bool
    }

    private func path(of segment: Int64) -> String {
        directory + "/" + String(format: "%08lld.seg", segment)
    }

    /// The segment to append to: `current`, or a new one once it is full.
    private func segment(_ current: Appending?, pinned: Bool) throws -> Appending {
        if let open = current, open.size < segmentBytes { return open }
        if let open = current { close(open.fd) }
        let number = try index.write { db -> Int64 in
            try db.execute(
                sql: "INSERT INTO segments (bytes, used_ns, pinned) VALUES (0, ?, ?)",
                arguments: [Syscall.wallClockNanoseconds(), pinned])
            return db.lastInsertedRowID
        }
        let fd = open(path(of: number), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw XferError(.io, "cannot create \(path(of: number))", cause: SystemErrno(errno)) }
        return (number, fd, 0)
    }

    private func append(_ chunks: [EncodedChunk], to segment: Appending) throws {
        try RawBuffers.with(chunks.map(\.payload)) { pieces in
            try Syscall.pwrite(segment.fd, pieces, at: segment.size, path: path(of: segment.number))
        }
    }

    /// A located chunk as it is stored (not checked).
    private func encoded(_ row: Located) throws -> EncodedChunk {
        let fd = open(path(of: row.segment), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw XferError(.io, "cannot open \(path(of: row.segment))", cause: SystemErrno(errno)) }
        defer { close(fd) }
        var payload = [UInt8](repeating: 0, count: row.size)
        let got = try payload.withUnsafeMutableBytes { buffer in
            try Syscall.pread(fd, into: buffer, at: row.offset, path: path(of: row.segment))
        }
        guard got == row.size else { throw XferError(.io, "a cached chunk of \(path(of: row.segment)) is cut short") }
        return EncodedChunk(id: row.id, length: row.length, encoding: row.encoding, payload: payload)
    }

    private static func read(_ row: Located, from fd: Int32, codec: ChunkCodec) -> [UInt8]? {
        var payload = [UInt8](repeating: 0, count: row.size)
        let got = try? payload.withUnsafeMutableBytes { buffer in
            try Syscall.pread(fd, into: buffer, at: row.offset, path: "a cached chunk")
        }
        guard got == row.size else { return nil }
        let chunk = EncodedChunk(id: row.id, length: row.length, encoding: row.encoding, payload: payload)
        return try? codec.decode(chunk, maximumLength: ChunkerConfiguration.maximumAllowedSize)
    }

    // MARK: Index

    private func locate(_ ids: [ChunkID]) throws -> [Located] {
        try index.read { db in
            var rows: [Located] = []
            for batch in ids.batched(atMost: 500) {
                let marks = Array(repeating: "?", count: batch.count).joined(separator: ",")
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT id, segment, offset, size, length, encoding, pinned FROM chunks
                        JOIN segments ON segments.number = chunks.segment WHERE id IN (\(marks))
                        """,
                    arguments: StatementArguments(batch.map { Data($0.bytes) }))
                {
                    guard let id = ChunkID(bytes: row["id"] as Data),
                        let encoding = ChunkEncoding(rawValue: UInt8(clamping: row["encoding"] as Int))
                    else { continue }
                    rows.append(
                        Located(
                            id: id, segment: row["segment"], offset: row["offset"], size: row["size"],
                            length: row["length"], encoding: encoding, pinned: row["pinned"]))
                }
            }
            return rows
        }
    }

    private func record(_ chunks: [EncodedChunk], segment: Int64, at offset: Int64, bytes: Int64) throws {
        try index.write { db in
            let insert = try db.cachedStatement(
                sql:
                    "INSERT OR REPLACE INTO chunks (id, segment, offset, size, length, encoding) VALUES (?, ?, ?, ?, ?, ?)"
            )
            var position = offset
            for chunk in chunks {
                try insert.execute(arguments: [
                    Data(chunk.id.bytes), segment, position, chunk.payload.count, chunk.length,
                    Int(chunk.encoding.rawValue)
                ])
                position += Int64(chunk.payload.count)
            }
            try db.execute(
                sql: "UPDATE segments SET bytes = bytes + ?, used_ns = ? WHERE number = ?",
                arguments: [bytes, Syscall.wallClockNanoseconds(), segment])
        }
    }

    /// Marks `segments` used now and forgets `damaged` chunks.
    private func touch(_ segments: Set<Int64>, dropping damaged: [ChunkID]) throws {
        try index.write { db in
            for segment in segments {
                try db.execute(
                    sql: "UPDATE segments SET used_ns = ? WHERE number = ?",
                    arguments: [Syscall.wallClockNanoseconds(), segment])
            }
            for id in damaged { try db.execute(sql: "DELETE FROM chunks WHERE id = ?", arguments: [Data(id.bytes)]) }
        }
    }

    /// Lets the least recently used segments (never `kept`, the one being appended to) go
    /// until the total is within ``maximumBytes``.
    private func evict(keeping kept: Int64) throws {
        let gone = try index.write { db -> [Int64] in
            var total =
                try Int64.fetchOne(db, sql: "SELECT COALESCE(SUM(bytes), 0) FROM segments WHERE pinned = 0") ?? 0
            var gone: [Int64] = []
            let rows = try Row.fetchAll(
                db, sql: "SELECT number, bytes FROM segments WHERE pinned = 0 ORDER BY used_ns")
            for row in rows where total > maximumBytes && row["number"] as Int64 != kept {
                let number: Int64 = row["number"]
                try db.execute(sql: "DELETE FROM chunks WHERE segment = ?", arguments: [number])
                try db.execute(sql: "DELETE FROM segments WHERE number = ?", arguments: [number])
                total -= row["bytes"] as Int64
                gone.append(number)
            }
            return gone
        }
        for number in gone { unlink(path(of: number)) }
    }
}
