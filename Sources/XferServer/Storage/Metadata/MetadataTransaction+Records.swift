import Foundation
import XferCore
import XferProtocol

// The reads and writes of records (docs/RECORDS.md), for both backends; the decisions are
// RecordDecision's and the rules RecordRules'.
/// A record as stored: its row id, the record, and its fields' JSON as stored.
typealias StoredRecord = (id: Int64, record: Record, fields: String?)

extension MetadataTransaction {
    /// The zone's id; `_defaultZone` is made on first use when `create` is set.
    /// - Throws: `not_found` (`ZONE_NOT_FOUND`) for another zone that does not exist.
    func recordZone(container: Int64, name: String, create: Bool) throws -> Int64? {
        if let row = try sql.one(
            "SELECT id, deleted FROM record_zones WHERE container_id = ? AND name = ?", container, name),
            try !row.bool("deleted")
        {
            return try row.int("id")
        }
        guard name == ZoneID.defaultZone.zoneName else { return nil }
        guard create else { return nil }
        return try sql.int(
            """
            INSERT INTO record_zones (container_id, name, sequence, deleted) VALUES (?, ?, 0, ?)
            ON CONFLICT (container_id, name) DO UPDATE SET deleted = excluded.deleted RETURNING id
            """, container, name, false)
    }

    /// The rows of a query's page (one more than its limit, if there are), asked `ways` or as the plan decides
    /// from its filters' counts: each way in turn until one answers the whole page.
    func page(of query: RecordQuerySQL, ways: [RecordQueryWay]?) throws -> [SQLRow] {
        var counts = query.findable.map { (place: $0, matches: 0) }
        if ways == nil, RecordQueryPlan.needsCounts(findable: counts.count, byName: query.byName),
            let counting = query.counting(cap: RecordQueryPlan.cap),
            let row = try sql.rows(counting.sql, counting.values).first
        {
            counts = try counts.enumerated().map { (place: $1.place, matches: Int(try row.int($0))) }
        }
        let planned = ways ?? RecordQueryPlan.ways(counts: counts, byName: query.byName)
        var rows: [SQLRow] = []
        for way in planned {
            // A walk within a count ends at that record's name; with fewer records, or in another
            // order than the names', it is whole.
            var end: String?
            if case .walk(let within?) = way, query.byName {
                let bound = query.walkEnd(within: within)
                end = try sql.rows(bound.sql, bound.values).first.map { try $0.text(0) }
            }
            let statement = query.statement(way, through: end)
            rows = try sql.rows(statement.sql, statement.values)
            if end == nil || rows.count > query.page.limit { break }
        }
        return rows
    }

    /// The next change number of the container's records (a zone's or a record's change).
    func nextRecordSequence(container: Int64) throws -> Int64 {
        try nextRecordSequences(container: container, count: 1).upperBound
    }

    /// The next `count` change numbers of the container's records, taken at once (those a
    /// request leaves unused are gaps, which sync tokens do not mind). Every 4,096th also
    /// refreshes the query planner's statistics (``SQLDialect/refreshStatistics``): without
    /// them SQLite walks every record in name order for a filter that selects few.
    func nextRecordSequences(container: Int64, count: Int64) throws -> ClosedRange<Int64> {
        guard
            let last = try sql.int(
                "UPDATE containers SET record_sequence = record_sequence + ? WHERE id = ? RETURNING record_sequence",
                count, container)
        else {
            throw XferError(.internal, "container \(container) vanished inside its own transaction")
        }
        let block = (last - count + 1)...last
        if last / 4_096 != block.lowerBound / 4_096 || block.lowerBound % 4_096 == 0 {
            for statement in sql.dialect.refreshStatistics { try sql.rows(statement, []) }
        }
        return block
    }

    /// The record stored under `name` in the zone, deleted ones included, its row id and its
    /// fields' JSON as stored (what they cost the quota).
    func storedRecord(zone: Int64, name: String) throws -> StoredRecord? {
        try sql.one("SELECT * FROM records WHERE zone_id = ? AND name = ?", zone, name).map {
            (try $0.int("id"), try record(row: $0), try $0.optionalText("fields"))
        }
    }

    /// A record from its row (a tombstone: its name and `deleted`).
    func record(row: SQLRow) throws -> Record {
        let name = try row.text("name")
        let tag = RecordRules.changeTag(try row.int("sequence"))
        guard try !row.bool("deleted") else { return Record(recordName: name, recordChangeTag: tag, deleted: true) }
        let fields = try row.optionalText("fields").map {
            try RecordJSON.decode([String: RecordField].self, from: Array($0.utf8))
        }
        return Record(
            recordName: name, recordType: try row.text("type"), recordChangeTag: tag, fields: fields,
            created: RecordStamp(
                timestamp: try row.int("created_at"), userRecordName: try row.text("created_by"),
                deviceID: try row.optionalText("created_device")),
            modified: RecordStamp(
                timestamp: try row.int("modified_at"), userRecordName: try row.text("modified_by"),
                deviceID: try row.optionalText("modified_device")),
            deleted: false)
    }

    /// What a live record's fields cost the account's quota, as a version record does: counted
    /// in characters, as SQL's `LENGTH` counts text on both backends (``SQLMetadataStore/accounts()``).
    static func recordCost(_ text: String?) -> Int64 {
        text.map { QuotaRules.versionCost(manifestBytes: $0.unicodeScalars.count) } ?? 0
    }

    /// Writes a record's type and fields (over `stored`, the row that was there, a tombstone
    /// perhaps), its index values, and its change number, charging the account's quota what it grew.
    /// - Returns: The row's id, the record as it now is and its fields' JSON.
    /// - Throws: `too_large` (LIMIT_EXCEEDED) past ``RecordLimits/recordBytes``; `quota_exceeded`.
    func writeRecord(
        account: Int64, zone: Int64, name: String, type: String, fields: [String: RecordField],
        stored: StoredRecord?, sequence: Int64, writer: RecordWriter
    ) throws -> StoredRecord {
        let text = String(decoding: RecordJSON.encode(fields), as: UTF8.self)
        guard text.utf8.count <= RecordLimits.recordBytes else {
            throw XferError(.tooLarge, "record \(name.prefix(64)) is \(text.utf8.count) bytes; at most 1 MiB")
        }
        let values = RecordRules.indexValues(fields)
        let points = RecordLocations.points(fields)
        guard values.count + points.count <= RecordRules.maximumIndexValues else {
            throw XferError(
                .tooLarge,
                "record \(name.prefix(64)) has \(values.count + points.count) values, words and locations to index; at most \(RecordRules.maximumIndexValues)"
            )
        }
        try chargeRecord(account: account, Self.recordCost(text) - Self.recordCost(stored?.fields))
        let now = try clock() / 1_000_000
        let stamp = RecordStamp(timestamp: now, userRecordName: writer.account, deviceID: writer.device)
        let id: Int64
        if let stored = stored?.id {
            try sql.rows(
                """
                UPDATE records SET type = ?, fields = ?, sequence = ?, deleted = ?, modified_at = ?, modified_by = ?,
                  modified_device = ?,
                  created_at = CASE WHEN deleted THEN ? ELSE created_at END,
                  created_by = CASE WHEN deleted THEN ? ELSE created_by END,
                  created_device = CASE WHEN deleted THEN ? ELSE created_device END
                WHERE id = ?
                """, type, text, sequence, false, now, writer.account, writer.device, now, writer.account,
                writer.device, stored)
            try clearIndex(record: stored)
            id = stored
        } else {
            guard
                let made = try sql.int(
                    """
                    INSERT INTO records (zone_id, name, type, fields, sequence, deleted, created_at, created_by,
                      created_device, modified_at, modified_by, modified_device)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                    """, zone, name, type, text, sequence, false, now, writer.account, writer.device, now,
                    writer.account, writer.device)
            else { throw XferError(.internal, "a record row was not made") }
            id = made
        }
        try writeIndex(record: id, zone: zone, type: type, values: values, points: points)
        let live = stored.flatMap { $0.record.deleted == true ? nil : $0.record }
        return (
            id,
            Record(
                recordName: name, recordType: type, recordChangeTag: RecordRules.changeTag(sequence), fields: fields,
                created: live?.created ?? stamp, modified: stamp, deleted: false),
            text
        )
    }

    /// A record's index rows: its values and words, and its locations.
    private func writeIndex(
        record id: Int64, zone: Int64, type: String, values: [RecordRules.IndexValue],
        points: [RecordLocations.Point]
    ) throws {
        try insert(
            "record_values (record_id, zone_id, type, field, kind, number, text)",
            values.map {
                [
                    .int(id), .int(zone), .text(type), .text($0.field), .text($0.kind), $0.number.sqlValue,
                    $0.text.sqlValue
                ]
            })
        try insert(
            "record_locations (record_id, zone_id, type, field, x, y, z)",
            points.map { [.int(id), .int(zone), .text(type), .text($0.field), .int($0.x), .int($0.y), .int($0.z)] })
    }

    /// Rows into `table` (its name and columns), a few hundred a statement.
    func insert(_ table: String, _ rows: [[SQLValue]]) throws {
        guard let width = rows.first?.count else { return }
        let row = "(" + Array(repeating: "?", count: width).joined(separator: ", ") + ")"
        for start in stride(from: 0, to: rows.count, by: 256) {
            let batch = rows[start..<min(rows.count, start + 256)]
            try sql.rows(
                "INSERT INTO \(table) VALUES " + Array(repeating: row, count: batch.count).joined(separator: ", "),
                batch.flatMap { $0 })
        }
    }

    /// Turns a record into a tombstone at change number `sequence`, giving back its cost (that
    /// of `fields`, its fields' JSON as stored).
    func deleteRecord(account: Int64, _ id: Int64, fields: String?, sequence: Int64, writer: RecordWriter) throws {
        try chargeRecord(account: account, -Self.recordCost(fields))
        try clearIndex(record: id)
        try sql.rows(
            """
            UPDATE records SET fields = NULL, deleted = ?, sequence = ?, modified_at = ?, modified_by = ?,
              modified_device = ? WHERE id = ?
            """, true, sequence, try clock() / 1_000_000, writer.account, writer.device, id)
    }

    /// The container records are written to, made if need be, and locked (as `containerID` locks). Records are kept in
    /// an end-to-end encrypted container too, as CloudKit keeps them: a field a device marks
    /// `isEncrypted` it seals itself, and the others are the server's to read and index
    /// (docs/RECORDS.md, "Encrypted fields").
    func recordContainer(account: Int64, name: ContainerName) throws -> Int64 {
        guard let id = try containerID(account: account, name: name, create: true, sealed: true) else {
            throw XferError(.internal, "container \(name) was not made")
        }
        return id
    }

    /// Removes what the index holds of one record: its values and its locations.
    func clearIndex(record id: Int64) throws {
        try sql.rows("DELETE FROM record_values WHERE record_id = ?", id)
        try sql.rows("DELETE FROM record_locations WHERE record_id = ?", id)
    }

    /// Charges (or with a negative `delta`, gives back) record bytes to the account's quota,
    /// with version records: a growth past the quota is refused.
    /// - Throws: `quota_exceeded`, charging nothing.
    func chargeRecord(account: Int64, _ delta: Int64) throws {
        if delta > 0 {
            let base = try versionBytes.base(account) ?? readQuota(account)
            _ = try QuotaRules.charge(adding: delta, used: base.used + versionBytes.tally(account), quota: base.quota)
        }
        versionBytes.add(delta, account: account)
    }

    /// Marks the zone changed at `sequence` (for changes/database).
    func touchZone(_ zone: Int64, sequence: Int64) throws {
        try sql.rows("UPDATE record_zones SET sequence = ? WHERE id = ?", sequence, zone)
    }
}
