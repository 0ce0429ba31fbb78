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
    public convenience init(
        server: String, token: String, container: String = ContainerName.default.value,
        stateDirectory: String = ClientState.defaultDirectory(),
        device: String = ProcessInfo.processInfo.hostName
    ) throws {
        self.init(
            remote: Remote(
                connection: ServerConnection(server: server, token: token), container: try ContainerName(container),
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

    /// Pushes a file or directory (a package) as document `name`; see ``PushEngine``. With
    /// `directoryItself`, a directory goes as a `directory` document (its name and mode alone).
    public func push(
        _ path: String, as name: String, options: PushOptions = PushOptions(), directoryItself: Bool = false,
        progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }
    ) async throws -> PushReport {
        var options = options
        options.device = device
        let document = try DocumentPath(name)
        // An end-to-end encrypted container's key, if it is one: the push seals what it sends.
        return try await whileUnlocking { remote, confirmed in
            try await PushEngine(remote: remote, options: options).push(
                path, as: document, directoryItself: directoryItself, progress: progress, confirmed: confirmed)
        }
    }

    /// Pulls document `name` (its current version, or `version`) into `destination`; see ``PullEngine``.
    public func pull(
        _ name: String, into destination: String, version: Int64? = nil, options: PullOptions = PullOptions(),
        progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }
    ) async throws -> PullReport {
        let document = try DocumentPath(name)
        return try await whileUnlocking { remote, confirmed in
            try await PullEngine(remote: remote, options: options).pull(
                document, into: destination, version: version, progress: progress,
                confirmed: confirmed)
        }
    }

    /// Runs a push or pull with this client's remote: the unlocked one once known, else the one
    /// ``Remote/whileUnlocking(_:)`` assumes, so the engine looks at its files and state while
    /// the server answers and sends nothing before. `confirmed` (`nil` once known) keeps the
    /// answer for the client's later calls.
    private func whileUnlocking<T>(_ body: (Remote, (@Sendable () async throws -> Void)?) async throws -> T)
        async throws -> T
    {
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
        var list = try await remote.connection.list(
            container: remote.container, prefix: remote.endToEnd == nil ? full : "")
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
            try remote.named(
                try await remote.connection.stat(
                    container: remote.container, path: try remote.serverPath(try DocumentPath(name)),
                    version: version))
        }
    }

    /// Every version the server keeps of a document, newest first; conflict versions have
    /// state ``VersionState/conflict``.
    public func versions(_ name: String) async throws -> [DocumentInfo] {
        let remote = try await unlocked()
        return try await remote.naming {
            try await remote.connection.versions(
                container: remote.container, path: try remote.serverPath(try DocumentPath(name))
            )
            .versions.map { try remote.named($0) }
        }
    }

    /// Settles a conflict: `keep` becomes current; the other contenders are removed (their
    /// space given back to the quota), or kept in history with `keepAll`.
    public func resolve(_ name: String, keep: Int64, keepAll: Bool = false) async throws -> DocumentInfo {
        let remote = try await unlocked()
        let document = try DocumentPath(name)
        let kept = remote.endToEnd == nil ? keep : try await renumbered(document, keep: keep, remote: remote)
        return try await remote.naming {
            try remote.named(
                try await remote.connection.resolve(
                    container: remote.container,
                    ResolveRequest(
                        path: try remote.serverPath(document), keep: kept, keepAll: keepAll)))
        }
    }

    /// End to end, a device never takes a version older than one it saw current
    /// (``SeenVersions``), and only a device can seal a version: a kept version older than the
    /// current one is committed again as a new version, sealed under its own number, and that
    /// one is kept. - Returns: The version to keep.
    func renumbered(_ document: DocumentPath, keep: Int64, remote: Remote) async throws -> Int64 {
        let current = try await remote.naming {
            try await remote.connection.stat(container: remote.container, path: try remote.serverPath(document))
        }
        guard current.state == .current, keep < current.version else { return keep }
        let scratch = remote.stateDirectory + "/resolving-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let copy = scratch + "/" + String(document.components.last ?? "document")
        _ = try await PullEngine(remote: remote).pull(document, into: copy, version: keep)
        var options = PushOptions()
        options.force = true  // based on the current version: the kept content becomes current
        options.device = device
        return try await PushEngine(remote: remote, options: options).push(copy, as: document).version
    }

    /// Deletes a document (a deletion version; history stays until pruned). End to end, the
    /// deletion is sealed to the version it deletes (the current one unless `baseVersion`).
    public func delete(_ name: String, baseVersion: Int64? = nil) async throws -> DocumentInfo {
        let remote = try await unlocked()
        return try await remote.naming {
            let path = try remote.serverPath(try DocumentPath(name))
            var base = baseVersion
            if remote.endToEnd != nil, base == nil {
                base = try await remote.connection.stat(container: remote.container, path: path).version
            }
            return try remote.named(
                try await remote.connection.delete(
                    container: remote.container, path: path, baseVersion: base,
                    seal: remote.deletionSeal(path, base: base)))
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
        guard let keys = remote.endToEnd else {
            return try await remote.connection.value(container: remote.container, key: key)
        }
        let entry = try keys.opened(
            try await remote.connection.value(container: remote.container, key: keys.serverKey(key)), key: key)
        try remote.seenValues()?.check(entry)
        return entry
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
    /// entry opened; one that does not open under the key, or is older than this device has
    /// seen, is left out and named in ``KeyValueList/withheld``.
    public func values() async throws -> KeyValueList {
        let remote = try await unlocked()
        var list = try await remote.connection.values(container: remote.container)
        guard let keys = remote.endToEnd, let seen = try remote.seenValues() else { return list }
        var opened: [KeyValueEntry] = []
        var withheld: [String] = []
        for entry in list.entries {
            guard let plain = try? keys.opened(entry) else {
                withheld.append("\(entry.key.prefix(12))…: does not open under the container's key")
                continue
            }
            guard try !seen.isOlder(plain) else {
                withheld.append("\(plain.key): older than the value this device has seen (rolled back)")
                continue
            }
            try seen.raise(plain)
            opened.append(plain)
        }
        list.entries = opened.sorted { $0.key < $1.key }
        list.withheld = withheld.isEmpty ? nil : withheld
        return list
    }

    private func write(_ key: String, _ value: JSONValue?) async throws -> KeyValueWriteResult {
        let remote = try await unlocked()
        let write = KeyValueWrite(
            key: key, value: value, timestampNs: Int64(Date().timeIntervalSince1970 * 1e9), device: device)
        guard let keys = remote.endToEnd else {
            return try await remote.connection.setValue(container: remote.container, write)
        }
        // The server keeps a keyed hash of the key, and the key and value sealed together.
        var result = try await remote.connection.setValue(container: remote.container, keys.sealed(write))
        result.entry = try keys.opened(result.entry, key: key)
        try remote.seenValues()?.raise(result.entry)
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
