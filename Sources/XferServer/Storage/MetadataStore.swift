import XferCore
import XferProtocol

/// Who a request acts for, as its token says.
public struct Principal: Sendable, Hashable {
    /// The account's row id (0 for the admin token, which belongs to no account).
    public var accountID: Int64
    /// The account's name ("admin" for the admin token).
    public var name: String
    /// Whether the token may use the admin routes.
    public var isAdmin: Bool
}

/// A chunk an account now holds: id and plain length.
public struct OwnedChunk: Sendable, Hashable {
    /// The chunk id.
    public var id: ChunkID
    /// Its plain length (what the quota counts).
    public var length: Int

    /// Creates a record.
    public init(id: ChunkID, length: Int) {
        self.id = id
        self.length = length
    }
}

/// Where the server keeps accounts, tokens, documents, versions, manifests and the change
/// feed. The routes see only this protocol: SQLite is the embedded default; PostgreSQL comes
/// with many servers.
///
/// Every method is one transaction: it happens entirely or not at all.
public protocol MetadataStore: Sendable {
    /// The principal a token hash belongs to, or `nil`.
    func principal(tokenHash: [UInt8]) async throws -> Principal?
    /// Whether an admin token exists.
    func hasAdminToken() async throws -> Bool
    /// Records an admin token's hash.
    func addAdminToken(hash: [UInt8]) async throws
    /// Creates an account with one token. Throws `already_exists` for a taken name.
    func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo
    /// An account's name, quota and use.
    func account(_ accountID: Int64) async throws -> AccountInfo
    /// The ids (of `ids`) the account does not hold, in the order given.
    func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID]
    /// Records that the account holds these chunks (already stored durably). Throws
    /// `quota_exceeded` (recording nothing) if they would take it past its quota.
    /// - Returns: How many were new to the account and their plain bytes.
    func addChunks(account: Int64, _ chunks: [OwnedChunk]) async throws -> (count: Int, bytes: Int64)
    /// Records a pending version. Throws `conflict` if `baseVersion` is not the document's
    /// current version.
    func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo
    /// Makes an announced version current with this manifest. Throws `conflict` for a stale
    /// base, `missing_chunks` if the account lacks a referenced chunk, `not_found` for an
    /// unknown version.
    func commit(account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
                manifest: Manifest, encoded: [UInt8]) async throws -> DocumentInfo
    /// A committed version (the current one if `version` is `nil`) and its encoded manifest.
    /// Throws `not_found` if there is none (or it is a deletion).
    func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8])
    /// A document's newest state: its current version, or its newest pending one if it was
    /// never committed. Throws `not_found`.
    func document(account: Int64, container: ContainerName, path: DocumentPath) async throws -> DocumentInfo
    /// Documents whose path starts with `prefix`, in path order, deleted ones left out.
    func list(account: Int64, container: ContainerName, prefix: String, limit: Int) async throws -> DocumentList
    /// Deletes a document by committing a deletion version. Throws `not_found`, `conflict`.
    func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws -> DocumentInfo
    /// Versions whose last change has a sequence number above `after`, in sequence order.
    func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList
}
