import Foundation
import XferCore
import XferProtocol

/// Where a ``ChangeFeed`` keeps its position, so it resumes after a restart.
public protocol CursorStore: Sendable {
    /// The stored cursor, or `nil` to start from the beginning.
    func load() throws -> Int64?
    /// Stores a cursor: every change up to it has been handed to the consumer.
    func save(_ cursor: Int64) throws
}

/// A cursor in a small file, replaced atomically.
public struct FileCursorStore: CursorStore {
    /// The file.
    public let path: String

    /// A store at `path` (created on the first save).
    public init(path: String) { self.path = path }

    public func load() throws -> Int64? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        guard let value = Int64(String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            throw XferError(
                .invalidConfiguration, "the cursor file \(path) does not hold a number; delete it to start over")
        }
        return value
    }

    public func save(_ cursor: Int64) throws {
        try FileSystem.writeAtomically(Array("\(cursor)\n".utf8), to: path, durable: false)
    }
}

/// One change on a container's feed.
public enum Change: Sendable, Hashable {
    /// A document version appeared or changed state (uploading, current, conflict, deleted, …).
    case document(DocumentInfo)
    /// A key-value entry was set or (with no value) deleted.
    case key(KeyValueEntry)

    /// Its position on the feed.
    public var sequence: Int64 {
        switch self {
        case .document(let info): return info.sequence
        case .key(let entry): return entry.sequence
        }
    }
}

/// A container's change feed as an `AsyncSequence`: metadata first (an announce shows up as an
/// `uploading` version before its data moves), held open with long polls so a change arrives
/// the moment it is made, never a polling loop.
///
/// It resumes from its ``CursorStore`` after a restart, and after a dropped connection it
/// retries with backoff from where it was. Asking for the next change acknowledges the one
/// before (its sequence is saved), so a restart repeats at most the last change handed out
/// and never skips one. It ends when the task is cancelled; it throws only for errors a retry
/// cannot fix (a bad token).
public struct ChangeFeed: AsyncSequence, Sendable {
    public typealias Element = Change

    let connection: ServerConnection
    let container: ContainerName
    /// The remote whose container's key (if it is end-to-end encrypted) opens what comes, asked
    /// for at the first page; `nil`, pages come as the server sends them.
    let unlocking: Remote?
    let store: (any CursorStore)?
    let start: Int64?
    let wait: Int
    let maximumBackoff: Duration

    /// A feed of `container` from `store`'s cursor (or `start`, or the beginning).
    public init(
        connection: ServerConnection, container: ContainerName, store: (any CursorStore)? = nil, start: Int64? = nil,
        wait: Int = 30, maximumBackoff: Duration = .seconds(30)
    ) {
        self.connection = connection
        self.container = container
        unlocking = nil
        self.store = store
        self.start = start
        self.wait = wait
        self.maximumBackoff = maximumBackoff
    }

    /// A feed of `remote`'s container whose names, keys and values come opened when it is end-to-end
    /// encrypted (``Remote/unlocked()``, asked at the first page).
    public init(
        remote: Remote, store: (any CursorStore)? = nil, start: Int64? = nil, wait: Int = 30,
        maximumBackoff: Duration = .seconds(30)
    ) {
        connection = remote.connection
        container = remote.container
        unlocking = remote
        self.store = store
        self.start = start
        self.wait = wait
        self.maximumBackoff = maximumBackoff
    }

    /// The next page of changes after `cursor` (opened with `keys` in an end-to-end encrypted
    /// container), waiting up to ``wait`` seconds for one; a dropped connection or a server
    /// error is retried with backoff. `nil` once the task is cancelled.
    func page(after cursor: Int64, keys: EndToEndKeys?) async throws -> ChangeList? {
        var backoff = Duration.milliseconds(250)
        while !Task.isCancelled {
            do {
                let page = try await connection.changes(container: container, after: cursor, wait: wait)
                return keys.map { $0.opened(page) } ?? page
            } catch let error as XferError where error.code == .unavailable || error.code == .internal {
                try? await Task.sleep(for: backoff)
                backoff = Swift.min(backoff * 2, maximumBackoff)
            } catch let error as XferError where error.code == .cancelled {
                return nil
            }
        }
        return nil
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(feed: self)
    }

    /// Reads pages of changes as they are consumed.
    public struct Iterator: AsyncIteratorProtocol {
        let feed: ChangeFeed
        var cursor: Int64?
        var buffer: [Change] = []
        var unsaved: Int64?
        var handedOut: Int64?
        var keys: EndToEndKeys?
        var unlocked = false

        init(feed: ChangeFeed) {
            self.feed = feed
        }

        public mutating func next() async throws -> Change? {
            if cursor == nil { cursor = try feed.store?.load() ?? feed.start ?? 0 }
            if !unlocked, let remote = feed.unlocking {
                keys = remote.endToEnd
                if keys == nil { keys = try await remote.unlocked().endToEnd }
                unlocked = true
            }
            if let handedOut {
                try feed.store?.save(handedOut)
                self.handedOut = nil
            }
            while buffer.isEmpty {
                if let unsaved {
                    try feed.store?.save(unsaved)
                    self.unsaved = nil
                }
                let asked = ContinuousClock.now
                guard let page = try await feed.page(after: cursor!, keys: keys) else { return nil }
                if page.changes.isEmpty && page.keys.isEmpty && feed.wait > 0 {
                    // An empty page at once: a server that does not hold the poll (or a hostile
                    // one) is asked no more than four times a second.
                    try? await Task.sleep(until: asked + .milliseconds(250))
                }
                buffer = (page.changes.map(Change.document) + page.keys.map(Change.key)).sorted {
                    $0.sequence < $1.sequence
                }
                if page.cursor != cursor { unsaved = page.cursor }
                cursor = page.cursor
            }
            let change = buffer.removeFirst()
            handedOut = change.sequence
            return change
        }
    }
}
