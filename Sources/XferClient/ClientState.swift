import Foundation
import GRDB
import XferCore
import XferProtocol

/// What a file looked like when its chunks were last computed: if all four still match,
/// the file is unchanged and is not read again.
public struct FileStamp: Sendable, Hashable {
    /// Size in bytes.
    public var size: Int64
    /// Modification time, nanoseconds.
    public var mtimeNanoseconds: Int64
    /// Inode number.
    public var inode: UInt64
    /// Status change time, nanoseconds (catches edits that restore the mtime).
    public var ctimeNanoseconds: Int64

    /// The stamp of a path (lstat), or `nil` if it does not exist.
    public static func of(_ path: String) -> FileStamp? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return FileStamp(size: Int64(info.st_size),
                         mtimeNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                         inode: UInt64(info.st_ino),
                         ctimeNanoseconds: Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec))
    }
}

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
}

/// The client's state for one synced root (a pushed path or a pull destination): an SQLite
/// database under the state directory, named by a hash of the root's absolute path.
///
/// It remembers each file's stamp and chunk list (so unchanged files are not read again, and
/// so a pull can reuse chunks already on disk) and which document version the root holds.
public final class ClientState: Sendable {
    /// The root's absolute path.
    public let root: String
    private let queue: DatabaseQueue

    /// Opens (creating) the state of a root.
    /// - Parameters:
    ///   - root: The root's path (made absolute).
    ///   - stateDirectory: Where state databases live.
    /// - Throws: `io` if the database cannot be opened.
    public init(root: String, stateDirectory: String) throws {
        self.root = ClientState.absolute(root)
        let directory = stateDirectory + "/roots"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let name = String(ChunkID.of(Array(self.root.utf8)).hex.prefix(24))
        let path = "\(directory)/\(name).sqlite"
        do {
            var configuration = Configuration()
            configuration.busyMode = .timeout(30)
            queue = try DatabaseQueue(path: path, configuration: configuration)
            var migrator = DatabaseMigrator()
            migrator.registerMigration("v1") { db in
                try db.execute(sql: """
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
            try migrator.migrate(queue)
            let root = self.root
            try queue.write { db in
                if try String.fetchOne(db, sql: "SELECT path FROM root") == nil {
                    try db.execute(sql: "INSERT INTO root (path) VALUES (?)", arguments: [root])
                }
            }
        } catch {
            throw XferError(.io, "cannot open the client state \(path)", cause: DescribedError(error))
        }
    }

    /// The default state directory: `$XFER_STATE_DIR`, else `$XDG_STATE_HOME/xfer`, else `~/.local/state/xfer`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let explicit = environment["XFER_STATE_DIR"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty { return xdg + "/xfer" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.local/state/xfer"
    }

    /// Every remembered file.
    public func files() throws -> [String: KnownFile] {
        try run { db in
            var result: [String: KnownFile] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM files") {
                let file = KnownFile(path: row["path"],
                                     stamp: FileStamp(size: row["size"], mtimeNanoseconds: row["mtime_ns"],
                                                      inode: UInt64(bitPattern: row["inode"]), ctimeNanoseconds: row["ctime_ns"]),
                                     chunks: try Self.decodeChunks(row["chunks"]))
                result[file.path] = file
            }
            return result
        }
    }

    /// Replaces the records of these files.
    public func record(files: [KnownFile]) throws {
        try run { db in try Self.insert(files, into: db) }
    }

    /// The version of a document this root holds, if any.
    public func document(server: String, container: ContainerName, path: DocumentPath) throws -> SyncedDocument? {
        try run { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT version, manifest FROM documents WHERE server = ? AND container = ? AND path = ?",
                                             arguments: [server, container.value, path.value]) else { return nil }
            let bytes: Data = row["manifest"]
            return SyncedDocument(version: row["version"], manifest: try Manifest(decoding: Array(bytes)))
        }
    }

    /// Records that this root now holds `document`, whose files are now exactly `files`, in one transaction.
    public func recordSynced(server: String, container: ContainerName, path: DocumentPath, document: SyncedDocument,
                             files: [KnownFile]) throws {
        try run { db in
            try db.execute(sql: "DELETE FROM files")
            try Self.insert(files, into: db)
            try db.execute(sql: "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?)",
                           arguments: [server, container.value, path.value, document.version, Data(document.manifest.encoded())])
        }
    }

    private static func insert(_ files: [KnownFile], into db: Database) throws {
        let insert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)")
        for file in files {
            try insert.execute(arguments: [file.path, file.stamp.size, file.stamp.mtimeNanoseconds,
                                           Int64(bitPattern: file.stamp.inode), file.stamp.ctimeNanoseconds,
                                           encodeChunks(file.chunks)])
        }
    }

    private func run<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try queue.write(body)
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(.io, "the client state database failed", cause: DescribedError(error))
        }
    }

    static func encodeChunks(_ chunks: [Manifest.ChunkReference]) -> Data {
        var data = Data(capacity: chunks.count * 36)
        for chunk in chunks {
            withUnsafeBytes(of: UInt32(chunk.length).littleEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: chunk.id.bytes)
        }
        return data
    }

    static func decodeChunks(_ data: Data) throws -> [Manifest.ChunkReference] {
        let bytes = Array(data)
        guard bytes.count % 36 == 0 else { throw XferError(.io, "the client state has a damaged chunk list; delete the state directory") }
        return stride(from: 0, to: bytes.count, by: 36).map { start in
            let length = Int(bytes[start]) | Int(bytes[start + 1]) << 8 | Int(bytes[start + 2]) << 16 | Int(bytes[start + 3]) << 24
            return Manifest.ChunkReference(id: ChunkID(bytes: bytes[(start + 4)..<(start + 36)])!, length: length)
        }
    }

    /// An absolute, `/`-trimmed form of a path.
    static func absolute(_ path: String) -> String {
        var result = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        while result.count > 1 && result.hasSuffix("/") { result.removeLast() }
        return (result as NSString).standardizingPath
    }
}

