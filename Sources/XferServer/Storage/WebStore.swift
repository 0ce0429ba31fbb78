import XferCore
import XferProtocol

/// What the web view needs of the metadata store beyond the /v1 rules: its sign-in sessions and
/// a container read one folder level at a time (its list of containers is
/// ``MemberStore/containerList(account:)``, as `GET /v1/containers` answers).
public protocol WebStore: Sendable {
    /// Opens a session for the account of an account token (not the admin token), valid for
    /// `lifetime` nanoseconds of the store's clock; `nil` if the token is not an account's.
    /// Expired sessions are removed, and an account's oldest beyond
    /// ``WebSession/maximumPerAccount``.
    func openWebSession(tokenHash: [UInt8], sessionHash: [UInt8], lifetime: Int64) async throws -> WebSession?
    /// The session a cookie's secret hashes to, while it has not expired and the token it was
    /// opened with has not been revoked.
    func webSession(hash: [UInt8]) async throws -> WebSession?
    /// Ends a session (signing out); nothing if there is none.
    func closeWebSession(hash: [UInt8]) async throws
    /// One page of the folder `prefix` (empty, or ending in `/`): its live documents and, once
    /// each, the folders below it, in path order from `start`, at most `limit` entries.
    func folder(account: Int64, container: ContainerName, prefix: String, from start: FolderPosition?, limit: Int)
        async throws -> FolderPage
}

/// A signed-in browser: the account it acts for and when it must sign in again.
public struct WebSession: Sendable, Hashable {
    /// Sessions one account may hold at once; signing in again past this ends the oldest.
    public static let maximumPerAccount = 64
    /// The account.
    public var principal: Principal
    /// The hash of the token it was opened with: its key in the token's limits (``TokenLimits``),
    /// the same as the token's own requests.
    public var tokenHash: [UInt8]
    /// The store's clock (ns since 1970) at which the session ends.
    public var expiresAt: Int64
}

/// Where a folder listing goes on: from a path, itself included or not.
public struct FolderPosition: Sendable, Hashable {
    public var key: String
    public var inclusive: Bool

    public init(key: String, inclusive: Bool) {
        self.key = key
        self.inclusive = inclusive
    }

    /// The page token: `i` or `x`, then the key.
    public var token: String { (inclusive ? "i" : "x") + key }

    /// Reads a token this server gave; `nil` for anything else.
    public init?(token: String) {
        guard let first = token.first, first == "i" || first == "x",
            token.utf8.count <= DocumentPathRules.maximumPathBytes + 1,
            !token.utf8.contains(0)
        else { return nil }
        self.init(key: String(token.dropFirst()), inclusive: first == "i")
    }
}

/// One entry of a folder: a document, or a folder below (`folder` is its prefix, ending in
/// `/`; a folder that is also a synced directory document carries that document).
public struct FolderEntry: Sendable, Hashable {
    public var name: String
    public var folder: String?
    public var document: DocumentInfo?
}

/// A page of a folder; `next` goes on where it stopped (a page may stop short of its limit
/// after ``maximumSteps`` queries, so one page's cost is bounded whatever the folder holds).
public struct FolderPage: Sendable, Hashable {
    /// Queries one page may run.
    public static let maximumSteps = 1000
    public var entries: [FolderEntry]
    public var next: FolderPosition?
}

/// Share links: a read-only link to one document, with an optional expiry and password.
///
/// A link shows only the document it was made for, while that document is live: its versions
/// since its last deletion. A later document at the same path (made after a deletion) is
/// another one, and no earlier link, pinned or not, shows any version of either.
public protocol ShareStore: Sendable {
    /// Records a link whose secret hashes to `hash`, to the live document at `path` (its current
    /// version then, or `version` alone if given, which must be one of that document's own),
    /// valid for `lifetime` ns of the store's clock (`nil`: until revoked), behind `password` (a
    /// ``PasswordHash`` text) if given.
    /// - Throws: `not_found` if there is no such live document or version; `encrypted_container`
    ///   for an end-to-end encrypted container; `too_large` past ``ShareLink/maximumPerAccount``.
    func createShare(
        account: Int64, container: ContainerName, path: DocumentPath, version: Int64?, password: String?,
        hash: [UInt8], lifetime: Int64?
    ) async throws -> ShareLink
    /// Checks what ``createShare(account:container:path:version:password:hash:lifetime:)`` would,
    /// recording nothing: run before a link's password is hashed, so a refused link costs no scrypt.
    /// - Throws: What `createShare` would throw for these.
    func checkShare(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
    /// The account's links, newest first, expired ones included.
    func shares(account: Int64) async throws -> [ShareLink]
    /// Removes one of the account's links; `false` if it has none by that id.
    func revokeShare(account: Int64, id: Int64) async throws -> Bool
    /// What a link's secret grants, while it has not expired and the document it was made for is
    /// live (and, for a pinned link, its version is one of that document's).
    func share(hash: [UInt8]) async throws -> ShareGrant?
    /// The version a link shows now and its manifest, read in one transaction with the check that
    /// the document it was made for is still live.
    /// - Throws: `not_found` once that document is deleted (whatever is at its path since).
    func sharedManifest(_ grant: ShareGrant) async throws -> (info: DocumentInfo, manifest: [UInt8])
}

/// A share link as its owner sees it (the secret is shown once, when made): the shape /v1
/// answers with, `url` set only in the answer that made it.
public typealias ShareLink = ShareInfo

extension ShareInfo {
    /// Links one account may hold.
    public static let maximumPerAccount = 1000
}

/// What opening a link grants: one document of one account, read only.
public struct ShareGrant: Sendable, Hashable {
    public var link: ShareLink
    public var account: Int64
    /// The stored ``PasswordHash`` text, when the link has a password.
    public var password: String?
}

/// WebDAV's dead properties (RFC 4918 §4): what a client sets with PROPPATCH on a file or
/// folder of a container, kept beside its documents and moved, copied and removed with them.
public protocol DeadPropertyStore: Sendable {
    /// The properties of each of `paths` that has any.
    func deadProperties(account: Int64, container: ContainerName, paths: [String]) async throws -> [String:
        [DeadProperty]]
    /// Sets and removes properties of `path`, in order (a later change to the same name wins),
    /// all or none.
    /// - Throws: `too_large` past ``DeadProperty/maximumPerPath`` properties on the path, or
    ///   ``DeadProperty/maximumPerContainer`` / ``DeadProperty/maximumBytesPerContainer`` in the
    ///   container (nothing is changed then).
    func patchDeadProperties(account: Int64, container: ContainerName, path: String, _ changes: [DeadPropertyChange])
        async throws
    /// Copies (or moves) the properties of `source` and of every path below it to `destination`
    /// and the same paths below it, replacing what those had.
    func copyDeadProperties(
        account: Int64, container: ContainerName, from source: String, to destination: String, move: Bool) async throws
    /// Removes the properties of `path` and of every path below it.
    func removeDeadProperties(account: Int64, container: ContainerName, path: String) async throws
}

/// A dead property: its qualified name and its element, as XML ready to be sent.
public struct DeadProperty: Sendable, Hashable {
    public static let maximumPerPath = 64
    public static let maximumPerContainer = 10_000
    public static let maximumBytesPerContainer = 4 << 20
    /// One property's element, at most.
    public static let maximumBytes = 16 << 10

    public var namespace: String
    public var name: String
    /// The whole element (`<X:name xmlns:X="…">…</X:name>`), its namespaces declared on it.
    public var xml: String

    public init(namespace: String, name: String, xml: String) {
        self.namespace = namespace
        self.name = name
        self.xml = xml
    }
}

/// One change of a PROPPATCH.
public enum DeadPropertyChange: Sendable, Hashable {
    case set(DeadProperty)
    case remove(namespace: String, name: String)
}

/// WebDAV's write locks (RFC 4918 §6–7): what a client such as Finder, Windows or LibreOffice
/// takes before writing a file, so that another WebDAV client's write waits. Kept in the
/// metadata store, so every server in front of one database sees the same locks. They bind
/// WebDAV clients only: a device's push and sync do not ask for them (docs/WEBDAV.md).
public protocol DavLockStore: Sendable {
    /// The container's unexpired locks, and the store's clock (ns) when they were read.
    func davLocks(account: Int64, container: ContainerName) async throws -> (locks: [DavLock], now: Int64)
    /// Takes `lock` unless an unexpired lock conflicts with it (``DavLock/conflicts(with:)``),
    /// its expiry set to the store's clock plus its timeout; the container's expired locks go.
    /// - Returns: The locks in the way (nothing taken), or none (taken).
    /// - Throws: `too_large` past ``DavLock/maximumPerContainer`` locks in the container or
    ///   ``DavLock/maximumPerPath`` on the lock's path.
    func takeDavLock(account: Int64, container: ContainerName, _ lock: DavLock) async throws -> [DavLock]
    /// Sets the timeout of the unexpired lock `token`, and its expiry from the store's clock.
    /// - Returns: The lock as it is now, or `nil` if there is no such lock.
    func refreshDavLock(account: Int64, container: ContainerName, token: String, timeout: Int64) async throws
        -> DavLock?
    /// Releases lock `token`. - Returns: Whether there was one.
    func releaseDavLock(account: Int64, container: ContainerName, token: String) async throws -> Bool
    /// Releases every lock on `path` and below it: what a DELETE or a MOVE does to its source.
    func releaseDavLocks(account: Int64, container: ContainerName, below path: String) async throws
}

/// One WebDAV lock. Its path follows the dead properties' (``DavRoutes/propertyPath(_:)``):
/// `Documents` for the scope's root, `Documents/a/b` below it.
public struct DavLock: Sendable, Hashable {
    public static let maximumPerContainer = 1_000
    /// Locks one file or folder may hold at once (shared ones; an exclusive lock stands alone).
    public static let maximumPerPath = 8
    /// The owner element a client sends, at most.
    public static let maximumOwnerBytes = 4 << 10
    /// The longest timeout given, whatever a client asks (Infinite included), in seconds.
    public static let maximumTimeout: Int64 = 86_400
    /// The timeout of a lock whose client names none.
    public static let defaultTimeout: Int64 = 3_600

    /// `urn:uuid:…`.
    public var token: String
    public var path: String
    public var exclusive: Bool
    /// Depth infinity: the lock covers everything below its path too.
    public var infinite: Bool
    /// The client's `DAV:owner` element, as XML ready to be sent back.
    public var owner: String?
    /// Seconds.
    public var timeout: Int64
    /// Store clock, ns (set by the store when the lock is taken or refreshed).
    public var expiresAt: Int64

    public init(
        token: String, path: String, exclusive: Bool, infinite: Bool, owner: String?, timeout: Int64,
        expiresAt: Int64 = 0
    ) {
        self.token = token
        self.path = path
        self.exclusive = exclusive
        self.infinite = infinite
        self.owner = owner
        self.timeout = timeout
        self.expiresAt = expiresAt
    }

    /// Whether the lock covers `path`: it is on it, or on a folder above it with depth infinity.
    /// Paths are compared on their bytes.
    public func covers(_ path: String) -> Bool {
        path == self.path || (infinite && Self.isBelow(path, self.path))
    }

    /// Whether `self` lies on `path` or anywhere below it.
    public func isAtOrBelow(_ path: String) -> Bool { self.path == path || Self.isBelow(self.path, path) }

    /// Whether the two may not both be held: either is exclusive and either covers the other's path.
    public func conflicts(with other: DavLock) -> Bool {
        (exclusive || other.exclusive) && (covers(other.path) || other.covers(path))
    }

    static func isBelow(_ path: String, _ ancestor: String) -> Bool { path.utf8.starts(with: (ancestor + "/").utf8) }
}
