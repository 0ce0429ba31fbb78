import GRDB

// The state database's schema: each step a migration, applied in order when a database opens
// (``StateDatabase/init(path:)``); a step once shipped is never changed, only followed.
extension StateDatabase {
    /// Every migration of the state database, in order.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE root (path TEXT NOT NULL);
                    CREATE TABLE files (
                        path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                        inode INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, chunks BLOB NOT NULL) WITHOUT ROWID;
                    CREATE TABLE documents (
                        server TEXT NOT NULL, container TEXT NOT NULL, path TEXT NOT NULL,
                        version INTEGER NOT NULL, manifest BLOB NOT NULL,
                        PRIMARY KEY (server, container, path)) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v2: several roots per database, sync state") { db in
            // v1 held one root, named in `root`; its rows move under that name.
            try db.execute(
                sql: """
                    CREATE TABLE root_files (
                        root TEXT NOT NULL, path TEXT NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
                        inode INTEGER NOT NULL, ctime_ns INTEGER NOT NULL, chunks BLOB NOT NULL,
                        PRIMARY KEY (root, path)) WITHOUT ROWID;
                    CREATE TABLE root_documents (
                        root TEXT NOT NULL, server TEXT NOT NULL, container TEXT NOT NULL, path TEXT NOT NULL,
                        version INTEGER NOT NULL, manifest BLOB NOT NULL,
                        PRIMARY KEY (root, server, container, path)) WITHOUT ROWID;
                    INSERT INTO root_files SELECT (SELECT path FROM root LIMIT 1), * FROM files WHERE EXISTS (SELECT 1 FROM root);
                    INSERT INTO root_documents SELECT (SELECT path FROM root LIMIT 1), * FROM documents WHERE EXISTS (SELECT 1 FROM root);
                    DROP TABLE files;
                    DROP TABLE documents;
                    DROP TABLE root;
                    CREATE TABLE sync_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
                    CREATE TABLE sync_documents (
                        path TEXT PRIMARY KEY, kind TEXT NOT NULL, evicted INTEGER NOT NULL DEFAULT 0,
                        size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, last_used_ns INTEGER NOT NULL) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v3: a synced file's stamp beside its version, the server's view") { db in
            // `file_stamp`: the stamp of a single-file document when its version was recorded,
            // written in the same transaction, so a pass can tell it unchanged without its manifest.
            // `sync_remote`: the server's documents as last seen (a listing brought up to date
            // from the change feed), so a pass need not list everything again.
            try db.execute(
                sql: """
                    ALTER TABLE root_documents ADD COLUMN file_stamp TEXT;
                    CREATE TABLE sync_remote (
                        path TEXT PRIMARY KEY, version INTEGER NOT NULL, state TEXT NOT NULL, kind TEXT NOT NULL,
                        size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, mode INTEGER NOT NULL, manifest_digest TEXT,
                        sequence INTEGER NOT NULL, conflicts TEXT) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v4: recently synced small chunks") { db in
            // ChunkCache: what a changed small file is sent against. The index covers the total
            // and the eviction order, so neither reads the payloads.
            try db.execute(
                sql: """
                    CREATE TABLE chunk_cache (
                        id BLOB NOT NULL UNIQUE, length INTEGER NOT NULL, encoding INTEGER NOT NULL,
                        payload BLOB NOT NULL, size INTEGER NOT NULL, used_ns INTEGER NOT NULL);
                    CREATE INDEX chunk_cache_used ON chunk_cache (used_ns, size);
                    """)
        }
        migrator.registerMigration("v5: large manifests in parts") { db in
            // A manifest over ClientState.manifestPart bytes is stored here in parts (its row in
            // root_documents holding an empty blob): SQLite copies a blob twice as it binds and
            // writes it, so parts bound those copies. Removing a document removes its parts.
            try db.execute(
                sql: """
                    CREATE TABLE root_manifest_parts (
                        root TEXT NOT NULL, server TEXT NOT NULL, container TEXT NOT NULL, path TEXT NOT NULL,
                        part INTEGER NOT NULL, bytes BLOB NOT NULL,
                        PRIMARY KEY (root, server, container, path, part)) WITHOUT ROWID;
                    CREATE TRIGGER root_documents_parts AFTER DELETE ON root_documents BEGIN
                        DELETE FROM root_manifest_parts
                        WHERE root = OLD.root AND server = OLD.server AND container = OLD.container AND path = OLD.path;
                    END;
                    """)
        }
        migrator.registerMigration("v6: the server's digest of a synced version") { db in
            // Of an end-to-end encrypted container's version: its carrier's digest (NULL: the manifest's).
            try db.execute(sql: "ALTER TABLE root_documents ADD COLUMN server_digest TEXT")
        }
        migrator.registerMigration("v7: the highest version seen current, the latest value seen") { db in
            // SeenVersions and SeenValues: never lowered, never forgotten with a document or a server change.
            try db.execute(
                sql: """
                    CREATE TABLE seen_versions (
                        server TEXT NOT NULL, container TEXT NOT NULL, path TEXT NOT NULL, version INTEGER NOT NULL,
                        PRIMARY KEY (server, container, path)) WITHOUT ROWID;
                    CREATE TABLE seen_values (
                        server TEXT NOT NULL, container TEXT NOT NULL, key TEXT NOT NULL,
                        timestamp_ns INTEGER NOT NULL, device TEXT NOT NULL,
                        PRIMARY KEY (server, container, key)) WITHOUT ROWID;
                    """)
        }
        return migrator
    }
}
