import Foundation
import GRDB
import XferCore
import XferProtocol

// Documents, versions and the change feed; the chunks an account holds.
extension SQLiteMetadataStore {
    public func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID] {
        try await read { db in try Self.lacking(db, account: account, ids) }
    }

    public func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (count: Int, bytes: Int64) {
        try await write { db in
            var lacking = Set(try Self.lacking(db, account: account, chunks.map(\.id)))
            if let uploadStartedAt {
                let mark = try db.cachedStatement(sql: "SELECT finished_at FROM chunk_deletions WHERE id = ?")
                for id in lacking {
                    guard let row = try Row.fetchOne(mark, arguments: [Data(id.bytes)]) else { continue }
                    if DeletionRules.refuses(finishedAt: row["finished_at"], uploadStartedAt: uploadStartedAt) { lacking.remove(id) }
                }
            }
            let fresh = chunks.filter { lacking.remove($0.id) != nil }
            let bytes = fresh.reduce(Int64(0)) { $0 + Int64($1.length) }
            guard let row = try Row.fetchOne(db, sql: "SELECT quota, used FROM accounts WHERE id = ?", arguments: [account]) else {
                throw XferError(.notFound, "no such account")
            }
            _ = try QuotaRules.charge(adding: bytes, used: row["used"], quota: row["quota"])
            let insert = try db.cachedStatement(sql: "INSERT INTO account_chunks (account_id, id, length, added_at) VALUES (?, ?, ?, ?)")
            let now = Self.now()
            for chunk in fresh { try insert.execute(arguments: [account, Data(chunk.id.bytes), chunk.length, now]) }
            try db.execute(sql: "UPDATE accounts SET used = used + ? WHERE id = ?", arguments: [bytes, account])
            return (fresh.count, bytes)
        }
    }

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            let (document, version) = try Self.announce(db, account: account, container: containerID, request, policy: policy, direct: false)
            return try Self.info(db, document: document, path: request.path, version: version)!
        }
    }

    /// Records a pending version. A direct one (committed in the same transaction) is not
    /// counted against the account's pending versions.
    static func announce(_ db: Database, account: Int64, container containerID: Int64, _ request: AnnounceRequest,
                                 policy: StorePolicy, direct: Bool) throws -> (document: Int64, version: Int64) {
        try checkNamespace(db, container: containerID, path: request.path, kind: request.kind)
        if !direct {
            try AccountLimits.checkNewPending(existing: try Int64.fetchOne(db, sql: """
                SELECT COUNT(*) FROM versions WHERE state = 'uploading' AND container_id IN (SELECT id FROM containers WHERE account_id = ?)
                """, arguments: [account]) ?? 0, policy: policy)
        }
        let document = try documentRow(db, container: containerID, path: request.path, create: true)!
        let version = document.latest + 1
        let sequence = try nextSequence(db, container: containerID)
        try db.execute(sql: "UPDATE documents SET latest_version = ? WHERE id = ?", arguments: [version, document.id])
        try db.execute(sql: """
            INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                  device, sequence, created_at)
            VALUES (?, ?, ?, 'uploading', ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [document.id, version, containerID, request.kind.rawValue, request.size, request.mtimeNs,
                             request.mode, request.baseVersion, request.device, sequence, now()])
        return (document.id, version)
    }

    public func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                       manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            return try Self.commit(db, account: account, container: containerID, path: path, version: version, baseVersion: baseVersion,
                                   manifest: manifest, encoded: encoded, policy: policy)
        }
    }

    public func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>] {
        let policy = policy
        return try await write { db in
            let containerID = try Self.containerID(db, account: account, name: container, create: true, policy: policy)!
            return try items.map { item in
                do {
                    var info: DocumentInfo? = nil
                    try db.inSavepoint {
                        let (_, version) = try Self.announce(db, account: account, container: containerID, item.announce, policy: policy, direct: true)
                        info = try Self.commit(db, account: account, container: containerID, path: item.announce.path, version: version,
                                               baseVersion: item.announce.baseVersion, manifest: item.manifest, encoded: item.encoded, policy: policy)
                        return .commit
                    }
                    return .success(info!)
                } catch let error as XferError {
                    return .failure(error)
                }
            }
        }
    }

    /// Commits an announced version (see ``MetadataStore/commit(account:container:path:version:baseVersion:manifest:encoded:)``).
    static func commit(_ db: Database, account: Int64, container containerID: Int64, path: DocumentPath, version: Int64,
                               baseVersion: Int64?, manifest: Manifest, encoded: [UInt8], policy: StorePolicy) throws -> DocumentInfo {
        guard let document = try documentRow(db, container: containerID, path: path, create: false),
              let row = try Row.fetchOne(db, sql: "SELECT state, mtime_ns FROM versions WHERE document_id = ? AND version = ?",
                                         arguments: [document.id, version]) else {
            throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
        }
        let state: String = row["state"]
        guard state == VersionState.uploading.rawValue else {
            throw XferError(.conflict, "\(path) version \(version) is already \(state)")
        }
        let kind = DocumentKind(manifest.kind)
        try checkNamespace(db, container: containerID, path: path, kind: kind)
        let declared = try CommitRules.distinctChunks(manifest)
        let missing = try CommitRules.missing(declared, held: try heldLengths(db, account: account, Array(declared.keys)))
        guard missing.isEmpty else {
            throw XferError.missingChunks(missing)
        }
        let digest = Data(ChunkID.of(encoded).bytes)
        var outcome = VersionState.current
        if let current = document.current,
           let currentRow = try Row.fetchOne(db, sql: "SELECT state, mtime_ns, manifest_digest FROM versions WHERE document_id = ? AND version = ?",
                                             arguments: [document.id, current]),
           currentRow["state"] == VersionState.current.rawValue {
            switch CommitRules.outcome(current: current, currentDigest: currentRow["manifest_digest"], currentMtime: currentRow["mtime_ns"],
                                       base: baseVersion, digest: digest, mtime: row["mtime_ns"]) {
            case .replaces: try setState(db, .superseded, document: document.id, version: current, container: containerID)
            case .winsConflict: try setState(db, .conflict, document: document.id, version: current, container: containerID)
            case .keptAsConflict: outcome = .conflict
            }
        }
        let sequence = try nextSequence(db, container: containerID)
        try db.execute(sql: """
            UPDATE versions SET state = ?, kind = ?, size = ?, manifest_digest = ?, manifest = ?, files = ?,
                                chunks = ?, base_version = ?, sequence = ?
            WHERE document_id = ? AND version = ?
            """, arguments: [outcome.rawValue, kind.rawValue, manifest.totalSize, digest, Data(encoded), manifest.fileCount,
                             manifest.allChunks.count, baseVersion, sequence, document.id, version])
        if outcome == .current {
            try db.execute(sql: "UPDATE documents SET current_version = ? WHERE id = ?", arguments: [version, document.id])
        }
        try adjustReferences(db, account: account, manifest: manifest, by: 1)
        try prune(db, account: account, document: document.id, policy: policy)
        return try info(db, document: document.id, path: path, version: version)!
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8]) {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let number = version ?? document.current,
                  let info = try Self.info(db, document: document.id, path: path, version: number),
                  [.current, .superseded, .conflict].contains(info.state),
                  let blob = try Data.fetchOne(db, sql: "SELECT manifest FROM versions WHERE document_id = ? AND version = ?",
                                               arguments: [document.id, number]) else {
                throw XferError(.notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
            }
            return (info, Array(blob))
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws -> DocumentInfo {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let info = try Self.info(db, document: document.id, path: path, version: version ?? document.current ?? document.latest) else {
                throw XferError(.notFound, version.map { "\(path) has no version \($0)" } ?? "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let rows = try Row.fetchAll(db, sql: "SELECT ? AS path, v.*, \(Self.conflictsColumn) FROM versions v WHERE v.document_id = ? ORDER BY v.version DESC",
                                        arguments: [path.value, document.id])
            return VersionList(versions: try rows.map(Self.info(row:)))
        }
    }

    public func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: request.path, create: false),
                  let keep = try Self.info(db, document: document.id, path: request.path, version: request.keep) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            for other in try CommitRules.contenders(resolving: request, keep: keep, current: document.current) {
                if request.keepAll {
                    try Self.setState(db, .superseded, document: document.id, version: other, container: containerID)
                } else {
                    try Self.removeVersion(db, account: account, document: document.id, version: other)
                }
            }
            try Self.setState(db, .current, document: document.id, version: request.keep, container: containerID)
            try db.execute(sql: "UPDATE documents SET current_version = ? WHERE id = ?", arguments: [request.keep, document.id])
            try Self.prune(db, account: account, document: document.id, policy: policy)
            return try Self.info(db, document: document.id, path: request.path, version: request.keep)!
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws -> DocumentList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            let rows = try Row.fetchAll(db, sql: """
                SELECT d.path, v.*, \(Self.conflictsColumn) FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = ? AND substr(d.path, 1, length(?)) = ? AND d.path > ? AND v.state != 'deleted'
                ORDER BY d.path LIMIT ?
                """, arguments: [containerID, prefix, prefix, after ?? "", limit + 1])
            return DocumentList.page(try rows.map(Self.info(row:)), cursor: cursor, limit: limit)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo {
        let policy = policy
        return try await write { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false),
                  let document = try Self.documentRow(db, container: containerID, path: path, create: false),
                  let current = document.current,
                  let info = try Self.info(db, document: document.id, path: path, version: current),
                  info.state != .deleted else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            if let baseVersion, baseVersion != current {
                throw XferError.conflict(path: path, current: current, base: baseVersion)
            }
            let version = document.latest + 1
            try Self.setState(db, .superseded, document: document.id, version: current, container: containerID)
            let sequence = try Self.nextSequence(db, container: containerID)
            try db.execute(sql: """
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version,
                                      sequence, created_at)
                VALUES (?, ?, ?, 'deleted', ?, 0, ?, ?, ?, ?, ?)
                """, arguments: [document.id, version, containerID, info.kind.rawValue, Self.now() * 1_000_000_000,
                                 info.mode, current, sequence, Self.now()])
            try db.execute(sql: "UPDATE documents SET current_version = ?, latest_version = ? WHERE id = ?",
                           arguments: [version, version, document.id])
            try Self.prune(db, account: account, document: document.id, policy: policy)
            return try Self.info(db, document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await read { db in
            guard let containerID = try Self.containerID(db, account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false, head: 0)
            }
            // The head first and no row past it, as on PostgreSQL (one read snapshot here).
            let head = try Int64.fetchOne(db, sql: "SELECT sequence FROM containers WHERE id = ?", arguments: [containerID]) ?? 0
            let documents = try Row.fetchAll(db, sql: """
                SELECT d.path, v.*, \(Self.conflictsColumn) FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = ? AND v.sequence > ? AND v.sequence <= ? ORDER BY v.sequence LIMIT ?
                """, arguments: [containerID, after, head, limit + 1]).map(Self.info(row:))
            let keys = try Row.fetchAll(db, sql: "SELECT * FROM kv WHERE container_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence LIMIT ?",
                                        arguments: [containerID, after, head, limit + 1]).map(Self.entry(row:))
            return ChangeList.page(documents: documents, keys: keys, after: after, head: head, limit: limit)
        }
    }

    struct DocumentRow {
        var id: Int64
        var current: Int64?
        var latest: Int64
    }

    /// The distinct ids of `ids` the account does not hold, in first-seen order.
    static func lacking(_ db: Database, account: Int64, _ ids: [ChunkID]) throws -> [ChunkID] {
        let holds = try db.cachedStatement(sql: "SELECT 1 FROM account_chunks WHERE account_id = ? AND id = ?")
        var seen: Set<ChunkID> = []
        return try ids.filter { id in
            try seen.insert(id).inserted && Row.fetchOne(holds, arguments: [account, Data(id.bytes)]) == nil
        }
    }

    /// The stored length of each of `ids` the account holds.
    static func heldLengths(_ db: Database, account: Int64, _ ids: [ChunkID]) throws -> [ChunkID: Int64] {
        let lookup = try db.cachedStatement(sql: "SELECT length FROM account_chunks WHERE account_id = ? AND id = ?")
        var held: [ChunkID: Int64] = [:]
        for id in ids {
            if let length = try Int64.fetchOne(lookup, arguments: [account, Data(id.bytes)]) { held[id] = length }
        }
        return held
    }

    static func documentRow(_ db: Database, container: Int64, path: DocumentPath, create: Bool) throws -> DocumentRow? {
        if let row = try Row.fetchOne(db, sql: "SELECT id, current_version, latest_version FROM documents WHERE container_id = ? AND path = ?",
                                      arguments: [container, path.value]) {
            return DocumentRow(id: row["id"], current: row["current_version"], latest: row["latest_version"])
        }
        guard create else { return nil }
        try db.execute(sql: "INSERT INTO documents (container_id, path) VALUES (?, ?)", arguments: [container, path.value])
        return DocumentRow(id: db.lastInsertedRowID, current: nil, latest: 0)
    }

    /// Throws `conflict` if a live document of the container is an ancestor of `path` (a
    /// directory document aside) or lies below it (unless `kind` is a directory): the namespace
    /// is a tree (docs/PROTOCOL.md, "Names"). Run inside the write transaction that creates or
    /// commits the version, so the rule holds atomically.
    static func checkNamespace(_ db: Database, container: Int64, path: DocumentPath, kind: DocumentKind) throws {
        // Two lookups, each a search of the (container_id, path) index: SQLite plans the two
        // conditions joined by OR as a scan of the whole container, which made every announce
        // and commit cost time in proportion to the documents already there.
        let live = """
            SELECT d.path FROM documents d
            JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
            WHERE d.container_id = ? AND %@ AND v.state != 'deleted'
            LIMIT 1
            """
        let ancestors = path.ancestors
        if !ancestors.isEmpty, let other = try String.fetchOne(db, sql: live.replacingOccurrences(
            of: "%@", with: "d.path IN (\(ancestors.map { _ in "?" }.joined(separator: ", "))) AND v.kind != '\(DocumentKind.directory.rawValue)'"),
            arguments: StatementArguments([container] as [any DatabaseValueConvertible]) + StatementArguments(ancestors)) {
            throw path.namespaceConflict(with: other)
        }
        let range = path.descendantRange
        if !kind.holdsDocuments,
           let other = try String.fetchOne(db, sql: live.replacingOccurrences(of: "%@", with: "d.path >= ? AND d.path < ?"),
                                           arguments: [container, range.low, range.high]) {
            throw path.namespaceConflict(with: other)
        }
    }

    /// Changes a version's state as one change on the feed.
    static func setState(_ db: Database, _ state: VersionState, document: Int64, version: Int64, container: Int64) throws {
        let sequence = try nextSequence(db, container: container)
        try db.execute(sql: "UPDATE versions SET state = ?, sequence = ? WHERE document_id = ? AND version = ?",
                       arguments: [state.rawValue, sequence, document, version])
    }

    /// Counts a committed manifest's distinct chunks as referenced once more (`by: 1`) or once
    /// less (`by: -1`); chunks no version references any more leave the account and its quota.
    static func adjustReferences(_ db: Database, account: Int64, manifest: Manifest, by delta: Int) throws {
        let update = try db.cachedStatement(sql: "UPDATE account_chunks SET refs = refs + ? WHERE account_id = ? AND id = ?")
        var released: Int64 = 0
        let unreferenced = try db.cachedStatement(sql: "SELECT length FROM account_chunks WHERE account_id = ? AND id = ? AND refs <= 0")
        let remove = try db.cachedStatement(sql: "DELETE FROM account_chunks WHERE account_id = ? AND id = ?")
        for id in Set(manifest.allChunks.map(\.id)) {
            let key: StatementArguments = [account, Data(id.bytes)]
            try update.execute(arguments: [delta] + key)
            if delta < 0, let length = try Int64.fetchOne(unreferenced, arguments: key) {
                try remove.execute(arguments: key)
                released += length
            }
        }
        if released > 0 {
            try db.execute(sql: "UPDATE accounts SET used = MAX(0, used - ?) WHERE id = ?", arguments: [released, account])
        }
    }

    /// Removes a version and gives back what only it referenced.
    static func removeVersion(_ db: Database, account: Int64, document: Int64, version: Int64) throws {
        if let blob = try Data.fetchOne(db, sql: "SELECT manifest FROM versions WHERE document_id = ? AND version = ?",
                                        arguments: [document, version]) {
            try adjustReferences(db, account: account, manifest: try Manifest(decoding: Array(blob)), by: -1)
        }
        try db.execute(sql: "DELETE FROM versions WHERE document_id = ? AND version = ?", arguments: [document, version])
    }

    /// Removes superseded versions past the policy: beyond the newest `keepVersions` and older
    /// than `keepDays`. Current, conflict, uploading and deletion versions are never pruned.
    static func prune(_ db: Database, account: Int64, document: Int64, policy: StorePolicy) throws {
        let cutoff = now() - Int64(policy.keepDays) * 86_400
        let old = try Int64.fetchAll(db, sql: """
            SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' AND created_at <= ?
            AND version NOT IN (SELECT version FROM versions WHERE document_id = ? AND state = 'superseded' ORDER BY version DESC LIMIT ?)
            """, arguments: [document, cutoff, document, policy.keepVersions])
        for version in old { try removeVersion(db, account: account, document: document, version: version) }
    }

    /// The unresolved conflict versions of the row's document, as a comma-separated list.
    static let conflictsColumn =
        "(SELECT group_concat(c.version) FROM versions c WHERE c.document_id = v.document_id AND c.state = 'conflict') AS conflicts"

    static func info(_ db: Database, document: Int64, path: DocumentPath, version: Int64) throws -> DocumentInfo? {
        guard let row = try Row.fetchOne(db, sql: "SELECT ? AS path, v.*, \(conflictsColumn) FROM versions v WHERE v.document_id = ? AND v.version = ?",
                                         arguments: [path.value, document, version]) else { return nil }
        return try info(row: row)
    }

    static func info(row: Row) throws -> DocumentInfo {
        let digest: Data? = row["manifest_digest"]
        let conflicts = (row["conflicts"] as String?)?.split(separator: ",").compactMap { Int64($0) }.sorted()
        return DocumentInfo(
            path: try DocumentPath(row["path"] as String), version: row["version"],
            state: try Stored.state(row["state"]), kind: try Stored.kind(row["kind"]),
            size: row["size"], mtimeNs: row["mtime_ns"], mode: row["mode"], baseVersion: row["base_version"],
            manifestDigest: digest.flatMap { ChunkID(bytes: $0)?.hex }, files: row["files"], chunks: row["chunks"],
            device: row["device"], sequence: row["sequence"], conflicts: conflicts?.isEmpty == false ? conflicts : nil)
    }
}
