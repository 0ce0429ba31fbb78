import Foundation
import XferCore
import XferProtocol

// The server's view a pass decides from: listed, or followed from the change feed, and checked to be the server this directory synced with (docs/SYNC.md, "Following the feed").
extension SyncDirectory {
    /// The server's documents, by path, with the change-feed cursor they were read at and the
    /// server's deployment identity.
    struct Listing {
        var documents: [String: DocumentInfo]
        var cursor: Int64
        var deployment: String?
        /// The paths brought up to date from the change feed since the full listing this view
        /// grew from (`nil`: it is that full listing).
        var changed: Set<String>? = nil
        /// When that full listing was read, seconds since 1970.
        var listedAt = Date().timeIntervalSince1970
        /// Set when the server holds a version this directory saw with other content (see
        /// ``SyncDirectory/divergence(of:from:)``): why it is not the server it synced with.
        var divergence: String? = nil
        /// End to end: how many listed names do not open under the container's key (damaged on
        /// the server, or written without the key). Such a view may lack a document this
        /// directory holds, so a pass deletes nothing here while it is not zero.
        var unopened = 0
    }

    /// The server's whole listing, every page read. In an end-to-end encrypted container by
    /// the names this device knows: a sealed name that does not open under the key is left out
    /// and counted (``Listing/unopened``). It may be a document of this folder's whose name was
    /// damaged on the server, so the pass it is for holds its local deletions.
    func listing() async throws -> Listing {
        let list = try await remote.connection.list(container: remote.container, prefix: "")
        let (documents, unopened) = remote.named(list.documents)
        return Listing(
            documents: Dictionary(documents.map { ($0.path.value, $0) }, uniquingKeysWith: { $1 }),
            cursor: list.cursor, deployment: list.deployment, unopened: unopened)
    }

    /// The meta key of the last settled pass: one that planned every document, found nothing
    /// to do and left nothing failed, held, waiting or in conflict ("CURSOR LISTED_AT"; empty
    /// once a pass that may change something has begun).
    static let settledKey = "settled"

    /// Whether nothing changed on either side since the last settled pass, found without
    /// planning (docs/SYNC.md, "Following the feed"): the change feed has nothing after that
    /// pass's cursor (same deployment, head not gone back), the full listing it grew from is
    /// younger than ``SyncOptions/fullListingInterval``, and the scan finds exactly the
    /// documents this directory holds versions of, each a single file whose stamp (size, mtime,
    /// inode, ctime) is the one recorded with its version, or a directory with the mode
    /// recorded with its version. Anything else (a symlink, a package,
    /// an evicted document, a name that cannot be read, a local limit) answers `false`, and
    /// the pass plans every document as usual.
    func nothingChanged() async throws -> Bool {
        guard options.followFeed, options.localLimit == nil,
            let settled = try state.meta(Self.settledKey)?.split(separator: " "), settled.count == 2,
            let cursor = Int64(settled[0]), let listedAt = Double(settled[1]),
            Date().timeIntervalSince1970 - listedAt < options.fullListingInterval.seconds,
            let deployment = try state.meta("deployment")
        else { return false }
        let page = try await remote.connection.changes(container: remote.container, after: cursor, wait: 0)
        guard page.deployment == deployment, page.changes.isEmpty, page.keys.isEmpty, !page.more,
            page.cursor == cursor, page.head == cursor
        else { return false }
        let versions = try state.syncedVersions(server: remote.connection.server, container: remote.container)
        var seen = 0
        var same = true
        let (invalid, _, unreadable) = walkLocal { key, document in
            // The first difference ends the walk: the pass plans instead.
            let stamp =
                document.kind == .directory ? LocalSnapshot.directoryStamp(mode: document.mode) : document.stamp?.text
            guard document.kind != .package, let stamp, let synced = versions[key], synced.stamp == stamp else {
                same = false
                return false
            }
            seen += 1
            return true
        }
        return same && invalid.isEmpty && unreadable.isEmpty && seen == versions.count
    }

    /// More changed paths than this since the kept view, and a pass lists everything instead.
    static let feedFollowLimit = 1000

    /// How many changed paths a pass asks about one by one (one request each) before it lists
    /// instead: a listing page holds up to 10,000 documents, so for a view of `known` documents
    /// it is the cheaper way once more than a fiftieth of them changed (at least 64 are always
    /// followed, at most ``feedFollowLimit``). A first sync of 700 files asked 707 times about
    /// the documents it had just committed, where one listing answers all of them.
    static func followLimit(known: Int) -> Int {
        min(feedFollowLimit, max(64, known / 50))
    }

    /// The server's documents for a pass: the view the last pass kept, brought up to date from
    /// the change feed (one request when nothing changed), when that is safe; else the whole
    /// listing. Safe means: a view was kept, it grew from a listing younger than
    /// ``SyncOptions/fullListingInterval``, the server is the same deployment and its history
    /// has not gone back past the view's cursor, and few paths changed. Either way the view
    /// is complete or this throws: a pass never decides from part of one.
    func serverView() async throws -> Listing {
        let kept = try state.remoteView()
        var view: Listing
        if options.followFeed, let kept,
            Date().timeIntervalSince1970 - kept.listedAt < options.fullListingInterval.seconds,
            let deployment = try state.meta("deployment"),
            let followed = try await following(
                Listing(
                    documents: kept.documents, cursor: kept.cursor, deployment: deployment,
                    changed: [], listedAt: kept.listedAt))
        {
            switch followed.cursor > kept.cursor ? try await history(kept: kept.documents, followed: followed) : .same {
            case .same:
                view = followed
            case .unchecked:
                // Every document the view knew changed since: nothing left to check the
                // history by, so the server is read whole.
                view = try await listing()
            case .broken(let broken):
                // Another history since the view's cursor: everything is read again, and the
                // pass takes the server as a new one (``serverChange(_:)``).
                view = try await listing()
                view.divergence = broken
                return view
            }
        } else {
            view = try await listing()
        }
        if let kept { view.divergence = divergence(of: view, from: kept.documents) }
        return view
    }

    /// Whether the feed followed from the kept view's cursor continues the history the view
    /// was read from (``history(kept:followed:)``).
    enum History: Equatable {
        case same
        /// Why the server no longer holds a change the view saw.
        case broken(String)
        /// Nothing to check by: every document the view knew changed since.
        case unchecked
    }

    /// Whether the server still holds the changes the kept view saw. A server restored from an
    /// older copy hands out the lost changes' numbers again, so once its feed has moved past
    /// the view's cursor the changes after it say nothing of what came between: the newest
    /// change the view knows of a document the feed did not report changed since must still be
    /// at its number, the same document at the same version. (A device that adopted the
    /// restored server uploads again what it holds, so the newest document of all is likely
    /// among the changes.) Asked only when the feed has something after the view's cursor, so
    /// an idle pass costs one request still.
    func history(kept: [String: DocumentInfo], followed: Listing) async throws -> History {
        guard let changed = followed.changed else { return .same }
        let committed: Set<VersionState> = [.current, .conflict]
        guard
            let anchor = kept.values.filter({ committed.contains($0.state) && !changed.contains($0.path.value) })
                .max(by: { $0.sequence < $1.sequence })
        else { return kept.values.contains { committed.contains($0.state) } ? .unchecked : .same }
        return try await brokenHistory(anchor, followed: followed).map { .broken($0) } ?? .same
    }

    /// Why the server no longer holds `anchor` at its change number, or `nil` if it does (or
    /// moved it on after the feed was read, ``movedOn(_:after:)``).
    func brokenHistory(_ anchor: DocumentInfo, followed: Listing) async throws -> String? {
        let page = remote.named(
            try await remote.connection.changes(
                container: remote.container, after: anchor.sequence - 1, wait: 0, limit: 1))
        if let first = page.changes.first, first.sequence == anchor.sequence, first.path == anchor.path,
            first.version == anchor.version
        {
            return nil
        }
        if page.changes.first?.sequence != anchor.sequence,
            try await movedOn(anchor, after: followed.cursor)
        {
            return nil
        }
        return "the server at \(remote.connection.server) no longer holds change \(anchor.sequence) "
            + "(\(anchor.path) version \(anchor.version)) that this directory saw: it was restored from an older copy or replaced"
    }

    /// Whether `anchor`'s version is kept as it was and moved on the feed past `cursor`: a
    /// version that changes state (superseded by a deletion or a push from another device)
    /// takes a new number, so a change made after the view was followed leaves the old number
    /// empty without anything lost.
    func movedOn(_ anchor: DocumentInfo, after cursor: Int64) async throws -> Bool {
        let path = try remote.serverPath(anchor.path)
        guard
            let kept = try await remote.connection.statIfKept(
                container: remote.container, path: path, version: anchor.version)
        else { return false }
        return kept.sequence > cursor && kept.manifestDigest == anchor.manifestDigest
    }

    /// Why `view` cannot come from the history `kept` was read from, or `nil`: a document at
    /// the same version number with another manifest. Version numbers are never reused on one
    /// server, so that is a server restored from an older copy whose feed has since moved past
    /// the position this directory saw (the cursor alone cannot tell), or another server.
    func divergence(of view: Listing, from kept: [String: DocumentInfo]) -> String? {
        let paths = view.changed.map { Array($0) } ?? Array(view.documents.keys)
        for path in paths {
            // Committed versions only: an announced one that expired may see its number again.
            let committed: Set<VersionState> = [.current, .superseded, .conflict]
            guard let now = view.documents[path], let before = kept[path], now.version == before.version,
                committed.contains(now.state), committed.contains(before.state),
                let digest = now.manifestDigest, let seen = before.manifestDigest, digest != seen
            else { continue }
            return
                "the server at \(remote.connection.server) holds another version \(now.version) of \(path) than it did: it was restored from an older copy or replaced"
        }
        return nil
    }

    /// `view` brought up to date from the change feed: each path changed since its cursor is
    /// asked about again, as a listing would show it. `nil` when the server is another
    /// deployment, its history is older than the view, or too much changed: list instead.
    func following(_ view: Listing) async throws -> Listing? {
        guard let known = view.deployment else { return nil }
        var changed: Set<String> = []
        var cursor = view.cursor
        while true {
            let page = try await remote.connection.changes(container: remote.container, after: cursor, wait: 0)
            guard page.deployment == known, let head = page.head, head >= view.cursor, page.cursor >= cursor else {
                return nil
            }
            // A changed name that does not open: a full listing counts such names.
            let named = remote.named(page)
            guard named.changes.count == page.changes.count else { return nil }
            changed.formUnion(named.changes.map(\.path.value))
            cursor = page.cursor
            guard changed.count <= Self.followLimit(known: view.documents.count) else { return nil }
            if !page.more { break }
        }
        var result = view
        result.cursor = cursor
        result.changed = (view.changed ?? []).union(changed)
        if view.changed == nil { result.changed = nil }  // a full listing stays one: all of it is kept
        let remote = remote
        let connection = remote.connection
        let container = remote.container
        let answers = try await withThrowingTaskGroup(of: (String, DocumentInfo?).self) { group in
            var answers: [(String, DocumentInfo?)] = []
            var running = 0
            for path in changed {
                if running >= 8, let answer = try await group.next() {
                    answers.append(answer)
                    running -= 1
                }
                running += 1
                group.addTask {
                    let document = try DocumentPath(path)
                    do {
                        // What a listing shows: the current (else latest) version, unless deleted.
                        let info = try remote.named(
                            try await connection.stat(container: container, path: try remote.serverPath(document)))
                        return (path, info.state == .deleted ? nil : info)
                    } catch let error as XferError where error.code == .notFound {
                        return (path, nil)
                    }
                }
            }
            for try await answer in group { answers.append(answer) }
            return answers
        }
        for (path, info) in answers { result.documents[path] = info }
        return result
    }

    /// Keeps `view` for the next pass (all of it after a full listing, else what changed). A
    /// listing with names that do not open is kept as too old to follow: the next pass lists
    /// again, and counts them again.
    func keep(_ view: Listing) throws {
        try state.storeRemoteView(
            view.documents, cursor: view.cursor, changed: view.changed,
            listedAt: view.changed == nil ? (view.unopened > 0 ? 0 : view.listedAt) : nil)
    }

    /// Why the server behind this directory's URL is not the one it synced with, or `nil`: another
    /// deployment identity, or a feed that went backwards (a restore from an older backup).
    func serverChange(_ listing: Listing) throws -> String? {
        if let divergence = listing.divergence { return divergence }
        if let known = try state.meta("deployment"), let now = listing.deployment, known != now {
            return
                "the server at \(remote.connection.server) is a different deployment (\(now.prefix(8)), not \(known.prefix(8)))"
        }
        if let seen = try state.meta("cursor").flatMap({ Int64($0) }), listing.cursor < seen {
            return
                "the server at \(remote.connection.server) has an older history than this directory saw (change \(listing.cursor), after \(seen) had been seen): it was restored or replaced"
        }
        return nil
    }

    /// Takes the server as a new one: forgets which versions this directory holds (so every
    /// local document is uploaded again and none is deleted), and remembers its identity and
    /// cursor, and a notice for `xfer status`.
    func adopt(_ listing: Listing, because reason: String) throws {
        try state.forgetVersions()
        if let deployment = listing.deployment { try state.setMeta("deployment", deployment) }
        try state.setMeta("cursor", String(listing.cursor))
        let when = ISO8601DateFormatter().string(from: Date())
        try state.setMeta(
            "server_notice",
            "\(when): \(reason). Nothing local was deleted; local documents were uploaded to it again and documents it has were downloaded."
        )
    }
}
