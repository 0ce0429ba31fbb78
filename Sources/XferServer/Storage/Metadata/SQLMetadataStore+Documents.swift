import Foundation
import XferCore
import XferProtocol

// Documents, versions and the change feed; the chunks an account holds.
extension SQLMetadataStore {
    public func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID] {
        try await read { tx in try tx.lacking(account: account, ids) }
    }

    public func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (
        count: Int, bytes: Int64
    ) {
        try await write { tx in
            // The account's row first: two uploads charge its quota one after the other.
            guard
                let row = try tx.sql.one(
                    "SELECT quota, used, version_bytes FROM accounts WHERE id = ?\(tx.dialect.forUpdate)", account)
            else {
                throw XferError(.notFound, "no such account")
            }
            var lacking = Set(try tx.lacking(account: account, chunks.map(\.id)))
            if let uploadStartedAt, !lacking.isEmpty {
                // Shared with other uploads, exclusive with a deletion's marking (beginDeletion):
                // either the mark is visible here, or this transaction's holding is visible there.
                try tx.sql.lockDeletions(exclusive: false)
                for batch in Array(lacking).batched(atMost: sqlBatchSize) {
                    for mark in try tx.sql.rows(
                        "SELECT id, finished_at FROM chunk_deletions WHERE id IN (\(sqlPlaceholders(batch.count)))",
                        batch.map(\.sqlValue))
                    {
                        guard let id = try mark.chunkID(0) else { continue }
                        if DeletionRules.refuses(
                            finishedAt: try mark.optionalInt("finished_at"), uploadStartedAt: uploadStartedAt)
                        {
                            lacking.remove(id)
                        }
                    }
                }
            }
            let fresh = chunks.filter { lacking.remove($0.id) != nil }
            // A plain chunk's id fixes its bytes; a sealed one's does not, and the server cannot
            // check them. So a sealed chunk another account holds is refused: no account's copy
            // stands in for another's (one who knows a keyed id cannot store other bytes under
            // it first and have an owner's later upload taken as held). Keys are a container's,
            // and a container is one account's, so no two accounts share a sealed chunk.
            let sealed = fresh.filter(\.sealed)
            if !sealed.isEmpty {
                let held = try tx.heldByAnyAccount(sealed.map(\.id))
                if let clash = sealed.first(where: { held.contains($0.id) }) {
                    throw XferError(
                        .corruptChunk,
                        """
                        sealed chunk \(clash.id) is held by another account: the server cannot check a sealed chunk's bytes, \
                        so it keeps no account's copy for another's; nothing was recorded
                        """)
                }
            }
            let bytes = fresh.reduce(Int64(0)) { $0 + Int64($1.length) }
            _ = try QuotaRules.charge(
                adding: bytes, used: try row.int("used") + (try row.int("version_bytes")), quota: try row.int("quota"))
            let now = MetadataTransaction.now()
            for batch in tx.inStoredOrder(fresh, id: \.id).batched(atMost: sqlBatchSize) {
                try tx.sql.rows(
                    "INSERT INTO account_chunks (account_id, id, length, added_at) VALUES \(sqlRows("?, ?, ?, ?", count: batch.count))",
                    batch.flatMap { [.int(account), $0.id.sqlValue, .int(Int64($0.length)), .int(now)] })
            }
            try tx.sql.rows("UPDATE accounts SET used = used + ? WHERE id = ?", bytes, account)
            return (fresh.count, bytes)
        }
    }

    public func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws
        -> DocumentInfo
    {
        try await write { tx in
            let containerID = try tx.containerID(
                account: account, name: container, create: true,
                sealed: NameSealing.isSealed(path: request.path.value))!
            let (document, version) = try tx.announce(account: account, container: containerID, request, direct: false)
                .row
            try tx.sql.notifyChanges(container: containerID)
            return try tx.info(document: document, path: request.path, version: version)!
        }
    }

    public func commit(
        account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
        manifest: Manifest, encoded: [UInt8]
    ) async throws -> DocumentInfo {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            try tx.lockContainer(containerID)
            let info = try tx.commit(
                account: account, container: containerID, path: path, version: version, baseVersion: baseVersion,
                manifest: manifest, encoded: encoded, sealed: try tx.isEncrypted(container: containerID))
            try tx.sql.notifyChanges(container: containerID)
            return info
        }
    }

    public func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>]
    {
        try await write { tx in
            let containerID = try tx.containerID(
                account: account, name: container, create: true,  // and its lock
                sealed: items.allSatisfy { NameSealing.isSealed(path: $0.announce.path.value) })!
            // Every chunk row the batch references, locked once in id order (as one commit does),
            // so two batches sharing chunks cannot deadlock.
            _ = try tx.heldLengths(account: account, items.flatMap { $0.manifest.allChunks.map(\.id) })
            let sealed = try tx.isEncrypted(container: containerID)  // asked once for the batch
            var results: [Result<DocumentInfo, XferError>] = []
            for item in items {
                do {
                    results.append(
                        .success(
                            try tx.savepoint {
                                let announced = try tx.announce(
                                    account: account, container: containerID, item.announce, direct: true)
                                if let wanted = item.version, wanted != announced.version {
                                    // Rolled back with the savepoint: the version it would take stays free.
                                    throw XferError(
                                        .conflict,
                                        "\(item.announce.path) would be version \(announced.version), not \(wanted); nothing of it was recorded"
                                    )
                                }
                                return try tx.commit(
                                    account: account, container: containerID, path: item.announce.path,
                                    version: announced.version,
                                    baseVersion: item.announce.baseVersion, manifest: item.manifest,
                                    encoded: item.encoded,
                                    sealed: sealed, announced: announced)
                            }))
                } catch let error as XferError {
                    // This document is refused; the others go on. Any other error ends the batch.
                    results.append(.failure(error))
                }
            }
            try tx.sql.notifyChanges(container: containerID)
            return results
        }
    }

    public func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8])
    {
        try await read { tx in
            try tx.manifest(
                container: try tx.containerID(account: account, name: container, create: false), path: path,
                version: version)
        }
    }

    public func manifests(
        account: Int64, container: ContainerName, _ wanted: [(path: DocumentPath, version: Int64?)], budget: Int
    ) async throws
        -> [ManifestRead]
    {
        try await read { tx in
            let containerID = try tx.containerID(account: account, name: container, create: false)
            var left = budget
            return try wanted.map { wanted -> ManifestRead in
                guard left > 0 else { return .overBudget }
                do {
                    let (info, manifest) = try tx.manifest(
                        container: containerID, path: wanted.path, version: wanted.version)
                    left -= manifest.count
                    return left >= 0 ? .manifest(info: info, manifest: manifest) : .overBudget
                } catch let error as XferError {
                    // This document's own answer (none, or a manifest that does not open); a
                    // failing database ends the whole request.
                    return .failed(error)
                }
            }
        }
    }

    public func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> DocumentInfo
    {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false),
                let document = try tx.documentRow(container: containerID, path: path, create: false),
                let info = try tx.info(
                    document: document.id, path: path, version: version ?? document.current ?? document.latest)
            else {
                throw XferError(
                    .notFound,
                    version.map { "\(path) has no version \($0)" } ?? "no document \(path) in container \(container)")
            }
            return info
        }
    }

    public func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false),
                let document = try tx.documentRow(container: containerID, path: path, create: false)
            else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            let rows = try tx.sql.rows(
                """
                SELECT CAST(? AS TEXT) AS path, \(tx.infoColumns) FROM versions v WHERE v.document_id = ? ORDER BY v.version DESC
                """, path.value, document.id)
            return VersionList(versions: try rows.map(MetadataTransaction.info(row:)))
        }
    }

    public func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws
        -> DocumentInfo
    {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            try tx.lockContainer(containerID)
            guard let document = try tx.documentRow(container: containerID, path: request.path, create: false),
                let keep = try tx.info(document: document.id, path: request.path, version: request.keep)
            else {
                throw XferError(.notFound, "\(request.path) has no version \(request.keep)")
            }
            for other in try CommitRules.contenders(resolving: request, keep: keep, current: document.current) {
                if request.keepAll {
                    try tx.setState(.superseded, document: document.id, version: other, container: containerID)
                } else {
                    try tx.removeVersion(account: account, document: document.id, version: other)
                }
            }
            try tx.setState(.current, document: document.id, version: request.keep, container: containerID)
            try tx.sql.rows("UPDATE documents SET current_version = ? WHERE id = ?", request.keep, document.id)
            try tx.prune(account: account, document: document.id)
            try tx.sql.notifyChanges(container: containerID)
            return try tx.info(document: document.id, path: request.path, version: request.keep)!
        }
    }

    public func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws
        -> DocumentList
    {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try tx.sql.int("SELECT sequence FROM containers WHERE id = ?", containerID) ?? 0
            let bytewise = tx.dialect.bytewise
            let rows = try tx.sql.rows(
                """
                SELECT d.path, \(tx.infoColumns) FROM documents d
                JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                WHERE d.container_id = ? AND substr(d.path, 1, length(?)) = ? AND d.path\(bytewise) > ? AND v.state != 'deleted'
                ORDER BY d.path\(bytewise) LIMIT ?
                """, containerID, prefix, prefix, after ?? "", limit + 1)
            return DocumentList.page(try rows.map(MetadataTransaction.info(row:)), cursor: cursor, limit: limit)
        }
    }

    public func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?, seal: String?)
        async throws -> DocumentInfo
    {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            try tx.lockContainer(containerID)
            guard let document = try tx.documentRow(container: containerID, path: path, create: false),
                let current = document.current,
                let info = try tx.info(document: document.id, path: path, version: current),
                info.state != .deleted
            else {
                throw XferError(.notFound, "no document \(path) in container \(container)")
            }
            if let baseVersion, baseVersion != current {
                throw XferError.conflict(path: path, current: current, base: baseVersion)
            }
            let version = document.latest + 1
            try tx.setState(.superseded, document: document.id, version: current, container: containerID)
            let sequence = try tx.nextSequence(container: containerID)
            let now = MetadataTransaction.now()
            try tx.sql.rows(
                """
                INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, sequence, created_at, manifest_digest)
                VALUES (?, ?, ?, 'deleted', ?, 0, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .int(document.id), .int(version), .int(containerID), .text(info.kind.rawValue),
                    .int(now * 1_000_000_000), .int(Int64(info.mode)),
                    .int(current), .int(sequence), .int(now),
                    seal.flatMap { ChunkID(hex: $0) }.map { .blob($0.bytes) } ?? .null
                ])
            try tx.chargeVersion(account: account, manifestBytes: 0, refusable: false)
            try tx.sql.rows(
                "UPDATE documents SET current_version = ?, latest_version = ? WHERE id = ?", version, version,
                document.id)
            // Its share links and WebDAV properties go with it, whoever deleted it (a device, the
            // web view, WebDAV): a later document at the same path is another one.
            try tx.sql.rows(
                "DELETE FROM share_links WHERE account_id = ? AND container = ? AND path = ?", account, container.value,
                path.value)
            // A package's properties include those of its contents, below its path.
            if info.kind == .package {
                try tx.removeDeadProperties(containerID, below: path.value)
            } else {
                try tx.sql.rows(
                    "DELETE FROM dav_properties WHERE container_id = ? AND path = ?", containerID, path.value)
            }
            try tx.prune(account: account, document: document.id)
            try tx.sql.notifyChanges(container: containerID)
            return try tx.info(document: document.id, path: path, version: version)!
        }
    }

    public func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return ChangeList(changes: [], cursor: after, more: false, head: 0)
            }
            // The head first, and no row past it: on PostgreSQL each statement of a READ
            // COMMITTED transaction sees a newer snapshot, so a change committed between the
            // rows and a later head would fall behind the cursor and never be seen.
            let head = try tx.sql.int("SELECT sequence FROM containers WHERE id = ?", containerID) ?? 0
            let documents = try tx.sql.rows(
                """
                SELECT d.path, \(tx.infoColumns) FROM versions v JOIN documents d ON d.id = v.document_id
                WHERE v.container_id = ? AND v.sequence > ? AND v.sequence <= ? ORDER BY v.sequence LIMIT ?
                """, containerID, after, head, limit + 1
            ).map(MetadataTransaction.info(row:))
            let keys = try tx.sql.rows(
                """
                SELECT * FROM kv WHERE container_id = ? AND sequence > ? AND sequence <= ? ORDER BY sequence LIMIT ?
                """, containerID, after, head, limit + 1
            ).map { try tx.keyValueEntry(row: $0, container: containerID) }
            return ChangeList.page(documents: documents, keys: keys, after: after, head: head, limit: limit)
        }
    }
}

// The version state machine's two steps, shared by announce, commit and commitDirect.
extension MetadataTransaction {
    /// A committed version (the current one if `version` is `nil`) and its manifest, opened.
    /// Throws `not_found` if there is none (or it is a deletion), or the container is `nil`.
    /// Locks nothing: a batch reads many in one transaction, and row locks taken in its order
    /// could deadlock with a batch commit taking them in another.
    func manifest(container: Int64?, path: DocumentPath, version: Int64?) throws -> (
        info: DocumentInfo, manifest: [UInt8]
    ) {
        guard let container,
            let document = try documentRow(container: container, path: path, create: false, locking: false),
            let number = version ?? document.current,
            let info = try info(document: document.id, path: path, version: number),
            [.current, .superseded, .conflict].contains(info.state),
            let blob = try sql.one(
                "SELECT manifest FROM versions WHERE document_id = ? AND version = ?", document.id, number)?
                .optionalBlob("manifest")
        else {
            throw XferError(
                .notFound, version.map { "\(path) has no committed version \($0)" } ?? "\(path) has no current version")
        }
        return (info, try openedManifest(blob, document: document.id, version: number))
    }

    /// Records a pending version. A direct one (committed in the same transaction) is not
    /// counted against the account's pending versions.
    func announce(account: Int64, container: Int64, _ request: AnnounceRequest, direct: Bool) throws -> Announced {
        // The sequence first: it takes the container's lock before any document's.
        let sequence = try nextSequence(container: container)
        try checkNamespace(container: container, path: request.path, kind: request.kind)
        if !direct {
            try AccountLimits.checkNewPending(
                existing: try sql.int(
                    """
                    SELECT COUNT(*) FROM versions WHERE state = 'uploading' AND container_id IN (SELECT id FROM containers WHERE account_id = ?)
                    """, account) ?? 0, policy: policy)
        }
        let document = try documentRow(container: container, path: request.path, create: true)!
        let version = document.latest + 1
        try sql.rows("UPDATE documents SET latest_version = ? WHERE id = ?", version, document.id)
        try sql.rows(
            """
            INSERT INTO versions (document_id, version, container_id, state, kind, size, mtime_ns, mode, base_version, device, sequence, created_at)
            VALUES (?, ?, ?, 'uploading', ?, ?, ?, ?, ?, ?, ?, ?)
            """, document.id, version, container, request.kind.rawValue, request.size, request.mtimeNs, request.mode,
            request.baseVersion, request.device, sequence, Self.now())
        return Announced(
            document: DocumentRow(id: document.id, current: document.current, latest: version), kind: request.kind,
            mtime: request.mtimeNs)
    }

    /// A version just announced in this transaction (and under its container's lock), as
    /// ``commit(account:container:path:version:baseVersion:manifest:encoded:sealed:announced:)``
    /// would read it back.
    struct Announced {
        /// Its document's row as the announcement left it.
        let document: DocumentRow
        let kind: DocumentKind
        let mtime: Int64

        var version: Int64 { document.latest }
        var row: (document: Int64, version: Int64) { (document.id, document.latest) }
    }

    /// Commits an announced version, the container already locked: every chunk must be held
    /// at its declared length, and the conflict rule (``CommitRules/outcome``) decides what
    /// becomes current.
    /// - Parameter sealed: The container is end-to-end encrypted (``isEncrypted(container:)``):
    ///   the manifest is a carrier (docs/FORMAT.md), which cannot know the lengths the server
    ///   holds its sealed chunks at; they are not compared, and the version's size is theirs.
    /// - Parameter announced: The version was announced in this same transaction, under the
    ///   container's lock (a direct commit): its rows are not read again, and the namespace,
    ///   checked by the announcement for the same kind, is not checked twice.
    func commit(
        account: Int64, container: Int64, path: DocumentPath, version: Int64, baseVersion: Int64?,
        manifest: Manifest, encoded: [UInt8], sealed: Bool, announced: Announced? = nil
    ) throws -> DocumentInfo {
        let kind = DocumentKind(manifest.kind)
        let document: DocumentRow
        let mtime: Int64
        if let announced, announced.version == version {
            document = announced.document
            mtime = announced.mtime
            if announced.kind != kind { try checkNamespace(container: container, path: path, kind: kind) }
        } else {
            guard let row = try documentRow(container: container, path: path, create: false),
                let versionRow = try sql.one(
                    "SELECT state, mtime_ns FROM versions WHERE document_id = ? AND version = ?", row.id, version)
            else {
                throw XferError(.notFound, "\(path) has no announced version \(version); announce before committing")
            }
            let state = try versionRow.text("state")
            guard state == VersionState.uploading.rawValue else {
                throw XferError(.conflict, "\(path) version \(version) is already \(state)")
            }
            document = row
            mtime = try versionRow.int("mtime_ns")
            try checkNamespace(container: container, path: path, kind: kind)
        }
        let declared = try CommitRules.distinctChunks(manifest)
        // Where rows are locked one by one, they are locked in id order first and referenced
        // below; else one pass references them and says which are held (a missing one throws,
        // which rolls the references back with the rest).
        let referencedNow = !dialect.locksRows
        let held =
            referencedNow
            ? try referenceHeld(account: account, Array(declared.keys))
            : try heldLengths(account: account, Array(declared.keys))
        let missing = try CommitRules.missing(declared, held: held, compareLengths: !sealed)
        guard missing.isEmpty else { throw XferError.missingChunks(missing) }
        let size = sealed ? held.values.reduce(0, +) : manifest.totalSize
        let digest = ChunkID.of(encoded).bytes
        var outcome = VersionState.current
        if let current = document.current,
            let currentRow = try sql.one(
                "SELECT state, mtime_ns, manifest_digest FROM versions WHERE document_id = ? AND version = ?",
                document.id, current),
            try currentRow.text("state") == VersionState.current.rawValue
        {
            switch CommitRules.outcome(
                current: current, currentDigest: try currentRow.optionalBlob("manifest_digest").map { Data($0) },
                currentMtime: try currentRow.int("mtime_ns"), base: baseVersion, digest: Data(digest),
                mtime: mtime)
            {
            case .replaces: try setState(.superseded, document: document.id, version: current, container: container)
            case .winsConflict: try setState(.conflict, document: document.id, version: current, container: container)
            case .keptAsConflict: outcome = .conflict
            }
        }
        let stored = try storedManifest(encoded, document: document.id, version: version)
        try chargeVersion(account: account, manifestBytes: stored.count, refusable: true)
        let sequence = try nextSequence(container: container)
        try sql.rows(
            """
            UPDATE versions SET state = ?, kind = ?, size = ?, manifest_digest = ?, manifest = ?, files = ?, chunks = ?, base_version = ?, sequence = ?
            WHERE document_id = ? AND version = ?
            """, outcome.rawValue, kind.rawValue, size, digest, stored, manifest.fileCount, manifest.allChunks.count,
            baseVersion, sequence, document.id, version)
        if outcome == .current {
            try sql.rows("UPDATE documents SET current_version = ? WHERE id = ?", version, document.id)
        }
        if !referencedNow { try adjustReferences(account: account, manifest: manifest, by: 1) }
        try prune(account: account, document: document.id)
        return try info(document: document.id, path: path, version: version)!
    }
}
