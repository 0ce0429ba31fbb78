import XferCore

// The account's metadata budget (``StorePolicy/accountMetadataBytes``), one rule for both
// backends: checked inside each write that adds such metadata, after it, so what is counted
// includes the write and a refusal rolls it back.
extension MetadataTransaction {
    /// Characters of key-value entries, WebDAV dead properties and unexpired lock owners the
    /// account keeps, in all its containers.
    func metadataBytes(account: Int64, now: Int64) throws -> Int64 {
        try sql.int(
            """
            SELECT (SELECT COALESCE(SUM(LENGTH(k.key) + COALESCE(LENGTH(k.value), 0)), 0)
                      FROM kv k JOIN containers c ON c.id = k.container_id WHERE c.account_id = ?)
                 + (SELECT COALESCE(SUM(LENGTH(p.xml)), 0)
                      FROM dav_properties p JOIN containers c ON c.id = p.container_id WHERE c.account_id = ?)
                 + (SELECT COALESCE(SUM(LENGTH(COALESCE(l.owner, ''))), 0)
                      FROM dav_locks l JOIN containers c ON c.id = l.container_id WHERE c.account_id = ? AND l.expires_at > ?)
            """, account, account, account, now) ?? 0
    }

    /// Throws `quota_exceeded` when the account's metadata is past its budget.
    func checkMetadataBudget(account: Int64) throws {
        try AccountLimits.checkMetadata(bytes: try metadataBytes(account: account, now: try clock()), policy: policy)
    }
}
