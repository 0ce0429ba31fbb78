import Foundation
import XferCore

// The store's index key: what chunk ids are enciphered under at rest (``ChunkIDCipher``).
extension MetadataTransaction {
    static let indexKeyContext = Array("xfer index key v1".utf8)

    /// The store's index key, opened with one of `keys`; made when the store has none, and then
    /// every chunk id stored so far is enciphered under it in this same transaction (a store
    /// keeps its ids one way only).
    /// - Throws: `invalid_configuration` if the store's index key is sealed only with keys not
    ///   among `keys` (nothing is changed).
    func indexKey(_ keys: SealingKeys) throws -> ChunkIDCipher {
        // Two servers starting at once must not both make one, and no transaction binding
        // plain ids may straddle the change (exclusive advisory locks on PostgreSQL, the index
        // key's before the deletions', as every transaction takes them; SQLite's writer is one).
        try sql.lockIndexKey(exclusive: true)
        try sql.lockDeletions(exclusive: true)
        let rows = try sql.rows("SELECT key_id, wrapped FROM sealing_index ORDER BY key_id", [])
        for row in rows {
            guard let id = SealingKeyID(hex: try row.text("key_id")), keys.byID[id] != nil else { continue }
            let key = try keys.open(
                try row.blob("wrapped"), context: Self.indexKeyContext,
                what: "the store's index key (sealed with \(id))")
            // Kept sealed with the current key too, so it opens as long as the data does.
            if try !rows.contains(where: { try $0.text("key_id") == keys.current.id.description }) {
                try wrapIndexKey(key, keys)
            }
            return try ChunkIDCipher(key: key)
        }
        guard rows.isEmpty else {
            let names = try rows.map { try $0.text("key_id") }.joined(separator: ", ")
            throw XferError(
                .invalidConfiguration,
                "the store's index key is sealed with encryption key \(names), which was not given; nothing was changed"
            )
        }
        // A store that recorded keys has its index key sealed with them: none found means the
        // keys given are not the store's, and nothing may be enciphered under them.
        let recorded = try sql.rows("SELECT id FROM sealing_keys", []).map { try $0.text(0) }
        let missing = recorded.filter { SealingKeyID(hex: $0).map { keys.byID[$0] == nil } ?? true }
        guard missing.isEmpty else {
            throw XferError(
                .invalidConfiguration,
                "the store's data is sealed with encryption key \(missing.joined(separator: ", ")), which was not given; nothing was changed"
            )
        }
        let key = ChunkIDCipher.newKey()
        let cipher = try ChunkIDCipher(key: key)
        try wrapIndexKey(key, keys)
        try encipherStoredIDs(cipher)
        return cipher
    }

    /// Keeps `key` sealed with the current one of `keys` (recorded as a key in use).
    private func wrapIndexKey(_ key: [UInt8], _ keys: SealingKeys) throws {
        try noteSealing(with: keys.current.id)
        try sql.rows(
            "INSERT INTO sealing_index (key_id, wrapped) VALUES (?, ?)",
            [.text(keys.current.id.description), .blob(keys.seal(key, context: Self.indexKeyContext))])
    }

    /// Rewrites every stored chunk id enciphered (a store given keys for the first time): the
    /// plain ids are copied aside into a temporary table (the database's memory, not ours) and
    /// rewritten from it a page at a time, one statement a page.
    private func encipherStoredIDs(_ cipher: ChunkIDCipher) throws {
        // This transaction binds ids as they are (it has no cipher): the new bytes go as blobs.
        for (table, byAccount) in [("account_chunks", true), ("chunk_locations", false), ("chunk_deletions", false)] {
            try sql.rows(
                "CREATE TEMPORARY TABLE xfer_plain_ids AS SELECT \(byAccount ? "account_id" : "0 AS account_id"), id FROM \(table)",
                [])
            var after: (account: Int64, id: [UInt8]) = (-1, [])
            while true {
                let page = try sql.rows(
                    """
                    SELECT account_id, id FROM xfer_plain_ids WHERE (account_id, id) > (?, ?) ORDER BY account_id, id LIMIT ?
                    """, [.int(after.account), .blob(after.id), .int(Int64(sqlBatchSize / 3))])
                guard let last = page.last else { break }
                var values: [SQLValue] = []
                for row in page {
                    let id = try row.blob(1)
                    guard let chunk = ChunkID(bytes: id) else { continue }
                    values += [.int(try row.int(0)), .blob(id), .blob(cipher.encipher(chunk))]
                }
                if !values.isEmpty {
                    try sql.rows(
                        """
                        UPDATE \(table) SET id = v.column3 FROM (VALUES \(sqlRows("?, ?, ?", count: values.count / 3))) AS v
                        WHERE \(byAccount ? "\(table).account_id = v.column1 AND " : "")\(table).id = v.column2
                        """, values)
                }
                after = (try last.int(0), try last.blob(1))
            }
            try sql.rows("DROP TABLE xfer_plain_ids", [])
        }
    }
}
