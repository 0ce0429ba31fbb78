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
        // Two servers starting at once must not both make one (an exclusive advisory lock on
        // PostgreSQL; SQLite's writer is one already).
        try sql.lockDeletions(exclusive: true)
        let rows = try sql.rows("SELECT key_id, wrapped FROM sealing_index ORDER BY key_id", [])
        for row in rows {
            guard let id = SealingKeyID(hex: try row.text("key_id")), keys.byID[id] != nil else { continue }
            let key = try keys.open(try row.blob("wrapped"), context: Self.indexKeyContext, what: "the store's index key (sealed with \(id))")
            // Kept sealed with the current key too, so it opens as long as the data does.
            if try !rows.contains(where: { try $0.text("key_id") == keys.current.id.description }) {
                try wrapIndexKey(key, keys)
            }
            return try ChunkIDCipher(key: key)
        }
        guard rows.isEmpty else {
            let names = try rows.map { try $0.text("key_id") }.joined(separator: ", ")
            throw XferError(.invalidConfiguration, "the store's index key is sealed with encryption key \(names), which was not given; nothing was changed")
        }
        var generator = SystemRandomNumberGenerator()
        let key = (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
        let cipher = try ChunkIDCipher(key: key)
        try wrapIndexKey(key, keys)
        try encipherStoredIDs(cipher)
        return cipher
    }

    /// Keeps `key` sealed with the current one of `keys` (recorded as a key in use).
    private func wrapIndexKey(_ key: [UInt8], _ keys: SealingKeys) throws {
        try noteSealing(with: keys.current.id)
        try sql.rows("INSERT INTO sealing_index (key_id, wrapped) VALUES (?, ?)",
                     [.text(keys.current.id.description), .blob(keys.seal(key, context: Self.indexKeyContext))])
    }

    /// Rewrites every stored chunk id enciphered (a store given keys for the first time).
    private func encipherStoredIDs(_ cipher: ChunkIDCipher) throws {
        // This transaction binds ids as they are (it has no cipher): the new bytes go as blobs.
        for row in try sql.rows("SELECT account_id, id FROM account_chunks", []) {
            let id = try row.blob("id")
            guard let chunk = ChunkID(bytes: id) else { continue }
            try sql.rows("UPDATE account_chunks SET id = ? WHERE account_id = ? AND id = ?",
                         [.blob(cipher.encipher(chunk)), .int(try row.int("account_id")), .blob(id)])
        }
        for table in ["chunk_locations", "chunk_deletions"] {
            for row in try sql.rows("SELECT id FROM \(table)", []) {
                let id = try row.blob("id")
                guard let chunk = ChunkID(bytes: id) else { continue }
                try sql.rows("UPDATE \(table) SET id = ? WHERE id = ?", [.blob(cipher.encipher(chunk)), .blob(id)])
            }
        }
    }
}
