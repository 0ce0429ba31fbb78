import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import XferCore
import XferProtocol

// Documents, versions and the change feed; the chunks an account holds.
extension PostgresMetadataStore {
    public func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID] {
        try await transaction { tx in try await Self.lacking(tx, account: account, ids) }
    }

    public func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (count: Int, bytes: Int64) {
        try await transaction { tx in
            guard let row = try await tx.one("SELECT quota, used FROM accounts WHERE id = \(account) FOR UPDATE") else {
                throw XferError(.notFound, "no such account")
            }
            var lacking = Set(try await Self.lacking(tx, account: account, chunks.map(\.id)))
            if let uploadStartedAt, !lacking.isEmpty {
                // Shared with other uploads, exclusive with a deletion's marking (beginDeletion):
                // either the mark is visible here, or this transaction's holding is visible there.
                try await tx.run("SELECT pg_advisory_xact_lock_shared(\(Self.deletionLock))")
                let batch = lacking.map { ByteBuffer(bytes: $0.bytes) }
                for row in try await tx.rows("SELECT id, finished_at FROM chunk_deletions WHERE id = ANY(\(batch))") {
                    guard let id = ChunkID(bytes: try row[0].decode(Data.self)) else { continue }
                    if DeletionRules.refuses(finishedAt: try row[1].decode(Int64?.self), uploadStartedAt: uploadStartedAt) { lacking.remove(id) }
                }
            }
            let fresh = chunks.filter { lacking.remove($0.id) != nil }
            let bytes = fresh.reduce(Int64(0)) { $0 + Int64($1.length) }
            _ = try QuotaRules.charge(adding: bytes, used: try row["used"].decode(Int64.self), quota: try row["quota"].decode(Int64.self))
            if !fresh.isEmpty {
                let ids = fresh.map { ByteBuffer(bytes: $0.id.bytes) }
                let lengths = fresh.map { Int64($0.length) }
                try await tx.run("""
                    INSERT INTO account_chunks (account_id, id, length, added_at)
                    SELECT \(account), chunk.id, chunk.length, \(Self.now()) FROM unnest(\(ids), \(lengths)) AS chunk(id, length)
                    """)
            }
            try await tx.run("UPDATE accounts SET used = used + \(bytes) WHERE id = \(account)")
            return (fresh.count, bytes)
        }
    }

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            let (document, version) = try await Self.announce(tx, account: account, container: containerID, request, policy: policy, direct: false)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document, path: request.path, version: version)!
        }
    }

    /// Records a pending version. A direct one (committed in the same transaction) is not
    /// counted against the account's pending versions.
    static func announce(_ tx: Transaction, account: Int64, container containerID: Int64, _ request: AnnounceRequest,
                                 policy: StorePolicy, direct: Bool) async throws -> (document: Int64, version: Int64) {
        let sequence = try await nextSequence(tx, container: containerID)
        try await checkNamespace(tx, container: containerID, path: request.path, kind: request.kind)
        if !direct {
            try AccountLimits.checkNewPending(existing: try await tx.int("""
                SELECT COUNT(*) FROM versions WHERE state = 'uploading' AND container_id IN (SELECT id FROM containers WHERE account_id = \(account))
                """) ?? 0, policy: policy)
        }
        let document = try await documentRow(tx, container: containerID, path: request.path, create: true)!
        let version = document.latest + 1
        try await tx.run("UPDATE documents SET latest_version = \(version) WHERE id = \(document.id)")
        try await tx.run("""
            INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, device, sequence, created_at)
            VALUES (\(document.id), \(version), \(containerID), 'uploading', \(request.kind.rawValue), \(request.size), \(request.mtimeNs),
                    \(Int64(request.mode)), \(request.baseVersion), \(request.device), \(sequence), \(now()))
            """)
        return (document.id, version)
    }

    public func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                       manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            // The container's row lock first: commits to one container are serialized, as on SQLite.
            _ = try await tx.int("SELECT id FROM containers WHERE id = \(containerID) FOR UPDATE")
            let info = try await Self.commit(tx, account: account, container: containerID, path: path, version: version,
                                             baseVersion: baseVersion, manifest: manifest, encoded: encoded, policy: policy)
            try await Self.notify(tx, container: containerID)
            return info
        }
    }

    public func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>] {
        let policy = policy
        return try await transaction { tx in
            let containerID = try await Self.containerID(tx, account: account, name: container, create: true, policy: policy)!
            _ = try await tx.int("SELECT id FROM containers WHERE id = \(containerID) FOR UPDATE")
            // Every chunk row the batch references, locked once in id order (as one commit does),
            // so two batches sharing chunks cannot deadlock.
            var all = Set<ChunkID>()
            for item in items { all.formUnion(item.manifest.allChunks.map(\.id)) }
            _ = try await Self.heldLengths(tx, account: account, Array(all))
            var results: [Result<DocumentInfo, XferError>] = []
            for item in items {
                try await tx.run("SAVEPOINT direct_commit")
                do {
                    let (_, version) = try await Self.announce(tx, account: account, container: containerID, item.announce, policy: policy, direct: true)
                    let info = try await Self.commit(tx, account: account, container: containerID, path: item.announce.path, version: version,
                                                     baseVersion: item.announce.baseVersion, manifest: item.manifest, encoded: item.encoded,
                                                     policy: policy)
                    try await tx.run("RELEASE SAVEPOINT direct_commit")
                    results.append(.success(info))
                } catch let error as XferError {
                    try await tx.run("ROLLBACK TO SAVEPOINT direct_commit")
                    try await tx.run("RELEASE SAVEPOINT direct_commit")
                    results.append(.failure(error))
                }
            }
            try await Self.notify(tx, container: containerID)
            return results
        }
    }

    /// Commits an announced version, the container's row already locked.
    static func commit(_ tx: Transaction, account: Int64, container containerID: Int64, path: DocumentPath, version: Int64,
                               baseVersion: Int64?, manifest: Manifest, encoded: [UInt8], policy: StorePolicy) async throws -> DocumentInfo {
        guard let document = try await documentRow(tx, container: containerID, path: path, create: false),
              let row = try await tx.one("SELECT state, mtime_ns FROM versions WHERE document_id = \(document.id) AND version = \(version)") else {
            throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
        }
        let state = try row["state"].decode(String.self)
        guard state == VersionState.uploading.rawValue else {
            throw XferError(.conflict, "\(path) version \(version) is already \(state)")
        }
        let kind = DocumentKind(manifest.kind)
        try await checkNamespace(tx, container: containerID, path: path, kind: kind)
        let declared = try CommitRules.distinctChunks(manifest)
        let missing = try CommitRules.missing(declared, held: try await heldLengths(tx, account: account, Array(declared.keys)))
        guard missing.isEmpty else { throw XferError.missingChunks(missing) }
        let digest = Data(ChunkID.of(encoded).bytes)
        var outcome = VersionState.current
        if let current = document.current,
           let currentRow = try await tx.one("SELECT state, mtime_ns, manifest_digest FROM versions WHERE document_id = \(document.id) AND version = \(current)"),
           try currentRow["state"].decode(String.self) == VersionState.current.rawValue {
            switch CommitRules.outcome(current: current, currentDigest: try currentRow["manifest_digest"].decode(Data?.self),
                                       currentMtime: try currentRow["mtime_ns"].decode(Int64.self), base: baseVersion, digest: digest,
                                       mtime: try row["mtime_ns"].decode(Int64.self)) {
            case .replaces: try await setState(tx, .superseded, document: document.id, version: current, container: containerID)
            case .winsConflict: try await setState(tx, .conflict, document: document.id, version: current, container: containerID)
            case .keptAsConflict: outcome = .conflict
            }
        }
        let sequence = try await nextSequence(tx, container: containerID)
        try await tx.run("""
            UPDATE versions SET state = \(outcome.rawValue), kind = \(kind.rawValue), size = \(manifest.totalSize), manifest_digest = \(digest),
                                manifest = \(Data(encoded)), files = \(Int64(manifest.fileCount)), chunks = \(Int64(manifest.allChunks.count)),
                                base_version = \(baseVersion), sequence = \(sequence)
            WHERE document_id = \(document.id) AND version = \(version)
            """)
        if outcome == .current {
            try await tx.run("UPDATE documents SET current_version = \(version) WHERE id = \(document.id)")
        }
        try await adjustReferences(tx, account: account, manifest: manifest, by: 1)
        try await prune(tx, account: account, document: document.id, policy: policy)
        return try await info(tx, document: document.id, path: path, version: version)!
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8]) {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let number = version ?? document.current,
                  let info = try await Self.info(tx, document: document.id, path: path, version: number),
                  [.current, .superseded, .conflict].contains(info.state),
                  let row = try await tx.one("SELECT manifest FROM versions WHERE document_id = \(document.id) AND version = \(number)"),
                  let blob = try row[0].decode(Data?.self) else {
                throw XferError(.notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
            }
            return (info, Array(blob))
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws -> DocumentInfo {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let info = try await Self.info(tx, document: document.id, path: path, version: version ?? document.current ?? document.latest) else {
                throw XferError(.notFound, version.map { "\(path) has no version \($0)" } ?? "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false),
                  let document = try await Self.documentRow(tx, container: containerID, path: path, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let rows = try await tx.rows("""
                SELECT \(path.value)::text AS path, v.*, \(unescaped: Self.conflictsColumn) FROM versions v
                WHERE v.document_id = \(document.id) ORDER BY v.version DESC
                """)
            return VersionList(versions: try rows.map(Self.info(row:)))
        }
    }

    public func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            // The container's lock before the document's, the order commit, delete and announce
            // take them in (the other order deadlocks against them).
            try await tx.run("SELECT 1 FROM containers WHERE id = \(containerID) FOR UPDATE")
            guard let document = try await Self.documentRow(tx, container: containerID, path: request.path, create: false),
                  let keep = try await Self.info(tx, document: document.id, path: request.path, version: request.keep) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            for other in try CommitRules.contenders(resolving: request, keep: keep, current: document.current) {
                if request.keepAll {
                    try await Self.setState(tx, .superseded, document: document.id, version: other, container: containerID)
                } else {
                    try await Self.removeVersion(tx, account: account, document: document.id, version: other)
                }
            }
            try await Self.setState(tx, .current, document: document.id, version: request.keep, container: containerID)
            try await tx.run("UPDATE documents SET current_version = \(request.keep) WHERE id = \(document.id)")
            try await Self.prune(tx, account: account, document: document.id, policy: policy)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document.id, path: request.path, version: request.keep)!
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws -> DocumentList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try await tx.int("SELECT sequence FROM containers WHERE id = \(containerID)") ?? 0
            let rows = try await tx.rows("""
                SELECT d.path, v.*, \(unescaped: Self.conflictsColumn) FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = \(containerID) AND left(d.path, length(\(prefix))) = \(prefix)
                  AND d.path COLLATE "C" > \(after ?? "") AND v.state != 'deleted'
                ORDER BY d.path COLLATE "C" LIMIT \(Int64(limit) + 1)
                """)
            return DocumentList.page(try rows.map(Self.info(row:)), cursor: cursor, limit: limit)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo {
        let policy = policy
        return try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let sequence = try await Self.nextSequence(tx, container: containerID)
            guard let document = try await Self.documentRow(tx, container: containerID, path: path, create: false),
                  let current = document.current,
                  let info = try await Self.info(tx, document: document.id, path: path, version: current),
                  info.state != .deleted else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            if let baseVersion, baseVersion != current {
                throw XferError.conflict(path: path, current: current, base: baseVersion)
            }
            let version = document.latest + 1
            try await tx.run("UPDATE versions SET state = 'superseded', sequence = \(sequence) WHERE document_id = \(document.id) AND version = \(current)")
            let deletion = try await Self.nextSequence(tx, container: containerID)
            try await tx.run("""
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, sequence, created_at)
                VALUES (\(document.id), \(version), \(containerID), 'deleted', \(info.kind.rawValue), 0, \(Self.now() * 1_000_000_000),
                        \(Int64(info.mode)), \(current), \(deletion), \(Self.now()))
                """)
            try await tx.run("UPDATE documents SET current_version = \(version), latest_version = \(version) WHERE id = \(document.id)")
            try await Self.prune(tx, account: account, document: document.id, policy: policy)
            try await Self.notify(tx, container: containerID)
            return try await Self.info(tx, document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await transaction { tx in
            guard let containerID = try await Self.containerID(tx, account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false, head: 0)
            }
            // The head first, and no row past it: each statement of a READ COMMITTED transaction
            // sees a newer snapshot, so a change committed between the rows and a later head
            // would fall behind the cursor and never be seen (ChangeList.page).
            let head = try await tx.int("SELECT sequence FROM containers WHERE id = \(containerID)") ?? 0
            let documents = try await tx.rows("""
                SELECT d.path, v.*, \(unescaped: Self.conflictsColumn) FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = \(containerID) AND v.sequence > \(after) AND v.sequence <= \(head)
                ORDER BY v.sequence LIMIT \(Int64(limit + 1))
                """).map(Self.info(row:))
            let keys = try await tx.rows("""
                SELECT * FROM kv WHERE container_id = \(containerID) AND sequence > \(after) AND sequence <= \(head)
                ORDER BY sequence LIMIT \(Int64(limit + 1))
                """).map(Self.entry(row:))
            return ChangeList.page(documents: documents, keys: keys, after: after, head: head, limit: limit)
        }
    }

    struct DocumentRow {
        var id: Int64
        var current: Int64?
        var latest: Int64
    }

    /// The ids (of `ids`, first occurrences, in order) the account does not hold: one query per
    /// 4,096 ids.
    /// The stored length of each of `ids` the account holds, the rows locked until the end of
    /// the transaction: a commit that found a chunk held must still find it when it adds its
    /// reference, so no release in another container (or lease expiry) may delete the row in
    /// between (READ COMMITTED would let the later UPDATE match nothing). Locks are taken in id
    /// order, as ``adjustReferences(_:account:manifest:by:)`` takes them, so two never deadlock.
    static func heldLengths(_ tx: Transaction, account: Int64, _ ids: [ChunkID]) async throws -> [ChunkID: Int64] {
        var held: [ChunkID: Int64] = [:]
        let ids = sortedForLocking(ids)
        for start in stride(from: 0, to: ids.count, by: 4096) {
            let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
            for row in try await tx.rows("SELECT id, length FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) ORDER BY id FOR UPDATE") {
                if let id = ChunkID(bytes: try row[0].decode(Data.self)) { held[id] = try row[1].decode(Int64.self) }
            }
        }
        return held
    }

    /// Chunk ids in the order PostgreSQL sorts `bytea` (bytewise), so row locks are taken in one order.
    static func sortedForLocking(_ ids: [ChunkID]) -> [ChunkID] {
        ids.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    static func lacking(_ tx: Transaction, account: Int64, _ ids: [ChunkID]) async throws -> [ChunkID] {
        var seen: Set<ChunkID> = []
        let unique = ids.filter { seen.insert($0).inserted }
        var held: Set<ChunkID> = []
        for start in stride(from: 0, to: unique.count, by: 4096) {
            let batch = unique[start..<min(start + 4096, unique.count)].map { ByteBuffer(bytes: $0.bytes) }
            for row in try await tx.rows("SELECT id FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch))") {
                if let id = ChunkID(bytes: try row[0].decode(Data.self)) { held.insert(id) }
            }
        }
        return unique.filter { !held.contains($0) }
    }

    static func documentRow(_ tx: Transaction, container: Int64, path: DocumentPath, create: Bool) async throws -> DocumentRow? {
        if create {
            try await tx.run("INSERT INTO documents (container_id, path) VALUES (\(container), \(path.value)) ON CONFLICT (container_id, path) DO NOTHING")
        }
        guard let row = try await tx.one("""
            SELECT id, current_version, latest_version FROM documents WHERE container_id = \(container) AND path = \(path.value) FOR UPDATE
            """) else { return nil }
        return DocumentRow(id: try row["id"].decode(Int64.self), current: try row["current_version"].decode(Int64?.self),
                           latest: try row["latest_version"].decode(Int64.self))
    }

    /// Throws `conflict` if a live document of the container is an ancestor of `path` (a
    /// directory document aside) or lies below it (unless `kind` is a directory): the namespace
    /// is a tree (docs/PROTOCOL.md, "Names"). Called under the container's row lock, so the
    /// rule holds atomically across servers.
    static func checkNamespace(_ tx: Transaction, container: Int64, path: DocumentPath, kind: DocumentKind) async throws {
        let range = path.descendantRange
        // A directory holds documents: below one, only the ancestors are asked about.
        let (low, high) = kind.holdsDocuments ? ("", "") : range
        if let row = try await tx.one("""
            SELECT d.path FROM documents d
            JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
            WHERE d.container_id = \(container) AND v.state != 'deleted'
              AND ((d.path = ANY(\(path.ancestors)) AND v.kind != \(DocumentKind.directory.rawValue))
                   OR (d.path COLLATE "C" >= \(low) AND d.path COLLATE "C" < \(high)))
            LIMIT 1
            """) {
            throw path.namespaceConflict(with: try row["path"].decode(String.self))
        }
    }

    static func setState(_ tx: Transaction, _ state: VersionState, document: Int64, version: Int64, container: Int64) async throws {
        let sequence = try await nextSequence(tx, container: container)
        try await tx.run("UPDATE versions SET state = \(state.rawValue), sequence = \(sequence) WHERE document_id = \(document) AND version = \(version)")
    }

    static func adjustReferences(_ tx: Transaction, account: Int64, manifest: Manifest, by delta: Int64) async throws {
        let ids = sortedForLocking(Array(Set(manifest.allChunks.map(\.id))))
        var released: Int64 = 0
        for start in stride(from: 0, to: ids.count, by: 4096) {
            let batch = ids[start..<min(start + 4096, ids.count)].map { ByteBuffer(bytes: $0.bytes) }
            if delta < 0 {
                // A release locks in id order too (a commit locked its rows in heldLengths).
                try await tx.run("SELECT 1 FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) ORDER BY id FOR UPDATE")
            }
            try await tx.run("UPDATE account_chunks SET refs = refs + \(delta) WHERE account_id = \(account) AND id = ANY(\(batch))")
            if delta < 0 {
                for row in try await tx.rows("DELETE FROM account_chunks WHERE account_id = \(account) AND id = ANY(\(batch)) AND refs <= 0 RETURNING length") {
                    released += try row[0].decode(Int64.self)
                }
            }
        }
        if released > 0 {
            try await tx.run("UPDATE accounts SET used = GREATEST(0, used - \(released)) WHERE id = \(account)")
        }
    }

    static func removeVersion(_ tx: Transaction, account: Int64, document: Int64, version: Int64) async throws {
        if let row = try await tx.one("SELECT manifest FROM versions WHERE document_id = \(document) AND version = \(version)"),
           let blob = try row[0].decode(Data?.self) {
            try await adjustReferences(tx, account: account, manifest: try Manifest(decoding: Array(blob)), by: -1)
        }
        try await tx.run("DELETE FROM versions WHERE document_id = \(document) AND version = \(version)")
    }

    static func prune(_ tx: Transaction, account: Int64, document: Int64, policy: StorePolicy) async throws {
        let cutoff = now() - Int64(policy.keepDays) * 86_400
        let old = try await tx.rows("""
            SELECT version FROM versions WHERE document_id = \(document) AND state = 'superseded' AND created_at <= \(cutoff)
            AND version NOT IN (SELECT version FROM versions WHERE document_id = \(document) AND state = 'superseded'
                                ORDER BY version DESC LIMIT \(Int64(policy.keepVersions)))
            """)
        for row in old { try await removeVersion(tx, account: account, document: document, version: try row[0].decode(Int64.self)) }
    }

    static let conflictsColumn =
        "(SELECT string_agg(c.version::text, ',') FROM versions c WHERE c.document_id = v.document_id AND c.state = 'conflict') AS conflicts"

    static func info(_ tx: Transaction, document: Int64, path: DocumentPath, version: Int64) async throws -> DocumentInfo? {
        guard let row = try await tx.one("""
            SELECT \(path.value)::text AS path, v.*, \(unescaped: conflictsColumn) FROM versions v
            WHERE v.document_id = \(document) AND v.version = \(version)
            """) else { return nil }
        return try info(row: row)
    }

    static func info(row: PostgresRandomAccessRow) throws -> DocumentInfo {
        let digest = try row["manifest_digest"].decode(Data?.self)
        let conflicts = try row["conflicts"].decode(String?.self)?.split(separator: ",").compactMap { Int64($0) }.sorted()
        return DocumentInfo(
            path: try DocumentPath(try row["path"].decode(String.self)), version: try row["version"].decode(Int64.self),
            state: try Stored.state(try row["state"].decode(String.self)),
            kind: try Stored.kind(try row["kind"].decode(String.self)),
            size: try row["size"].decode(Int64.self), mtimeNs: try row["mtime_ns"].decode(Int64.self),
            mode: UInt32(truncatingIfNeeded: try row["mode"].decode(Int64.self)), baseVersion: try row["base_version"].decode(Int64?.self),
            manifestDigest: digest.flatMap { ChunkID(bytes: $0)?.hex }, files: try row["files"].decode(Int64?.self).map(Int.init),
            chunks: try row["chunks"].decode(Int64?.self).map(Int.init), device: try row["device"].decode(String?.self),
            sequence: try row["sequence"].decode(Int64.self), conflicts: conflicts?.isEmpty == false ? conflicts : nil)
    }
}
