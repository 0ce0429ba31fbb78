import Foundation
import XferCore
import XferProtocol

/// What the operations of one records/modify request share: where and by whom they write, and
/// what is read once for them all rather than once each — the records they name, the zone's
/// subscriptions, a block of change numbers — and the last change number, which the zone
/// takes at the end. On PostgreSQL each statement saved is a round trip.
final class RecordWriteScope {
    let account: Int64
    let container: Int64
    let zone: (id: Int64, name: String)
    let writer: RecordWriter
    let desired: [String]?
    /// The zone's subscriptions, read at the first change (one that fires once leaves when it fires).
    var subscriptions: [RecordSubscription]?
    /// The last change number written in the zone.
    private(set) var lastSequence: Int64?
    /// The records named so far, as they now stand (`nil`: none by that name), by the bytes of
    /// their names: the database compares names byte by byte, where Swift's `String` would take
    /// two normalizations of one name as equal.
    private var records: [[UInt8]: StoredRecord?] = [:]
    /// Change numbers taken and not yet used, and how many to take next time.
    private var sequences: [Int64] = []
    private var block: Int64

    init(
        account: Int64, container: Int64, zone: (id: Int64, name: String), writer: RecordWriter, desired: [String]?,
        operations: Int
    ) {
        self.account = account
        self.container = container
        self.zone = zone
        self.writer = writer
        self.desired = desired
        block = Int64(max(operations, 1))
    }

    /// Reads the records of `names` at once.
    func prefetch(_ names: [String], in tx: MetadataTransaction) throws {
        let wanted = Set(names.map { Array($0.utf8) }).filter { records[$0] == nil }
        guard !wanted.isEmpty else { return }
        for name in wanted { records[name] = .some(nil) }
        let list = Array(repeating: "?", count: wanted.count).joined(separator: ", ")
        for row in try tx.sql.rows(
            "SELECT * FROM records WHERE zone_id = ? AND name IN (\(list))",
            [.int(zone.id)] + wanted.map { .text(String(decoding: $0, as: UTF8.self)) })
        {
            let record: StoredRecord = (try row.int("id"), try tx.record(row: row), try row.optionalText("fields"))
            records[Array(record.record.recordName.utf8)] = .some(record)
        }
    }

    /// The record stored under `name`, as this request has left it.
    func stored(_ name: String, in tx: MetadataTransaction) throws -> StoredRecord? {
        if let known = records[Array(name.utf8)] { return known }
        try prefetch([name], in: tx)
        return records[Array(name.utf8)] ?? nil
    }

    /// The next change number, from the block taken; a new block when it runs out.
    func nextSequence(in tx: MetadataTransaction) throws -> Int64 {
        if sequences.isEmpty {
            sequences = Array(try tx.nextRecordSequences(container: container, count: block).reversed())
            block = 64
        }
        return sequences.removeLast()
    }

    /// Notes a record written (or made a tombstone) at `sequence`.
    func saved(_ record: StoredRecord, sequence: Int64) {
        records[Array(record.record.recordName.utf8)] = .some(record)
        lastSequence = sequence
    }
}
