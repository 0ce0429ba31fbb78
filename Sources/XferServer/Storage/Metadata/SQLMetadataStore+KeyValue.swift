import Foundation
import XferCore
import XferProtocol

// The containers' key-value stores.
extension SQLMetadataStore {
    public func setValue(account: Int64, container: ContainerName, _ request: KeyValueWrite) async throws
        -> KeyValueWriteResult
    {
        let (key, text) = try KeyValueRules.check(request)
        return try await write { tx in
            // The container's lock first (containerID takes it): the decision and the write see the same keys.
            let containerID = try tx.containerID(
                account: account, name: container, create: true,
                sealed: SealedValues.isSealed(key: request.key, value: request.value))!
            let existing = try tx.sql.one("SELECT * FROM kv WHERE container_id = ? AND key = ?", containerID, key)
                .map { try tx.keyValueEntry(row: $0, container: containerID) }
            if let winner = try KeyValueRules.decide(
                request, key: key, text: text, existing: existing,
                usage: try tx.keyValueUsage(container: containerID, excluding: key),
                policy: tx.policy, container: container)
            {
                return KeyValueWriteResult(applied: false, entry: winner)
            }
            let sequence = try tx.nextSequence(container: containerID)
            if text != nil { try tx.noteSealing(with: tx.sealing?.current.id) }
            try tx.sql.rows(
                """
                INSERT INTO kv (container_id, key, value, timestamp_ns, device, sequence) VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (container_id, key) DO UPDATE SET value = excluded.value, timestamp_ns = excluded.timestamp_ns,
                    device = excluded.device, sequence = excluded.sequence
                """, containerID, key, text.map { tx.storedValue($0, container: containerID, key: key) },
                request.timestampNs, request.device, sequence)
            if text != nil { try tx.checkMetadataBudget(account: account) }
            try tx.sql.notifyChanges(container: containerID)
            return KeyValueWriteResult(
                applied: true,
                entry: KeyValueEntry(
                    key: key, value: request.value, timestampNs: request.timestampNs,
                    device: request.device, sequence: sequence))
        }
    }

    public func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry {
        let key = try KeyValueRules.check(key)
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false),
                let row = try tx.sql.one(
                    "SELECT * FROM kv WHERE container_id = ? AND key = ? AND value IS NOT NULL", containerID, key)
            else {
                throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
            }
            return try tx.keyValueEntry(row: row, container: containerID)
        }
    }

    public func values(account: Int64, container: ContainerName) async throws -> KeyValueList {
        try await read { tx in
            let policy = tx.policy
            guard let id = try tx.containerID(account: account, name: container, create: false) else {
                return KeyValueList(
                    entries: [], bytes: 0, maximumBytes: policy.keyValueMaximumBytes,
                    maximumKeys: policy.keyValueMaximumKeys)
            }
            let entries = try tx.sql.rows(
                "SELECT * FROM kv WHERE container_id = ? AND value IS NOT NULL ORDER BY key\(tx.dialect.bytewise)", id
            )
            .map { try tx.keyValueEntry(row: $0, container: id) }
            return KeyValueList(
                entries: entries, bytes: try tx.keyValueUsage(container: id, excluding: nil).bytes,
                maximumBytes: policy.keyValueMaximumBytes, maximumKeys: policy.keyValueMaximumKeys)
        }
    }
}

extension MetadataTransaction {
    /// Live keys of a container's key-value store and their bytes (key plus JSON text), what
    /// the limits count; `excluding` leaves one key out (the one being written). A sealed value
    /// counts its plain JSON text's bytes, as it would unsealed (its stored form is longer).
    func keyValueUsage(container: Int64, excluding key: String?) throws -> (keys: Int, bytes: Int) {
        var (keys, bytes) = (0, 0)
        for row in try sql.rows(
            "SELECT key, value FROM kv WHERE container_id = ? AND value IS NOT NULL AND key IS DISTINCT FROM ?",
            container, key)
        {
            let name = try row.text("key")
            keys += 1
            bytes +=
                name.utf8.count + (try openedValue(try row.text("value"), container: container, key: name)).utf8.count
        }
        return (keys, bytes)
    }

    /// A key-value row as an entry, its value opened if it was sealed.
    func keyValueEntry(row: SQLRow, container: Int64) throws -> KeyValueEntry {
        let key = try row.text("key")
        return KeyValueEntry(
            key: key,
            value: try row.optionalText("value").map {
                try JSONValue(parsing: try openedValue($0, container: container, key: key))
            },
            timestampNs: try row.int("timestamp_ns"), device: try row.text("device"), sequence: try row.int("sequence"))
    }

    /// Marks a sealed value in the `value` column: no JSON text starts with it.
    static let sealedValuePrefix = "~"

    /// A value's JSON text as the kv table keeps it: with keys, sealed (bound to its container
    /// and key) and written as `~` and base64.
    func storedValue(_ text: String, container: Int64, key: String) -> String {
        guard let sealing else { return text }
        return Self.sealedValuePrefix
            + Data(sealing.seal(Array(text.utf8), context: Self.valueContext(container: container, key: key)))
            .base64EncodedString()
    }

    /// A value's JSON text from what the kv table keeps.
    func openedValue(_ stored: String, container: Int64, key: String) throws -> String {
        guard stored.hasPrefix(Self.sealedValuePrefix) else { return stored }
        let what = "the value of key \"\(key)\" in container \(container)"
        guard let sealed = Data(base64Encoded: String(stored.dropFirst())) else {
            throw XferError(.corruptChunk, "\(what) is damaged: not a sealed value")
        }
        let plain = try SealingKeys.openIfSealed(
            Array(sealed)[...], keys: sealing, context: Self.valueContext(container: container, key: key), what: what)
        return String(decoding: plain, as: UTF8.self)
    }

    static func valueContext(container: Int64, key: String) -> [UInt8] {
        Array("xfer kv value v1 \(container) ".utf8) + Array(key.utf8)
    }
}
