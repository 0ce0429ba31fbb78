import Foundation
import GRDB
import XferCore
import XferProtocol

// The containers' key-value stores.
extension SQLiteMetadataStore {
    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws -> KeyValueWriteResult {
        let policy = policy
        let (key, text) = try KeyValueRules.check(request)
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            let existing = try Row.fetchOne(db, sql: "SELECT * FROM kv WHERE container_id = ? AND key = ?", arguments: [containerID, key])
                .map(Self.entry(row:))
            if let winner = try KeyValueRules.decide(request, key: key, text: text, existing: existing,
                                                     usage: try Self.keyValueUsage(db, container: containerID, excluding: key),
                                                     policy: policy, container: container) {
                return KeyValueWriteResult(applied: false, entry: winner)
            }
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: "INSERT OR REPLACE INTO kv (container_id, key, value, timestamp_ns, device, sequence) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [containerID, key, text, request.timestampNs, request.device, sequence])
            return KeyValueWriteResult(applied: true, entry: KeyValueEntry(key: key, value: request.value, timestampNs: request.timestampNs,
                                                                           device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let row = try Row.fetchOne(db, sql: "SELECT * FROM kv WHERE container_id = ? AND key = ? AND value IS NOT NULL",
                                             arguments: [containerID, key]) else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try Self.entry(row: row)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        let policy = policy
        return try await read { db in
            guard let id = try Self.containerID(db, account: account, name: container, create: false) else {
                return KeyValueList(entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try Row.fetchAll(db, sql: "SELECT * FROM kv WHERE container_id = ? AND value IS NOT NULL ORDER BY key", arguments: [id])
                .map(Self.entry(row:))
            return KeyValueList(entries: entries, bytes: try Self.keyValueUsage(db, container: id, excluding: nil).bytes,
                                maximumBytes: policy.keyValueMaximumBytes,
                                maximumKeys: policy.keyValueMaximumKeys)
        }
    }

    /// Live keys of a container's key-value store and their bytes (key plus JSON text), what
    /// the limits count; `excluding` leaves one key out (the one being written).
    static func keyValueUsage(_ db: Database, container: Int64, excluding key: String?) throws -> (keys: Int, bytes: Int) {
        let row = try Row.fetchOne(db, sql: """
            SELECT COUNT(*) AS keys, COALESCE(SUM(length(CAST(key AS BLOB)) + length(CAST(value AS BLOB))), 0) AS bytes
            FROM kv WHERE container_id = ? AND value IS NOT NULL AND key IS NOT ?
            """, arguments: [container, key])!
        return (row["keys"], row["bytes"])
    }

    static func entry(row: Row) throws -> KeyValueEntry {
        let text: String? = row["value"]
        return KeyValueEntry(key: row["key"], value: try text.map { try JSONValue(parsing: $0) }, timestampNs: row["timestamp_ns"],
                             device: row["device"], sequence: row["sequence"])
    }
}
