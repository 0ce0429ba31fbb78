import Foundation
import XferCore
import XferProtocol

/// The library's front door: one account's container on one server.
///
/// ```swift
/// let client = try DocumentClient(server: "http://127.0.0.1:8750", token: token, container: "notes")
/// try await client.push("/home/me/Notes.pkg", as: "Documents/Notes.pkg")
/// for try await change in client.changes(cursor: FileCursorStore(path: "/var/lib/app/cursor")) { … }
/// ```
///
/// Every method throws ``XferError`` with a stable code (`not_found`, `conflict`,
/// `quota_exceeded`, `unavailable`, …). Call ``shutdown()`` when done.
public final class DocumentClient: Sendable {
    /// The server, container and state directory.
    public let remote: Remote
    /// The name other devices see for this one's versions and key-value writes.
    public let device: String
    /// ``remote`` with its container's key once asked (``Remote/unlocked()``): in an end-to-end
    /// encrypted container, names are sealed on the way out and opened on the way in.
    private let unlockedRemote = Locked<Remote?>(nil)

    /// A client of `container` on `server`, keeping local state in `stateDirectory`.
    /// - Throws: `invalid_path` for a bad container name.
    public convenience init(server: String, token: String, container: String = ContainerName.default.value,
                            stateDirectory: String = ClientState.defaultDirectory(),
                            device: String = ProcessInfo.processInfo.hostName) throws {
        self.init(remote: Remote(connection: ServerConnection(server: server, token: token), container: try ContainerName(container),
                                 stateDirectory: stateDirectory), device: device)
    }

    /// A client over an existing remote, writing as `device` (else the remote's, ``Remote/device``).
    public init(remote: Remote, device: String? = nil) {
        self.remote = remote
        self.device = device ?? remote.device
    }

    /// Closes the connection pool.
    public func shutdown() async {
        await remote.connection.shutdown()
    }

    // MARK: Documents

    /// Pushes a file or directory (a package) as document `name`; see ``PushEngine``.
    public func push(_ path: String, as name: String, options: PushOptions = PushOptions(),
                     progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws -> PushReport {
        var options = options
        options.device = device
        let document = try DocumentPath(name)
        // An end-to-end encrypted container's key, if it is one: the push seals what it sends.
        return try await whileUnlocking { remote, confirmed in
            try await PushEngine(remote: remote, options: options).push(path, as: document, progress: progress, confirmed: confirmed)
        }
    }

    /// Pulls document `name` (its current version, or `version`) into `destination`; see ``PullEngine``.
    public func pull(_ name: String, into destination: String, version: Int64? = nil, options: PullOptions = PullOptions(),
                     progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws -> PullReport {
        let document = try DocumentPath(name)
        return try await whileUnlocking { remote, confirmed in
            try await PullEngine(remote: remote, options: options).pull(document, into: destination, version: version, progress: progress,
                                                                        confirmed: confirmed)
        }
    }

    /// Runs a push or pull with this client's remote: the unlocked one once known, else the one
    /// ``Remote/whileUnlocking(_:)`` assumes, so the engine looks at its files and state while
    /// the server answers and sends nothing before. `confirmed` (`nil` once known) keeps the
    /// answer for the client's later calls.
    private func whileUnlocking<T>(_ body: (Remote, (@Sendable () async throws -> Void)?) async throws -> T) async throws -> T {
        if let known = unlockedRemote.value { return try await body(known, nil) }
        return try await remote.whileUnlocking { remote, confirmed in
            try await body(remote) {
                try await confirmed()
                self.unlockedRemote.withLock { $0 = remote }
            }
        }
    }

    /// Documents under `prefix` (and in `scope`, if given), deleted ones left out.
    /// In an end-to-end encrypted container the server knows only sealed names, which it
    /// cannot sort or filter by the plain ones: the whole container is listed, each name
    /// opened (one that does not open under the key is left out), then filtered and sorted here.
    public func list(prefix: String = "", scope: Scope? = nil) async throws -> DocumentList {
        let remote = try await unlocked()
        let full = scope.map { $0.prefix + prefix } ?? prefix
        var list = try await remote.connection.list(container: remote.container, prefix: remote.endToEnd == nil ? full : "")
        if remote.endToEnd != nil {
            list.documents = remote.named(list.documents).documents.filter { $0.path.value.hasPrefix(full) }
                .sorted { PathOrder.precedes($0.path.value, $1.path.value) }
        }
        if let scope { list.documents = list.documents.filter { $0.scope == scope } }
        return list
    }

    /// A document's newest state, or one version of it.
    public func stat(_ name: String, version: Int64? = nil) async throws -> DocumentInfo {
        let remote = try await unlocked()
        return try await remote.naming {
            try remote.named(try await remote.connection.stat(container: remote.container, path: try remote.serverPath(try DocumentPath(name)),
                                                              version: version))
        }
    }

    /// Every version the server keeps of a document, newest first; conflict versions have
    /// state ``VersionState/conflict``.
    public func versions(_ name: String) async throws -> [DocumentInfo] {
        let remote = try await unlocked()
        return try await remote.naming {
            try await remote.connection.versions(container: remote.container, path: try remote.serverPath(try DocumentPath(name)))
                .versions.map { try remote.named($0) }
        }
    }

    /// Settles a conflict: `keep` becomes current; the other contenders are removed (their
    /// space given back to the quota), or kept in history with `keepAll`.
    public func resolve(_ name: String, keep: Int64, keepAll: Bool = false) async throws -> DocumentInfo {
        let remote = try await unlocked()
        return try await remote.naming {
            try remote.named(try await remote.connection.resolve(container: remote.container, ResolveRequest(
                path: try remote.serverPath(try DocumentPath(name)), keep: keep, keepAll: keepAll)))
        }
    }

    /// Deletes a document (a deletion version; history stays until pruned).
    public func delete(_ name: String, baseVersion: Int64? = nil) async throws -> DocumentInfo {
        let remote = try await unlocked()
        return try await remote.naming {
            try remote.named(try await remote.connection.delete(container: remote.container, path: try remote.serverPath(try DocumentPath(name)),
                                                                baseVersion: baseVersion))
        }
    }

    /// ``remote`` with its container's key if the container is end-to-end encrypted (asked once).
    /// - Throws: `unauthorized` if it is and this device holds no key; the server's errors.
    func unlocked() async throws -> Remote {
        if let known = unlockedRemote.value { return known }
        let unlocked = try await remote.unlocked()
        unlockedRemote.withLock { $0 = unlocked }
        return unlocked
    }

    /// The account's quota and use.
    public func account() async throws -> AccountInfo {
        try await remote.connection.account()
    }

    // MARK: Key-value store

    /// A key's value, or `nil` if it is not set.
    public func value(forKey key: String) async throws -> JSONValue? {
        do {
            return try await entry(forKey: key).value
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
    }

    /// A key's whole entry: value, writer's timestamp and device, feed sequence. Throws `not_found`.
    public func entry(forKey key: String) async throws -> KeyValueEntry {
        let remote = try await unlocked()
        guard let keys = remote.endToEnd else { return try await remote.connection.value(container: remote.container, key: key) }
        return try keys.opened(try await remote.connection.value(container: remote.container, key: keys.serverKey(key)), key: key)
    }

    /// Sets a key (last writer wins, by this device's clock, then device name).
    /// - Returns: Whether this write won; if not, the entry that did.
    @discardableResult
    public func setValue(_ value: JSONValue, forKey key: String) async throws -> KeyValueWriteResult {
        try await write(key, value)
    }

    /// Deletes a key. Throws `not_found` if it is not set.
    @discardableResult
    public func removeValue(forKey key: String) async throws -> KeyValueWriteResult {
        try await write(key, nil)
    }

    /// Every key, with the store's use and limits. In an end-to-end encrypted container, each
    /// entry opened (one that does not open under the key is left out).
    public func values() async throws -> KeyValueList {
        let remote = try await unlocked()
        var list = try await remote.connection.values(container: remote.container)
        if let keys = remote.endToEnd {
            list.entries = list.entries.compactMap { try? keys.opened($0) }.sorted { $0.key < $1.key }
        }
        return list
    }

    private func write(_ key: String, _ value: JSONValue?) async throws -> KeyValueWriteResult {
        let remote = try await unlocked()
        let write = KeyValueWrite(key: key, value: value, timestampNs: Int64(Date().timeIntervalSince1970 * 1e9), device: device)
        guard let keys = remote.endToEnd else { return try await remote.connection.setValue(container: remote.container, write) }
        // The server keeps a keyed hash of the key, and the key and value sealed together.
        var result = try await remote.connection.setValue(container: remote.container, keys.sealed(write))
        result.entry = try keys.opened(result.entry, key: key)
        return result
    }

    // MARK: Changes and sync

    /// The container's change feed, resuming from `cursor`'s stored position (or `start`).
    /// In an end-to-end encrypted container, names, keys and values come opened (a deletion of
    /// a key gives its hashed key, ``EndToEndKeys/serverKey(_:)``).
    public func changes(cursor: (any CursorStore)? = nil, start: Int64? = nil, wait: Int = 30) -> ChangeFeed {
        ChangeFeed(remote: remote, store: cursor, start: start, wait: wait)
    }

    /// A sync engine for `directory` (which it locks until released).
    public func syncEngine(directory: String, options: SyncOptions = SyncOptions()) throws -> SyncEngine {
        var options = options
        options.push.device = device
        return try SyncEngine(directory: directory, remote: remote, options: options)
    }
}
