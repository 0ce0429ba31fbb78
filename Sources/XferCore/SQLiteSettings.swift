import CXferShims

/// SQLite settings a connection's owner cannot make from Swift (`sqlite3_db_config` is variadic).
package enum SQLiteSettings {
    /// Keeps the write-ahead log when the connection closes instead of copying it into the
    /// database first (`SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE`). `connection` is a `sqlite3 *`.
    package static func skipCheckpointOnClose(_ connection: UnsafeMutableRawPointer?) {
        _ = cxfer_sqlite_no_checkpoint_on_close(connection)
    }
}
