import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import XferCore
import XferProtocol

// The containers' key-value stores.
extension PostgresMetadataStore {
    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws -> KeyValueWriteResult {
        let policy = policy
        let (key, text) = try KeyValueRules.check(request)
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            // The container's lock first: the decision and the write see the same keys.
            try await tx.run("SELECT id FROM containers WHERE id = \(containerID) FOR UPDATE")
            let existing = try await tx.one("SELECT * FROM kv WHERE container_id = \(containerID) AND key = \(key)").map(Self.entry(row:))
            let usage = try await Self.keyValueUsage(tx, container: containerID, excluding: key)
            if let winner = try KeyValueRules.decide(request, key: key, text: text, existing: existing, usage: usage,
                                                     policy: policy, container: container) {
                return KeyValueWriteResult(applied: false, entry: winner)
            }
            let sequence = try await Self.nextSequence(tx, container: containerID)
            try await tx.run("""
                INSERT INTO kv (container_id, key, value, timestamp_ns, device, sequence)
                VALUES (\(containerID), \(key), \(text), \(request.timestampNs), \(request.device), \(sequence))
                ON CONFLICT (container_id, key) DO UPDATE SET value = EXCLUDED.value, timestamp_ns = EXCLUDED.timestamp_ns,
                    device = EXCLUDED.device, sequence = EXCLUDED.sequence
                """)
            try await Self.notify(tx, container: containerID)
            return KeyValueWriteResult(applied: true, entry: KeyValueEntry(key: key, value: request.value, timestampNs: request.timestampNs,
                                                                           device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let row = try await tx.one("SELECT * FROM kv WHERE container_id = \(containerID) AND key = \(key) AND value IS NOT NULL") else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try Self.entry(row: row)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        let policy = policy
        return try await transaction { tx in
            guard let id = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return KeyValueList(entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try await tx.rows("SELECT * FROM kv WHERE container_id = \(id) AND value IS NOT NULL ORDER BY key COLLATE \"C\"")
                .map(Self.entry(row:))
            return KeyValueList(entries: entries, bytes: try await Self.keyValueUsage(tx, container: id, excluding: nil).bytes, maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
        }
    }

    /// Live keys of a container and their bytes (key plus stored JSON text), what the limits
    /// count; `excluding` leaves one key out (the one being written).
    static func keyValueUsage(_ tx: Transaction, container: Int64, excluding key: String?) async throws -> (keys: Int, bytes: Int) {
        let row = try await tx.one("""
            SELECT COUNT(*) AS keys, COALESCE(SUM(octet_length(key) + octet_length(value)), 0)::bigint AS bytes FROM kv
            WHERE container_id = \(container) AND value IS NOT NULL AND key IS DISTINCT FROM \(key)
            """)!
        return (Int(try row["keys"].decode(Int64.self)), Int(try row["bytes"].decode(Int64.self)))
    }

    static func entry(row: PostgresRandomAccessRow) throws -> KeyValueEntry {
        let text = try row["value"].decode(String?.self)
        return KeyValueEntry(key: try row["key"].decode(String.self), value: try text.map { try JSONValue(parsing: $0) },
                             timestampNs: try row["timestamp_ns"].decode(Int64.self), device: try row["device"].decode(String.self),
                             sequence: try row["sequence"].decode(Int64.self))
    }
}
