import Foundation
import XferCore
import XferProtocol

// The containers' key-value stores.
extension SQLMetadataStore {
    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws -> KeyValueWriteResult {
        let (key, text) = try KeyValueRules.check(request)
        return try await write { tx in
            let containerID = try tx.containerID(account: account, name: container, create: true)!
            // The container's lock first: the decision and the write see the same keys.
            try tx.lockContainer(containerID)
            let existing = try tx.sql.one("SELECT * FROM kv WHERE container_id = ? AND key = ?", containerID, key)
                .map(MetadataTransaction.entry(row:))
            if let winner = try KeyValueRules.decide(request, key: key, text: text, existing: existing,
                                                     usage: try tx.keyValueUsage(container: containerID, excluding: key),
                                                     policy: tx.policy, container: container) {
                return KeyValueWriteResult(applied: false, entry: winner)
            }
            let sequence = try tx.nextSequence(container: containerID)
            try tx.sql.rows("""
                INSERT INTO kv (container_id, key, value, timestamp_ns, device, sequence) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (container_id, key) DO UPDATE SET value = excluded.value, timestamp_ns = excluded.timestamp_ns,
                    device = excluded.device, sequence = excluded.sequence
                """, containerID, key, text, request.timestampNs, request.device, sequence)
            try tx.sql.notifyChanges(container: containerID)
            return KeyValueWriteResult(applied: true, entry: KeyValueEntry(key: key, value: request.value, timestampNs: request.timestampNs,
                                                                           device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false),
                  let row = try tx.sql.one("SELECT * FROM kv WHERE container_id = ? AND key = ? AND value IS NOT NULL", containerID, key) else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try MetadataTransaction.entry(row: row)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        try await read { tx in
            let policy = tx.policy
            guard let id = try tx.containerID(account: account, name: container, create: false) else {
                return KeyValueList(entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try tx.sql.rows("SELECT * FROM kv WHERE container_id = ? AND value IS NOT NULL ORDER BY key\(tx.dialect.bytewise)", id)
                .map(MetadataTransaction.entry(row:))
            return KeyValueList(entries: entries, bytes: try tx.keyValueUsage(container: id, excluding: nil).bytes,
                                maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
        }
    }
}

extension MetadataTransaction {
    /// Live keys of a container's key-value store and their bytes (key plus JSON text), what
    /// the limits count; `excluding` leaves one key out (the one being written).
    func keyValueUsage(container: Int64, excluding key: String?) throws -> (keys: Int, bytes: Int) {
        guard let row = try sql.one("""
            SELECT COUNT(*) AS keys, CAST(COALESCE(SUM(\(dialect.octetLength("key")) + \(dialect.octetLength("value"))), 0) AS BIGINT) AS bytes
            FROM kv WHERE container_id = ? AND value IS NOT NULL AND key IS DISTINCT FROM ?
            """, container, key) else { return (0, 0) }
        return (Int(try row.int("keys")), Int(try row.int("bytes")))
    }

    static func entry(row: SQLRow) throws -> KeyValueEntry {
        KeyValueEntry(key: try row.text("key"), value: try row.optionalText("value").map { try JSONValue(parsing: $0) },
                      timestampNs: try row.int("timestamp_ns"), device: try row.text("device"), sequence: try row.int("sequence"))
    }
}
