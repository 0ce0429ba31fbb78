import Foundation
import GRDB
import XferCore
import XferProtocol

/// A file the state remembers: its stamp and chunks.
public struct KnownFile: Sendable, Hashable {
    /// Path relative to the root ("" when the root is the file).
    public var path: String
    /// The stamp when its chunks were computed or written.
    public var stamp: FileStamp
    /// Its chunks in order.
    public var chunks: [Manifest.ChunkReference]
}

/// A document version this root holds.
public struct SyncedDocument: Sendable, Hashable {
    /// The version number.
    public var version: Int64
    /// Its manifest.
    public var manifest: Manifest
    /// The manifest digest the server records for it when that is not the manifest's own (an
    /// end-to-end encrypted container's carrier, docs/FORMAT.md "End-to-end documents"), as
    /// the server gave it; `nil`, the manifest's.
    public var serverDigest: String? = nil

    /// A version and its manifest (`serverDigest`: the server's digest for it, when not the manifest's).
    public init(version: Int64, manifest: Manifest, serverDigest: String? = nil) {
        self.version = version
        self.manifest = manifest
        self.serverDigest = serverDigest
    }

    /// Whether the server holds this version as this root knows it: `answer` (the server's
    /// description of that version number, `nil` if it has none) is committed and has the same
    /// manifest. Another server at the same address, or one restored from an older backup, may
    /// answer for the number with other content, or not at all. What this root skips sending,
    /// or deletes locally, on the ground that the server has it, waits for this.
    /// - Parameter digest: The digest the server records for this version, when it is not the
    ///   manifest's own nor ``serverDigest`` (``Remote/serverDigest(of:at:)``).
    public func isHeld(by answer: DocumentInfo?, digest: String? = nil) -> Bool {
        guard let answer, answer.version == version, [.current, .superseded, .conflict].contains(answer.state) else {
            return false
        }
        return answer.manifestDigest == (digest ?? serverDigest ?? manifest.digest.hex)
    }
}

/// A client state database: one SQLite file holding the state of one or more roots (a pushed
/// path or pull destination has its own; a synced directory keeps all its documents in one).
public final class StateDatabase: Sendable {
    /// The database file.
    public let path: String
    let queue: DatabaseQueue

    /// Opens (creating and migrating) a state database.
    /// - Throws: `io` if it cannot be opened.
    public init(path: String) throws {
        self.path = path
        try? FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(30)
            // The log is not copied into the database when the connection closes: a command
            // that wrote a few hundred pages (a pull's rows and cached chunks) would wait for
            // that copy and its two fsyncs on its way out. The log stays whole beside the
            // database and a later commit's automatic checkpoint (every 1,000 pages) copies it.
            configuration.prepareDatabase { db in
                SQLiteSettings.skipCheckpointOnClose(UnsafeMutableRawPointer(db.sqliteConnection))
            }
            queue = try DatabaseQueue(path: path, configuration: configuration)
            // WAL with synchronous NORMAL: a commit is not fsynced on its own (the log is, at
            // checkpoints). A power cut may lose the last few transactions, never consistency,
            // and a state that goes back loses nothing: the files and the server are the truth,
            // so a forgotten pull or push only looks like a local change and is pushed again
            // (the server keeps the same content as one version). What each synced document
            // then costs is its file's own fsync, not three.
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // The log left at close is cut back to 4 MiB once checkpointed.
                try db.execute(sql: "PRAGMA journal_size_limit = 4194304")
            }
            try Self.migrator.migrate(queue)
        } catch {
            throw XferError(.io, "cannot open the client state \(path)", cause: DescribedError(error))
        }
    }

    /// Runs `body` in a transaction, or inside the one a ``batch(_:)`` on this thread has open.
    func run<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.unsafeReentrantWrite { db in
                if db.isInsideTransaction { return try body(db) }
                var result: T? = nil
                try db.inTransaction {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(.io, "the client state database \(path) failed", cause: DescribedError(error))
        }
    }
}

extension StateDatabase {
    /// Runs `body` as one transaction: every state change it makes through this database (on
    /// this thread) is committed together, or none is. What a batch of documents records.
    public func batch<T>(_ body: () throws -> T) throws -> T {
        try run { _ in try body() }
    }
}

/// The client's state for one synced root (a pushed path, a pull destination, or a document
/// in a synced directory), in a ``StateDatabase``.
///
/// It remembers each file's stamp and chunk list (so unchanged files are not read again, and
/// so a pull can reuse chunks already on disk) and which document version the root holds.
public final class ClientState: Sendable {
    /// The root's absolute path.
    public let root: String
    /// The database it lives in.
    public let database: StateDatabase

    /// Opens (creating) the state of a root in its own database under the state directory,
    /// named by a hash of the root's absolute path.
    /// - Throws: `io` if the database cannot be opened.
    /// - Parameter namespace: Whose chunk ids its lists hold, when not plain SHA-256 ones: an
    ///   end-to-end encrypted container's key id (``Remote/clientState(root:)``). A root pushed
    ///   to or pulled from such a container has a state of its own, so no chunk list computed
    ///   under one key (or none) is ever taken for another's.
    public convenience init(root: String, stateDirectory: String, namespace: String? = nil) throws {
        let root = ClientState.absolute(root)
        let name = String(ChunkID.of(Array((root + (namespace.map { "\u{0}" + $0 } ?? "")).utf8)).hex.prefix(24))
        try self.init(root: root, database: StateDatabase(path: "\(stateDirectory)/roots/\(name).sqlite"))
    }

    /// The state of a root inside a shared database.
    public init(root: String, database: StateDatabase) {
        self.root = ClientState.absolute(root)
        self.database = database
    }

    /// The default state directory: `$XFER_STATE_DIR`, else `$XDG_STATE_HOME/xfer`, else `~/.local/state/xfer`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["XFER_STATE_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty { return xdg + "/xfer" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/xfer"
    }

    /// Every remembered file.
    public func files() throws -> [String: KnownFile] {
        var result: [String: KnownFile] = [:]
        try forEachFile { result[$0.path] = $0 }
        return result
    }

    /// Calls `body` with each remembered file in bytewise path order, read one row at a time
    /// (a root may remember hundreds of thousands: no array of rows is built).
    public func forEachFile(_ body: (KnownFile) throws -> Void) throws {
        let root = root
        try database.run { db in
            // The primary key's order (BINARY collation: UTF-8 bytes), so nothing is sorted.
            let rows = try Row.fetchCursor(
                db, sql: "SELECT * FROM root_files WHERE root = ? ORDER BY path", arguments: [root])
            while let row = try rows.next() { try body(try Self.knownFile(row)) }
        }
    }

    /// Calls `body` with each remembered file's path and stamp (no chunk list), in bytewise
    /// path order, one row at a time.
    public func forEachStamp(_ body: (String, FileStamp) throws -> Void) throws {
        let root = root
        try database.run { db in
            let rows = try Row.fetchCursor(
                db, sql: "SELECT path, size, mtime_ns, inode, ctime_ns FROM root_files WHERE root = ? ORDER BY path",
                arguments: [root])
            while let row = try rows.next() {
                try body(row["path"], Self.stamp(row))
            }
        }
    }

    /// Every remembered file's stamp (without its chunk list): enough to tell what changed.
    public func stamps() throws -> [String: FileStamp] {
        var result: [String: FileStamp] = [:]
        try forEachStamp { result[$0] = $1 }
        return result
    }

    /// Every remembered file of every root in the database that still looks as it did, by
    /// absolute path: where a pull can find chunks without downloading them.
    public func sources() throws -> [(path: String, file: KnownFile)] {
        try database.run { db in
            try Row.fetchAll(db, sql: "SELECT * FROM root_files").compactMap { row in
                let file = try Self.knownFile(row)
                let root: String = row["root"]
                let path = file.path.isEmpty ? root : root + "/" + file.path
                return FileStamp.of(path) == file.stamp ? (path, file) : nil
            }
        }
    }

    /// Replaces the records of these files.
    public func record(files: some Sequence<KnownFile> & Sendable) throws {
        let root = root
        try database.run { db in _ = try Self.insert(files, root: root, into: db) }
    }

    /// The version of a document this root holds, if any.
    public func document(server: String, container: ContainerName, path: DocumentPath) throws -> SyncedDocument? {
        let root = root
        return try database.run { db in
            // Read through a cursor: the blob is copied once, out of SQLite's row (a tree's
            // manifest may be megabytes).
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT version, manifest, server_digest FROM root_documents WHERE root = ? AND server = ? AND container = ? AND path = ?
                    """, arguments: [root, server, container.value, path.value])
            guard let row = try rows.next() else { return nil }
            let version: Int64 = row["version"]
            let serverDigest: String? = row["server_digest"]
            var bytes = try row.withUnsafeData(named: "manifest") { data in data.map { SpillArray($0) } ?? [] }
            if bytes.isEmpty {
                // A large manifest, in parts: each copied once, into one array (on disk once large).
                let key: StatementArguments = [root, server, container.value, path.value]
                let where_ = "WHERE root = ? AND server = ? AND container = ? AND path = ?"
                bytes.reserveCapacity(
                    try Int.fetchOne(
                        db, sql: "SELECT SUM(length(bytes)) FROM root_manifest_parts \(where_)", arguments: key) ?? 0)
                let parts = try Row.fetchCursor(
                    db, sql: "SELECT bytes FROM root_manifest_parts \(where_) ORDER BY part", arguments: key)
                while let part = try parts.next() {
                    try part.withUnsafeData(atIndex: 0) { data in if let data { bytes.append(contentsOf: data) } }
                }
            }
            return SyncedDocument(
                version: version, manifest: try Self.storedManifest(bytes), serverDigest: serverDigest)
        }
    }

    /// The version of a document this root holds, if any, without reading its manifest.
    public func documentVersion(server: String, container: ContainerName, path: DocumentPath) throws -> Int64? {
        let root = root
        return try database.run { db in
            try Int64.fetchOne(
                db,
                sql: "SELECT version FROM root_documents WHERE root = ? AND server = ? AND container = ? AND path = ?",
                arguments: [root, server, container.value, path.value])
        }
    }

    /// Records that this root now holds `document`, whose files are now exactly `files`, in one transaction.
    public func recordSynced(
        server: String, container: ContainerName, path: DocumentPath, document: SyncedDocument,
        files: some Sequence<KnownFile> & Sendable
    ) throws {
        let root = root
        try database.run { db in
            try db.execute(sql: "DELETE FROM root_files WHERE root = ?", arguments: [root])
            let (first, only) = try Self.insert(files, root: root, into: db)
            // (A file document: the stamp recorded just now; the files are taken once, a pull's look at the disk.)
            let single = document.manifest.kind == .file && only && first!.path.isEmpty ? first!.stamp.text : nil
            try Self.store(document, single: single, key: [root, server, container.value, path.value], in: db)
        }
    }

    /// Holds `files` (a package's, as a pull staged them, before it publishes them) aside for
    /// ``recordStagedSynced(server:container:path:document:)``, in a table of this process's
    /// connection that nothing else reads. A pull does it while the disk makes the staging copy
    /// durable, so the rows cost it no time after; and their stamps are the staged files',
    /// taken before the copy is renamed into place (which changes no file's stamp), so a file
    /// written once it is published is never recorded as the version's.
    public func stageSynced(files: some Sequence<KnownFile> & Sendable) throws {
        let root = root
        try database.run { db in
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS staged_files AS SELECT * FROM main.root_files WHERE 0")
            try db.execute(sql: "DELETE FROM temp.staged_files WHERE root = ?", arguments: [root])
            try Self.insert(files, root: root, into: db, table: "temp.staged_files")
        }
    }

    /// Records that this root now holds the package `document`, its files' rows those that
    /// ``stageSynced(files:)`` held aside (in one statement). One transaction.
    public func recordStagedSynced(
        server: String, container: ContainerName, path: DocumentPath, document: SyncedDocument
    ) throws {
        let root = root
        try database.run { db in
            try db.execute(sql: "DELETE FROM root_files WHERE root = ?", arguments: [root])
            try db.execute(sql: "CREATE TEMP TABLE IF NOT EXISTS staged_files AS SELECT * FROM main.root_files WHERE 0")
            try db.execute(
                sql: "INSERT INTO main.root_files SELECT * FROM temp.staged_files WHERE root = ?", arguments: [root])
            try db.execute(sql: "DELETE FROM temp.staged_files WHERE root = ?", arguments: [root])
            try Self.store(document, single: nil, key: [root, server, container.value, path.value], in: db)
        }
    }

    /// Records that this root now holds `document`, made from this root's files as they are
    /// recorded now: those read for it by ``record(files:)``, the others unchanged since their
    /// rows were written (a push matched each one's stamp). Only the rows of paths that are no
    /// longer files of the document go; nothing is written again. One transaction.
    public func recordPushed(server: String, container: ContainerName, path: DocumentPath, document: SyncedDocument)
        throws
    {
        let root = root
        try database.run { db in
            // Both in path order: the rows are walked along the manifest's entries, no map made.
            let entries = document.manifest.entries
            var stale: [String] = []
            var cursor = 0
            let rows = try String.fetchCursor(
                db, sql: "SELECT path FROM root_files WHERE root = ? ORDER BY path", arguments: [root])
            while let file = try rows.next() {
                let kept =
                    PathOrder.seek(&cursor, count: entries.count, to: file, pathAt: { entries.path(at: $0) })
                    && entries.kind(at: cursor) == .file
                if !kept { stale.append(file) }
            }
            let remove = try db.cachedStatement(sql: "DELETE FROM root_files WHERE root = ? AND path = ?")
            for file in stale { try remove.execute(arguments: [root, file]) }
            var single: String? = nil
            if document.manifest.kind == .file,
                let row = try Row.fetchOne(
                    db, sql: "SELECT size, mtime_ns, inode, ctime_ns FROM root_files WHERE root = ? AND path = ''",
                    arguments: [root])
            {
                single = Self.stamp(row).text
            }
            try Self.store(document, single: single, key: [root, server, container.value, path.value], in: db)
        }
    }

    /// Writes `document` as the version the root holds (`single`: a file document's stamp).
    private static func store(
        _ document: SyncedDocument, single: String?, key: [any DatabaseValueConvertible], in db: Database
    ) throws {
        let single =
            document.manifest.kind == .directory
            ? LocalSnapshot.directoryStamp(mode: document.manifest.entries[0].mode) : single
        // Stored as a compressed delta against nothing, a large one in parts (SQLite copies
        // a blob twice as it binds and writes it; a tree's manifest may be megabytes), each
        // bound without another copy. A replaced row's parts go first (REPLACE does not fire
        // the delete trigger).
        try db.execute(
            sql: "DELETE FROM root_manifest_parts WHERE root = ? AND server = ? AND container = ? AND path = ?",
            arguments: StatementArguments(key))
        // (A delta past the size a delta may be read at, which only a manifest near every
        // limit could make, is stored as the canonical encoding, which is always readable.)
        var stored = document.manifest.compressedDelta(against: nil)
        if stored.count > Manifest.maximumEncodedSize { stored = SpillArray(document.manifest.encoded()) }
        let parts =
            stored.count > Self.manifestPart ? Array(stride(from: 0, to: stored.count, by: Self.manifestPart)) : []
        try Self.withBlob(parts.isEmpty ? stored[...] : stored[0..<0]) { blob in
            try db.execute(
                sql: "INSERT OR REPLACE INTO root_documents VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                arguments: StatementArguments(key + [document.version, blob, single, document.serverDigest]))
        }
        for (number, start) in parts.enumerated() {
            try Self.withBlob(stored[start..<min(stored.count, start + Self.manifestPart)]) { blob in
                try db.execute(
                    sql: "INSERT INTO root_manifest_parts VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: StatementArguments(key + [number, blob]))
            }
        }
    }

    /// The largest manifest stored in its document's row; larger ones go in parts of this size.
    static let manifestPart = 1 << 20

    /// Calls `body` with `bytes` as `Data` that shares their memory (for binding, which copies).
    private static func withBlob<R>(_ bytes: Slice<SpillArray<UInt8>>, _ body: (Data) throws -> R) throws -> R {
        try bytes.base.withUnsafeBufferPointer { whole in
            let raw = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: whole[bytes.startIndex..<bytes.endIndex]))
            guard let base = raw.baseAddress, !raw.isEmpty else { return try body(Data()) }
            return try body(
                Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: raw.count, deallocator: .none))
        }
    }

    /// A manifest as ``recordSynced(server:container:path:document:files:)`` stores it: a
    /// compressed delta against nothing, or (written by earlier releases) its canonical encoding.
    static func storedManifest(_ bytes: SpillArray<UInt8>) throws -> Manifest {
        Manifest.isDelta(bytes) ? try Manifest(applying: bytes, to: nil) : try Manifest(decoding: Array(bytes))
    }

    /// Forgets everything about this root (its document was deleted).
    public func forget() throws {
        let root = root
        try database.run { db in
            try db.execute(sql: "DELETE FROM root_files WHERE root = ?", arguments: [root])
            try db.execute(sql: "DELETE FROM root_documents WHERE root = ?", arguments: [root])
        }
    }

    private static func knownFile(_ row: Row) throws -> KnownFile {
        KnownFile(path: row["path"], stamp: stamp(row), chunks: try decodeChunks(row["chunks"]))
    }

    /// The stamp in a `root_files` row.
    private static func stamp(_ row: Row) -> FileStamp {
        FileStamp(
            size: row["size"], mtimeNanoseconds: row["mtime_ns"], inode: UInt64(bitPattern: row["inode"]),
            ctimeNanoseconds: row["ctime_ns"])
    }

    /// Records `files`, taking each once from the sequence (a lazy one may look at the disk).
    /// - Returns: The first file and whether it was the only one.
    @discardableResult
    private static func insert(
        _ files: some Sequence<KnownFile>, root: String, into db: Database,
        table: String = "root_files"
    ) throws -> (first: KnownFile?, only: Bool) {
        let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO \(table) VALUES (?, ?, ?, ?, ?, ?, ?)")
        var first: KnownFile? = nil
        var count = 0
        for file in files {
            try insert.execute(arguments: [
                root, file.path, file.stamp.size, file.stamp.mtimeNanoseconds,
                Int64(bitPattern: file.stamp.inode), file.stamp.ctimeNanoseconds,
                encodeChunks(file.chunks)
            ])
            if count == 0 { first = file }
            count += 1
        }
        return (first, count == 1)
    }

    static func encodeChunks(_ chunks: [Manifest.ChunkReference]) -> Data {
        var data = Data(capacity: chunks.count * 36)
        for chunk in chunks {
            withUnsafeBytes(of: UInt32(chunk.length).littleEndian) { data.append(contentsOf: $0) }
            chunk.id.withUnsafeBytes { data.append(contentsOf: $0) }
        }
        return data
    }

    static func decodeChunks(_ data: Data) throws -> [Manifest.ChunkReference] {
        guard data.count % 36 == 0 else {
            throw XferError(.io, "the client state has a damaged chunk list; delete the state directory")
        }
        // Read in place (a no-op push reads every file's list: 200,000 of them).
        return data.withUnsafeBytes { raw in
            stride(from: 0, to: raw.count, by: 36).map { start in
                let length = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: start, as: UInt32.self)))
                return Manifest.ChunkReference(
                    id: ChunkID(bytes: UnsafeRawBufferPointer(rebasing: raw[(start + 4)..<(start + 36)]))!,
                    length: length)
            }
        }
    }

    /// An absolute form of a path, normalized by its text alone: empty and `.` components
    /// dropped, `..` taking away the component before it. Nothing on disk is consulted, so no
    /// symlink is resolved (a link below a synced root must never redirect where xfer writes).
    public static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var components: [Substring] = []
        for component in full.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".": continue
            case "..": if !components.isEmpty { components.removeLast() }
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }
}
