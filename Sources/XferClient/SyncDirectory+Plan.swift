import Foundation
import XferCore
import XferProtocol

// Deciding: each document's action from the local tree, the state and the server's view (docs/SYNC.md, "One pass"); nothing here changes anything.
extension SyncDirectory {
    /// What a pass should do with one document, and how it stands meanwhile.
    enum Action: Equatable {
        case none, push, pull, deleteRemote, deleteLocal, forget
        /// Out of this device's selection: the local copy goes to the trash, the server keeps it.
        case exclude
        /// The server shows it older than this device saw it (end to end): nothing is changed.
        case rolledBack
    }

    struct Plan {
        var path: DocumentPath
        var action: Action
        var status: DocumentStatus?
        var local: LocalDocument?
        /// The version this directory holds.
        var synced: Int64?
        var remote: DocumentInfo?

        /// Whether it is a directory document here or on the server.
        var isDirectory: Bool { local?.kind == .directory || (local == nil && remote?.kind == .directory) }
    }

    /// Plans every document. `remote` is the server's listing, or `nil` when it is unreachable
    /// (then nothing that needs the server's view is decided).
    /// - Returns: The plans, and the local names that are not valid document paths (skipped).
    func plan(remote listing: [String: DocumentInfo]?, forgetSynced: Bool = false) throws
        -> (plans: [Plan], invalid: [String], unreadable: [String: String])
    {
        let records = try state.records()
        var (local, invalid, ignore, unreadable) = scanLocal(expected: records.count)
        let selection = try passSelection(local: local, records: records)
        // The namespace is a tree (docs/PROTOCOL.md, "Names"): a server that lists a document
        // inside another is not followed there; the inner one is skipped and reported.
        var listing = listing
        if let documents = listing {
            for (key, info) in documents
            where info.path.ancestors.contains(where: { documents[$0].map { !$0.kind.holdsDocuments } ?? false }) {
                listing?[key] = nil
                invalid.append(key)
            }
        }
        let server = remote.connection.server
        let versions = forgetSynced ? [:] : try state.syncedVersions(server: server, container: remote.container)
        // End to end, versions the server shows older than this device saw them are not followed.
        let seen = try remote.seenVersions()?.all() ?? [:]
        var paths = Set(local.keys).union(records.keys)
        if let listing { paths.formUnion(listing.keys) }
        // An ignored path is left alone both ways: never pushed, pulled, or deleted here or
        // there; its record stays for when it is no longer ignored (docs/SYNC.md, "Ignored files").
        paths = paths.filter { key in
            local[key] != nil
                || !ignore.isIgnored(
                    key, isDirectory: [.package, .directory].contains(listing?[key]?.kind ?? records[key]?.kind))
        }
        let plans: [Plan] = try paths.sorted().compactMap { key in
            guard let path = local[key]?.document ?? listing?[key]?.path ?? (try? DocumentPath(key)) else { return nil }
            let synced = versions[key]
            let file = local[key]
            var changed = false
            if let file, let synced, file.kind == .directory {
                // A directory is its mode: the stamp recorded with its version says which.
                changed = synced.stamp != LocalSnapshot.directoryStamp(mode: file.mode)
            } else if let file, let synced {
                // A single file whose stamp is the one recorded with its version is unchanged
                // (size, mtime, inode and ctime: a write or a chmod moves ctime); anything else
                // is compared with the synced manifest.
                if file.stamp == nil || file.stamp?.text != synced.stamp {
                    let clientState = state.clientState(for: path)
                    let document = try clientState.document(server: server, container: remote.container, path: path)
                    do {
                        changed = try !LocalSnapshot(path: file.path, state: clientState).isUnchanged(
                            since: document, state: clientState)
                    } catch {
                        // Gone or unreadable since the scan: a push is planned, and that push
                        // says what happened to this document alone (the pass goes on).
                        changed = true
                    }
                }
            }
            let record = records[key]
            let info = listing?[key]
            var (action, state) = Self.decide(
                local: file != nil, changed: changed, synced: synced?.version,
                evicted: record?.evicted == true, remote: info, remoteKnown: listing != nil, seen: seen[key])
            if file == nil && Self.isUnder(key, unreadable) {
                // Not seen here is not known absent: nothing is deleted, pulled or forgotten
                // under a directory that could not be read.
                (action, state) = (.none, synced == nil ? .pendingDownload : .synced)
            }
            let kind = file?.kind ?? info?.kind ?? record?.kind
            if !selection.includes(key, isDirectory: kind == .directory) {
                (action, state) = Self.leftOut(
                    (action, state), local: file != nil, changed: changed, synced: synced?.version, remote: info,
                    isDirectory: kind == .directory)
            }
            // End to end the server knows no document's true size or time: what this folder recorded says them.
            let described = remote.endToEnd == nil ? info : nil
            let status = DocumentStatus(
                path: key, state: state, kind: info?.kind ?? record?.kind ?? file?.kind ?? .file,
                size: described?.size ?? record?.size ?? 0, mtimeNs: described?.mtimeNs ?? record?.mtimeNs ?? 0,
                localVersion: synced?.version, remoteVersion: info?.state == .current ? info?.version : nil,
                conflicts: info?.conflicts ?? [])
            return Plan(
                path: path, action: action, status: action == .forget ? nil : status, local: file,
                synced: synced?.version, remote: info)
        }
        return (plans.map(keepingIgnoredFiles), invalid, unreadable)
    }

    /// The decision table (docs/SYNC.md): a local edit is pushed (the server settles a stale
    /// base as a conflict), a remote change is pulled over an unchanged local copy, deletes
    /// travel both ways, and a remote edit wins over a local delete. A current version older
    /// than the one `seen` current before is a rollback: nothing is done, either way.
    static func decide(
        local: Bool, changed: Bool, synced: Int64?, evicted: Bool, remote: DocumentInfo?,
        remoteKnown: Bool, seen: Int64? = nil
    ) -> (Action, DocumentSyncState) {
        let current = remote?.state == .current ? remote : nil
        if let current, let seen, current.version < seen { return (.rolledBack, .rolledBack) }
        let settled: DocumentSyncState = remote?.conflicts?.isEmpty == false ? .conflict : .synced
        if evicted && !local {
            if remoteKnown && remote == nil { return (.forget, .synced) }
            return (.none, .evicted)
        }
        if local {
            if synced == nil || changed { return (.push, .pendingUpload) }
            guard remoteKnown else { return (.none, .synced) }
            if let current, current.version != synced { return (.pull, .pendingDownload) }
            if remote == nil { return (.deleteLocal, .pendingDownload) }
            return (.none, settled)
        }
        guard remoteKnown else { return (.none, synced == nil ? .pendingDownload : .pendingUpload) }
        if let synced {
            if let current, current.version != synced { return (.pull, .pendingDownload) }
            if current != nil { return (.deleteRemote, .pendingUpload) }
            if remote == nil { return (.forget, .synced) }
            return (.none, .pendingDownload)
        }
        if current != nil { return (.pull, .pendingDownload) }
        // A record of a document held nowhere (neither here nor on the server, no version
        // synced: left after a server change) is dropped, not shown pending forever.
        if remote == nil { return (.forget, .synced) }
        return (.none, .pendingDownload)
    }

    /// One pass's plans over `listing`, with the deletions the mass-deletion rule holds back
    /// set apart. Decides only; changes nothing (``SyncEngine/syncOnce()`` acts on it, and
    /// ``preview()`` prints it).
    struct PassPlan {
        /// What to do, held deletions left out.
        var plans: [Plan]
        /// The deletions held back.
        var held: [Plan]
        /// How many local and remote deletions are held, of how many documents.
        var heldCounts: (local: Int, remote: Int, total: Int)
        /// Local names that are not valid document paths (skipped).
        var invalid: [String]
        /// Local paths that could not be read, with why: nothing under them was decided.
        var unreadable: [String: String] = [:]
        /// End to end: names on the server that do not open under the key (``Listing/unopened``).
        var unopened = 0
        /// The local deletions held because of them: the document may be one of those names.
        var heldForNames: Set<DocumentPath> = []
        /// End to end, the local deletions held because no device holding the key sealed them
        /// (``unsealedDeletions(_:)``).
        var heldUnsealed: Set<DocumentPath> = []
    }

    /// Raises this directory's marks (``SeenVersions``) to what `listing` shows current, end to
    /// end (a plain container's server is trusted with its versions as with their bytes).
    func raiseSeen(_ listing: Listing) throws {
        guard let seen = try remote.seenVersions() else { return }
        let marks = try seen.all()
        // Only the marks that move: a pass over a large, settled container writes nothing.
        let higher = listing.documents.values.filter { $0.state == .current && $0.version > marks[$0.path.value] ?? 0 }
        try seen.raise(higher.map { ($0.path, $0.version) })
    }

    /// The mark of one document (end to end), if it has one.
    func seen(_ path: DocumentPath) throws -> Int64? {
        try remote.seenVersions()?.mark(path)
    }

    /// Plans a pass. `serverChanged`: the server is not the one this directory synced with,
    /// so no document counts as synced and nothing can be decided deleted.
    func planPass(_ listing: Listing, serverChanged: Bool) async throws -> PassPlan {
        let (all, invalid, unreadable) = try plan(remote: listing.documents, forgetSynced: serverChanged)
        // Removing a directory loses nothing (it goes only when empty): the rule counts the rest.
        func counted(_ plan: Plan) -> Action { plan.isDirectory ? .none : plan.action }
        var held = MassDeletion.held(all.map { (counted($0), $0.synced != nil) }, allowed: options.allowMassDelete)
        // A deletion that is half of a move loses nothing: it is not what the rule guards against.
        var moved = Set<DocumentPath>()
        if held.local > 0 || held.remote > 0 {
            moved = try await moves(all)
            held = MassDeletion.held(
                all.map { (moved.contains($0.path) ? .none : counted($0), $0.synced != nil) },
                allowed: options.allowMassDelete)
        }
        // A view that lacks a name it could not open may lack a document held here: it is not
        // known deleted on the server, so it stays (docs/SYNC.md, "Names that do not open").
        let heldForNames = listing.unopened > 0 ? Set(all.filter { $0.action == .deleteLocal }.map(\.path)) : []
        // Nor a deletion the server could have made up.
        let heldUnsealed = try await unsealedDeletions(all.filter { !heldForNames.contains($0.path) })
        func isHeld(_ plan: Plan) -> Bool {
            if heldForNames.contains(plan.path) || heldUnsealed.contains(plan.path) { return true }
            guard !moved.contains(plan.path) else { return false }
            return (held.local > 0 && plan.action == .deleteLocal) || (held.remote > 0 && plan.action == .deleteRemote)
        }
        return PassPlan(
            plans: all.filter { !isHeld($0) }, held: all.filter(isHeld), heldCounts: held, invalid: invalid,
            unreadable: unreadable, unopened: listing.unopened, heldForNames: heldForNames, heldUnsealed: heldUnsealed)
    }

    /// End to end: the local deletions whose deletion on the server a device holding the key
    /// did not seal (``EndToEndKeys/deletionSeal(of:at:)``), or sealed for a version older than
    /// this device holds or has seen current. The others raise their document's mark to the
    /// deletion. A plain container's server is trusted with deletions as with content.
    func unsealedDeletions(_ plans: [Plan]) async throws -> Set<DocumentPath> {
        guard let keys = remote.endToEnd, let seen = try remote.seenVersions() else { return [] }
        var unsealed = Set<DocumentPath>()
        for plan in plans where plan.action == .deleteLocal {
            let sealedPath = try remote.serverPath(plan.path)
            var deletion: DocumentInfo? = nil
            do {
                deletion = try await remote.connection.stat(container: remote.container, path: sealedPath)
            } catch let error as XferError where error.code == .notFound {
                deletion = nil  // no trace of a deletion: nothing says a device made one
            }
            // Of the version held here or a later one, and of one seen current at least (the
            // mark may be this very deletion's, raised by an earlier pass that held it back).
            let mark = try seen.mark(plan.path) ?? 0
            if let deletion, deletion.state == .deleted, let base = deletion.baseVersion, base >= plan.synced ?? 0,
                base >= mark || mark == deletion.version,
                keys.isDeletionSeal(deletion.manifestDigest, of: base, at: sealedPath.value)
            {
                try seen.raise([(plan.path, deletion.version)])
            } else {
                unsealed.insert(plan.path)
            }
        }
        return unsealed
    }

    /// The deletions that are one half of a move (a renamed directory): the content goes on
    /// under another name, so the mass-deletion rule does not count them. Gone here: the same
    /// file (inode, size, modification time) is here under another name. Deleted on the server:
    /// a current document there has the very manifest (content, mode and time) of the version
    /// held here; in an end-to-end encrypted container, whose records the server cannot compare
    /// (each is bound to its name), the very content (``arrivedContents(_:)``). Either may have
    /// arrived in an earlier pass (a rename seen half way).
    func moves(_ plans: [Plan]) async throws -> Set<DocumentPath> {
        var moved = Set<DocumentPath>()
        func identity(_ stamp: FileStamp) -> String { "\(stamp.size):\(stamp.mtimeNanoseconds):\(stamp.inode)" }
        let arrivedHere = Set(plans.compactMap { plan -> String? in plan.local?.stamp.map(identity) })
        if !arrivedHere.isEmpty {
            let synced = try state.syncedVersions(server: remote.connection.server, container: remote.container)
            for plan in plans where plan.action == .deleteRemote {
                guard let text = synced[plan.path.value]?.stamp else { continue }
                if arrivedHere.contains(text.split(separator: ":").prefix(3).joined(separator: ":")) {
                    moved.insert(plan.path)
                }
            }
        }
        let sealed = remote.endToEnd != nil
        let deletedHere = plans.filter { $0.action == .deleteLocal }
        let arrivedThere =
            deletedHere.isEmpty
            ? []
            : sealed
                ? try await arrivedContents(plans)
                : Set(
                    plans.compactMap { plan -> String? in
                        plan.remote?.state == .current ? plan.remote?.manifestDigest : nil
                    })
        if !arrivedThere.isEmpty {
            for plan in deletedHere {
                guard
                    let held = try state.clientState(for: plan.path)
                        .document(server: remote.connection.server, container: remote.container, path: plan.path)
                else { continue }
                if arrivedThere.contains(
                    sealed ? Self.contentKey(held.manifest.allChunks.lazy.map(\.id)) : held.manifest.digest.hex)
                {
                    moved.insert(plan.path)
                }
            }
        }
        return moved
    }

    /// A key of the chunks a document's content is made of (its distinct chunk ids, sorted):
    /// the same for the same content under any name, in any version.
    static func contentKey(_ ids: some Sequence<ChunkID>) -> String {
        var hasher = SHA256Hasher()
        var last: ChunkID? = nil
        for id in Array(ids).sorted() where id != last {
            last = id
            id.bytes.withUnsafeBytes { hasher.update($0) }
        }
        return hasher.finalize().hex
    }

    /// End to end, the content keys (``contentKey(_:)``) of the server's current documents:
    /// from this folder's records for those it holds at their current version, from their
    /// carriers (one request a thousand documents) for those it is to pull. A carrier lists its
    /// sealed manifest's pieces and then the document's distinct chunks, sorted: its content's
    /// key is that of what follows its first one to four pieces (a manifest of under 192 KiB
    /// is one), each taken.
    func arrivedContents(_ plans: [Plan]) async throws -> Set<String> {
        var keys = Set<String>()
        var arriving: [DocumentPath] = []
        for plan in plans where plan.remote?.state == .current && !plan.isDirectory {
            if plan.action == .pull {
                arriving.append(plan.path)
            } else if let version = plan.synced, version == plan.remote?.version,
                let held = try state.clientState(for: plan.path)
                    .document(server: remote.connection.server, container: remote.container, path: plan.path)
            {
                keys.insert(Self.contentKey(held.manifest.allChunks.lazy.map(\.id)))
            }
        }
        for batch in arriving.batched(atMost: ProtocolLimits.maximumBatchDocuments) {
            let sealedPaths = try batch.map { try remote.serverPath($0) }
            let items = try await remote.connection.manifests(
                container: remote.container, sealedPaths.map { ManifestBatchRequest.Wanted(path: $0) })
            for (item, path) in zip(items, sealedPaths) {
                // Anything amiss leaves that document out: its deletion's twin is then not found, and held.
                guard let carrier = item.checked(for: path)?.manifest,
                    let references = try? EndToEndKeys.references(of: carrier)
                else { continue }
                for pieces in 1...min(4, references.count) {
                    keys.insert(Self.contentKey(references[pieces...].lazy.map(\.id)))
                }
            }
        }
        return keys
    }

    /// What one pass would do now, found without changing anything here or on the server
    /// (`xfer sync --dry-run`): the server is asked for its listing only, nothing is recorded.
    public func preview() async throws -> SyncPreview {
        try await ClientThreads.run {
            try checkFolder(create: false)
            let listing = try await serverView()
            let change = try serverChange(listing)
            let pass = try await planPass(listing, serverChanged: change != nil)
            var steps: [SyncPreview.Step] = pass.invalid.map {
                SyncPreview.Step(
                    action: .skipped, path: $0, kind: .file,
                    reason: "not a valid document name (docs/PROTOCOL.md, Names); not synced")
            }
            for plan in pass.plans {
                let kind = plan.local?.kind ?? plan.remote?.kind ?? plan.status?.kind ?? .file
                let current = plan.remote?.state == .current ? plan.remote?.version : nil
                switch plan.action {
                case .push:
                    var reason = plan.synced == nil ? "new here" : "changed here since v\(plan.synced!)"
                    if let current, current != plan.synced {
                        reason +=
                            "; the server has v\(current): both are kept, the later edit current and the other a conflict version"
                    }
                    steps.append(.init(action: .upload, path: plan.path.value, kind: kind, reason: reason))
                case .pull:
                    let reason =
                        plan.synced == nil
                        ? "v\(current ?? 0) on the server, not here"
                        : "v\(current ?? 0) on the server replaces v\(plan.synced!) here (kept in the trash)"
                    steps.append(.init(action: .download, path: plan.path.value, kind: kind, reason: reason))
                case .deleteLocal:
                    steps.append(
                        .init(
                            action: .deleteLocal, path: plan.path.value, kind: kind,
                            reason: plan.isDirectory
                                ? "deleted on the server; removed here once it is empty"
                                : "deleted on the server; moved to the trash here"
                                    + (options.trashDays > 0 ? "" : " (no trash: --trash-days 0)")))
                case .deleteRemote:
                    steps.append(
                        .init(action: .deleteRemote, path: plan.path.value, kind: kind, reason: "deleted here"))
                case .rolledBack:
                    steps.append(
                        .init(
                            action: .held, path: plan.path.value, kind: kind,
                            reason:
                                "the server shows v\(current ?? 0), older than a version it showed this device: rolled back; kept here"
                        ))
                case .exclude:
                    steps.append(
                        .init(
                            action: .exclude, path: plan.path.value, kind: kind,
                            reason: plan.isDirectory
                                ? "left out of this device's selection; removed here once it is empty, kept on the server"
                                : "left out of this device's selection; moved to the trash here, kept on the server"))
                case .none, .forget:
                    break
                }
            }
            for plan in pass.held {
                let reason =
                    pass.heldUnsealed.contains(plan.path)
                    ? "deleted on the server without a deletion sealed by a device holding the key: kept here"
                    : pass.heldForNames.contains(plan.path)
                        ? "not in the server's listing, which has \(pass.unopened) name\(pass.unopened == 1 ? "" : "s") that do not open under the container's key: kept here (xfer verify --documents)"
                        : "\(plan.action == .deleteLocal ? "deleted on the server" : "deleted here"): held back, more than \(MassDeletion.minimumCount) deletions and a third of \(pass.heldCounts.total) documents (--allow-mass-delete lets them go)"
                steps.append(
                    .init(action: .held, path: plan.path.value, kind: plan.status?.kind ?? .file, reason: reason))
            }
            for info in listing.documents.values
            where info.conflicts?.isEmpty == false && pass.plans.contains(where: { $0.path == info.path }) {
                steps.append(
                    .init(
                        action: .conflict, path: info.path.value, kind: info.kind,
                        reason:
                            "v\(info.version) is current; conflict versions \((info.conflicts ?? []).map { "v\($0)" }.joined(separator: ", ")) are kept on the server"
                    ))
            }
            steps.sort { ($0.path, $0.action.rawValue) < ($1.path, $1.action.rawValue) }
            return SyncPreview(directory: directory, serverChanged: change, steps: steps)
        }
    }

    /// Every document's status: with the server's view if it answers, else from local state
    /// alone (`reachable` false).
    public func status() async throws -> (documents: [DocumentStatus], reachable: Bool) {
        try await ClientThreads.run {
            try checkFolder(create: false)
            let listing = try? await serverView()
            let changed = try listing.map { try serverChange($0) } ?? nil
            return (
                try plan(remote: listing?.documents, forgetSynced: changed != nil).plans.compactMap(\.status),
                listing != nil
            )
        }
    }

    /// What the user should know about this directory's server: that it was found replaced,
    /// when, and what was done about it.
    public func notices() throws -> [String] {
        try state.meta("server_notice").map { [$0] } ?? []
    }
}
