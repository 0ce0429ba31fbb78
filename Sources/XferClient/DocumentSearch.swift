import Foundation
import XferCore
import XferProtocol

/// What a live query hands out: the whole result first, then each change to it, as
/// `NSMetadataQueryDidUpdate` does (documents that entered, left or changed).
public struct QueryUpdate: Sendable, Hashable, Codable {
    /// The result as it is now, in the query's order.
    public var documents: [DocumentInfo]
    /// Documents that entered the result with this update (all of them in the first).
    public var added: [DocumentInfo]
    /// Documents that left it: deleted, renamed away, or no longer matching (as they were last seen).
    public var removed: [DocumentInfo]
    /// Documents still in it with a new version or new conflicts.
    public var changed: [DocumentInfo]
    /// The change-feed position the result is up to date with.
    public var cursor: Int64
    /// The first update of a live query: the result as first read.
    public var initial: Bool

    /// Creates an update.
    public init(
        documents: [DocumentInfo], added: [DocumentInfo], removed: [DocumentInfo], changed: [DocumentInfo],
        cursor: Int64, initial: Bool
    ) {
        self.documents = documents
        self.added = added
        self.removed = removed
        self.changed = changed
        self.cursor = cursor
        self.initial = initial
    }
}

extension DocumentClient {
    /// Pages read at most for one search: past it the server is taken to be stuck.
    static let maximumQueryPages = 100_000

    /// The documents `query` selects, in its order: the first `limit` (all when `nil`; the
    /// list says `more` when there were others), with the change-feed position they were read at.
    ///
    /// In an end-to-end encrypted container the server holds only sealed names: every
    /// document in the query's state is read, each name opened here (one that does not open
    /// is left out, as in a listing), and the whole query decided and sorted here.
    /// - Throws: `bad_request` for a query ``DocumentQuery/validate()`` refuses; `unavailable`
    ///   when the server's pages do not advance (nothing partial is returned as whole).
    public func find(_ query: DocumentQuery, limit: Int? = nil) async throws -> DocumentList {
        try query.validate()
        if let limit, limit < 1 { throw XferError(.badRequest, "the limit must be at least 1") }
        let remote = try await unlocked()
        guard remote.endToEnd != nil else { return try await pages(of: query, limit: limit, remote: remote) }
        var everything = try await pages(of: DocumentQuery(state: query.state), limit: nil, remote: remote)
        let documents = remote.named(everything.documents).documents.filter(query.matcher()).sorted(by: query.precedes)
        everything.documents = limit.map { Array(documents.prefix($0)) } ?? documents
        everything.more = limit.map { documents.count > $0 } ?? false
        return everything
    }

    /// Reads pages of `query` from the server until `limit` documents or the end.
    private func pages(of query: DocumentQuery, limit: Int?, remote: Remote) async throws -> DocumentList {
        guard await remote.connection.features().contains(.documentQuery) else {
            throw XferError(
                .badRequest,
                "the server at \(remote.connection.server) answers no searches (it predates them, or runs without the \(ServerFeature.documentQuery.rawValue) feature); upgrade it, or use `xfer ls`"
            )
        }
        var all = try await remote.connection.query(
            container: remote.container, query, page: nil,
            limit: limit.map { min($0, ProtocolLimits.maximumListCount) })
        var token: String? = nil
        var pages = 1
        while all.more, limit.map({ all.documents.count < $0 }) ?? true {
            // A server that says "more" must move on: a repeated or missing token is refused,
            // so a result is either whole (up to the limit) or an error, never silently partial.
            guard let next = all.next, next != token, pages < Self.maximumQueryPages else {
                throw XferError(.unavailable, "the server's query pages do not advance; the result is incomplete")
            }
            token = next
            let page = try await remote.connection.query(
                container: remote.container, query, page: next,
                limit: limit.map { min($0 - all.documents.count, ProtocolLimits.maximumListCount) })
            pages += 1
            all.documents += page.documents
            all.more = page.more
            all.next = page.next
        }
        if let limit, all.documents.count > limit {
            all.documents.removeLast(all.documents.count - limit)
            all.more = true
        }
        all.next = nil
        return all
    }

    /// `query`'s result, kept live: the whole result first, then an update each time changes
    /// (another device's push, a deletion, a conflict) move a document into, out of, or within
    /// it. Changes come from the change feed, held open with long polls (``ChangeFeed``), so an
    /// update follows a change at once, never on a polling interval. If the server's history
    /// goes back (restored from a backup), the query is read again whole and the difference
    /// handed out. Ends when the task is cancelled; throws for errors a retry cannot fix.
    public func watch(_ query: DocumentQuery, wait: Int = 30) -> AsyncThrowingStream<QueryUpdate, any Error> {
        AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    try await self.follow(query, wait: wait) { continuation.yield($0) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    private func follow(_ query: DocumentQuery, wait: Int, _ emit: (QueryUpdate) -> Void) async throws {
        let remote = try await unlocked()
        let first = try await find(query)
        var result = LiveResult(query: query, documents: first.documents)
        var cursor = first.cursor
        emit(result.update(added: first.documents, removed: [], changed: [], cursor: cursor, initial: true))
        let feed = ChangeFeed(remote: remote, wait: wait)
        var deployment = first.deployment
        while let page = try await feed.page(after: cursor, keys: remote.endToEnd) {
            let moved = page.deployment != nil && deployment != nil && page.deployment != deployment
            if moved || (page.head.map { $0 < cursor } ?? false) {
                // Another server at this address, or one whose history is older than what this
                // query saw (restored from a backup): read the result again whole.
                deployment = page.deployment ?? deployment
                let again = try await find(query)
                let update = result.replace(with: again.documents, cursor: again.cursor)
                cursor = again.cursor
                if let update { emit(update) }
                continue
            }
            var newest: [DocumentPath: DocumentInfo] = [:]
            var asked: [DocumentPath] = []
            for change in page.changes {
                switch change.state {
                case .current, .deleted:
                    newest[change.path] = change
                case .uploading, .conflict, .superseded:
                    // Whether the document's newest state moved (a new document's first
                    // announce) or only its conflicts: its state as a listing gives it.
                    asked.append(change.path)
                }
            }
            for path in Set(asked) {
                // A dropped connection is retried with backoff, as the feed's own pages are.
                var backoff = Duration.milliseconds(250)
                while true {
                    do {
                        newest[path] = try await stat(path.value)
                        break
                    } catch let error as XferError where error.code == .notFound {
                        result.forget(path)
                        break
                    } catch let error as XferError where error.code == .unavailable || error.code == .internal {
                        if Task.isCancelled { return }
                        try? await Task.sleep(for: backoff)
                        backoff = min(backoff * 2, .seconds(30))
                    }
                }
            }
            cursor = page.cursor
            if let update = result.apply(Array(newest.values), cursor: cursor) {
                emit(update)
            }
        }
    }
}

/// A live query's result: documents by path, and the updates a change makes.
struct LiveResult {
    let query: DocumentQuery
    let matches: @Sendable (DocumentInfo) -> Bool
    private(set) var documents: [DocumentPath: DocumentInfo]
    private var removedSinceUpdate: [DocumentInfo] = []

    init(query: DocumentQuery, documents: [DocumentInfo]) {
        self.query = query
        matches = query.matcher()
        self.documents = Dictionary(documents.map { ($0.path, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// The result in the query's order.
    var sorted: [DocumentInfo] { documents.values.sorted(by: query.precedes) }

    func update(added: [DocumentInfo], removed: [DocumentInfo], changed: [DocumentInfo], cursor: Int64, initial: Bool)
        -> QueryUpdate
    {
        QueryUpdate(
            documents: sorted, added: added.sorted(by: query.precedes), removed: removed.sorted(by: query.precedes),
            changed: changed.sorted(by: query.precedes), cursor: cursor, initial: initial)
    }

    /// A document that no longer exists at all (its path is gone from the server).
    mutating func forget(_ path: DocumentPath) {
        if let gone = documents.removeValue(forKey: path) { removedSinceUpdate.append(gone) }
    }

    /// Takes each document's newest state into the result.
    /// - Returns: The update, or `nil` when nothing in the result moved.
    mutating func apply(_ newest: [DocumentInfo], cursor: Int64) -> QueryUpdate? {
        var added: [DocumentInfo] = []
        var changed: [DocumentInfo] = []
        var removed = removedSinceUpdate
        removedSinceUpdate = []
        for info in newest {
            let before = documents[info.path]
            if matches(info) {
                documents[info.path] = info
                if let before {
                    if before != info { changed.append(info) }
                } else {
                    added.append(info)
                }
            } else if let before {
                documents[info.path] = nil
                removed.append(before)
            }
        }
        guard !added.isEmpty || !removed.isEmpty || !changed.isEmpty else { return nil }
        return update(added: added, removed: removed, changed: changed, cursor: cursor, initial: false)
    }

    /// Replaces the whole result (read again after the server's history went back).
    mutating func replace(with fresh: [DocumentInfo], cursor: Int64) -> QueryUpdate? {
        let gone = documents.values.filter { old in !fresh.contains { $0.path == old.path } }
        for document in gone { documents[document.path] = nil }
        removedSinceUpdate += gone
        return apply(fresh, cursor: cursor)
    }
}
