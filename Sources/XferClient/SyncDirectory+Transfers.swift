import Foundation
import XferCore
import XferProtocol

// Doing: pushes, pulls and deletions of single documents and batches, evicting and fetching, through the confined writer.
extension SyncDirectory {
    /// Removes a synced document's local data, keeping its metadata: it stays in `status` as
    /// evicted until ``fetch(_:)``. The server is asked first (one request) whether it holds the
    /// version synced here, as it was synced: the local copy is never removed on the word of
    /// this directory's records alone (the server at the address may be another one, or one
    /// restored from a backup taken before that version).
    /// - Throws: `not_found` if it is not synced here, `conflict` if it has unsynced changes or
    ///   the server does not hold its version; `unavailable` and the rest from the server.
    public func evict(_ path: DocumentPath) async throws {
        try await ClientThreads.run {
            let clientState = state.clientState(for: path)
            guard var record = try state.records()[path.value],
                let synced = try clientState.document(
                    server: remote.connection.server, container: remote.container, path: path)
            else {
                throw XferError(.notFound, "\(path) is not a synced document of \(directory)")
            }
            if record.evicted { return }
            guard record.kind != .directory else {
                throw XferError(
                    .badRequest,
                    "\(path) is a directory, which holds no data of its own; evict the documents in it instead")
            }
            let full = directory + "/" + path.value
            guard try LocalSnapshot(path: full, state: clientState).isUnchanged(since: synced, state: clientState)
            else {
                throw XferError(.conflict, "\(path) has changes that are not on the server yet; sync first, then evict")
            }
            guard try await remote.holds(synced, at: try remote.serverPath(path)) else {
                throw XferError(
                    .conflict,
                    "the server at \(remote.connection.server) does not hold v\(synced.version) of \(path) as it was synced here (another server at this address, or one restored from an older backup): the local copy may be the only one, so nothing was removed; sync first, then evict"
                )
            }
            try remove(path)
            record.evicted = true
            try state.put(record)
        }
    }

    /// Brings an evicted (or missing) document back: pulls the server's current version.
    /// - Returns: The pull's report.
    @discardableResult
    public func fetch(_ path: DocumentPath, progress: @escaping @Sendable (TransferProgress) -> Void = { _ in })
        async throws -> PullReport
    {
        try await ClientThreads.run {
            try await pull(path, progress: progress)
        }
    }

    func push(_ plan: Plan, progress: @escaping @Sendable (TransferProgress) -> Void) async throws -> PushReport {
        var pushOptions = options.push
        pushOptions.force = false
        pushOptions.exclude = []  // a package keeps to its own .xferignore files and the defaults
        let report = try await PushEngine(remote: remote, options: pushOptions)
            .push(
                plan.local!.path, as: plan.path, state: state.clientState(for: plan.path),
                directoryItself: plan.local!.kind == .directory, progress: progress)
        try record(
            plan.path, kind: plan.local!.kind, size: report.bytes,
            mtimeNs: try DirectoryWalker.entry(at: plan.local!.path).mtimeNanoseconds)
        return report
    }

    /// The most a document may hold and still go in a batch (``pushMany(_:progress:)``): larger
    /// ones are announced before their data moves, so other devices see them coming.
    static let batchedDocumentBytes: Int64 = 4 << 20

    /// Whether a plan goes in a batch: a directory, or a file or symlink of at most
    /// ``batchedDocumentBytes``, as it is here for a push and on the server for a pull.
    static func isBatched(_ plan: Plan) -> Bool {
        switch plan.action {
        case .push:
            return plan.local?.kind == .directory
                || (plan.local?.kind == .file && (plan.local?.stamp?.size ?? 0) <= batchedDocumentBytes)
        case .pull:
            return plan.remote?.kind == .directory
                || (plan.remote?.kind == .file && (plan.remote?.size ?? .max) <= batchedDocumentBytes)
        default: return false
        }
    }

    /// Pushes many small documents together (``PushEngine/pushMany(_:progress:)``), recording
    /// each that went through in one transaction. One result per plan, in order.
    func pushMany(_ plans: [Plan], progress: @escaping @Sendable (TransferProgress) -> Void) async throws
        -> [Result<PushReport, any Error>]
    {
        var pushOptions = options.push
        pushOptions.force = false
        pushOptions.exclude = []
        let items = plans.map {
            PushItem(
                path: $0.local!.path, name: $0.path, state: state.clientState(for: $0.path),
                directoryItself: $0.local!.kind == .directory)
        }
        var results = try await PushEngine(remote: remote, options: pushOptions).pushMany(items, progress: progress)
        try state.database.batch {
            for (index, plan) in plans.enumerated() {
                guard case .success(let report) = results[index] else { continue }
                do {
                    try record(
                        plan.path, kind: plan.local!.kind, size: report.bytes,
                        mtimeNs: try DirectoryWalker.entry(at: plan.local!.path).mtimeNanoseconds)
                } catch let error as XferError where error.isVanished {
                    results[index] = .failure(error)  // gone since: the next pass sees it gone
                }
            }
        }
        return results
    }

    func pull(
        _ path: DocumentPath, sources: ChunkSources? = nil, prefetched: PullEngine.Prefetched? = nil,
        progress: @escaping @Sendable (TransferProgress) -> Void
    ) async throws -> PullReport {
        var pullOptions = options.pull
        pullOptions.force = false
        let full = directory + "/" + path.value
        // Every write lands beneath the synced root, through directories opened without
        // following a symlink: a document named below a symlink is refused, not written.
        let root = try root()
        let parent = try root.directory(path.components.dropLast(), create: true)
        let report = try await remote.naming {
            try await PullEngine(remote: remote, options: pullOptions)
                .pull(
                    path, in: parent, as: String(path.components.last!), state: state.clientState(for: path),
                    trash: trash(of: root), sources: sources, prefetched: prefetched,
                    stagingArea: try root.directory([Self.stagingName], create: true), progress: progress)
        }
        let top = try DirectoryWalker.entry(at: full)
        try record(path, kind: report.kind, size: report.bytes, mtimeNs: top.mtimeNanoseconds)
        return report
    }

    /// Removes a document deleted on the server (or left out of this device's selection,
    /// ``Action/exclude``), unless it changed here (then it is pushed again). A directory goes
    /// only when it is empty: one that still holds anything (a new file, an ignored one) stays,
    /// with its record, and is tried again by a later pass.
    /// - Returns: Whether it is gone.
    func deleteLocal(_ plan: Plan) throws -> Bool {
        let why = plan.action == .exclude ? "left out of this device's selection" : "deleted on the server"
        if let local = plan.local, local.kind == .directory {
            let parent: ConfinedDirectory
            do {
                parent = try root().directory(plan.path.components.dropLast(), create: false)
            } catch let error as XferError where error.isVanished {
                try state.forget(plan.path)
                return true
            }
            guard try parent.removeEmptyDirectory(String(plan.path.components.last!)) else { return false }
            try parent.synchronize()
        } else if let local = plan.local {
            let clientState = state.clientState(for: plan.path)
            let synced = try clientState.document(
                server: remote.connection.server, container: remote.container, path: plan.path)
            guard synced?.version == plan.synced,
                try LocalSnapshot(path: local.path, state: clientState).isUnchanged(since: synced, state: clientState)
            else {
                throw XferError(.conflict, "\(plan.path) was \(why) but changed here; it will be pushed first")
            }
            try remove(plan.path, toTrash: why)
        }
        try state.forget(plan.path)
        return true
    }

    func deleteRemote(_ plan: Plan) async throws -> Bool {
        do {
            _ = try await remote.naming {
                let path = try remote.serverPath(plan.path)
                return try await remote.connection.delete(
                    container: remote.container, path: path, baseVersion: plan.synced,
                    seal: remote.deletionSeal(path, base: plan.synced))
            }
        } catch let error as XferError where error.code == .notFound {
            // Already gone.
        } catch let error as XferError where error.code == .conflict {
            return false  // changed on the server since: the remote edit wins over the local delete
        }
        try state.forget(plan.path)
        return true
    }

    func record(_ path: DocumentPath, kind: DocumentKind, size: Int64, mtimeNs: Int64) throws {
        try state.put(
            SyncRecord(
                path: path.value, kind: kind, evicted: false, size: size, mtimeNs: mtimeNs,
                lastUsedNs: Int64(Date().timeIntervalSince1970 * 1e9)))
    }

    /// Evicts least recently used synced documents until local data fits `limit`.
    func enforceLocalLimit(_ limit: Int64, plans: [Plan]) async throws -> [DocumentPath] {
        let records = try state.records()
        var candidates = plans.filter {
            $0.status?.state == .synced && $0.local != nil && !$0.isDirectory
                && records[$0.path.value]?.evicted == false
        }
        var total = candidates.reduce(Int64(0)) { $0 + (records[$1.path.value]?.size ?? 0) }
        guard total > limit else { return [] }
        func lastUsed(_ plan: Plan) -> Int64 {
            var info = stat()
            let accessed =
                lstat(plan.local!.path, &info) == 0
                ? Int64(info.st_atim.tv_sec) * 1_000_000_000 + Int64(info.st_atim.tv_nsec) : 0
            return max(accessed, records[plan.path.value]?.lastUsedNs ?? 0)
        }
        candidates.sort { lastUsed($0) < lastUsed($1) }
        var evicted: [DocumentPath] = []
        for plan in candidates where total > limit {
            // Asked of the server now, one document at a time: this pass's view may be a cached
            // listing followed through the feed, which a server restored from an older backup
            // need not contradict. One it does not confirm (or changed since) stays.
            do {
                try await evict(plan.path)
            } catch let error as XferError where error.code == .conflict {
                continue
            }
            total -= records[plan.path.value]?.size ?? 0
            evicted.append(plan.path)
        }
        return evicted
    }

    /// The hidden directory at the root where pulls build what they download, renamed into
    /// place once complete: nothing half-written ever appears among the folder's files.
    public static let stagingName = ".xfer-staging"

    /// Removes staging copies left more than `age` ago (a pull interrupted and never resumed,
    /// a document deleted since); younger ones are kept for a resumed pull to reuse.
    func tidyStaging(olderThan age: Duration) throws {
        guard let area = try? root().directory([Self.stagingName], create: false) else { return }
        let cutoff = Date().timeIntervalSince1970 - age.seconds
        for name in try area.names() {
            guard let info = area.status(name), Double(info.st_mtim.tv_sec) < cutoff else { continue }
            try area.remove(name)
        }
    }

    /// The synced root, opened for confined writes (docs/SECURITY.md, "One confined writer").
    func root() throws -> ConfinedDirectory {
        try ConfinedDirectory(opening: directory)
    }

    /// Removes a document's local data through the confined writer: its parent directories are
    /// opened beneath the root without following a symlink, and the document itself (a file,
    /// a symlink, or a package tree) is removed as what it is, never followed. With a reason,
    /// it goes to the directory's trash instead (unless the trash is turned off).
    func remove(_ path: DocumentPath, toTrash reason: String? = nil) throws {
        let root = try root()
        let parent: ConfinedDirectory
        do {
            parent = try root.directory(path.components.dropLast(), create: false)
        } catch let error as XferError where error.code == .notFound {
            return
        }
        let name = String(path.components.last!)
        if let reason, let trash = trash(of: root) {
            try trash.keep(name, in: parent, path: path, reason: reason)
        } else {
            try parent.remove(name)
        }
    }

    /// The directory's trash (``Trash``).
    public func trash() throws -> Trash {
        Trash(root: try root())
    }

    /// Where what sync deletes or replaces goes first: the trash of `root`, unless it is turned off.
    func trash(of root: ConfinedDirectory) -> Trash? {
        options.trashDays > 0 ? Trash(root: root) : nil
    }
}
