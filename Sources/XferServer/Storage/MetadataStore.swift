import Foundation
import XferCore
import XferProtocol

/// Where the server keeps accounts, tokens, documents, versions, manifests, key-value
/// entries and the change feed: one protocol per concern, and a backend is all of them. The
/// routes see only these protocols: SQLite is the embedded default; PostgreSQL comes with many
/// servers. Each backend keeps one file per concern (`SQLiteMetadataStore+Documents.swift`, …);
/// the rules they share are written once, below (``CommitRules``, ``KeyValueRules``,
/// ``AccountLimits``) and in StoredValues.swift.
///
/// Every method is one transaction: it happens entirely or not at all.
public protocol MetadataStore: AccountStore, DocumentStore, KeyValueStore, ContainerKeyStore, MaintenanceStore,
    ChunkLocationIndex, WebStore, ShareStore, DeadPropertyStore, DavLockStore, MemberStore,
    AccountKeyStore, RecordStore
{}

/// End-to-end encrypted containers: the passphrase-wrapped key the server keeps for each, which
/// it can neither open nor check beyond its form.
public protocol ContainerKeyStore: Sendable {
    /// The container's wrapped key and its key's id; `nil` if it is plain (or does not exist).
    func containerKey(account: Int64, container: ContainerName) async throws -> (wrapped: [UInt8], keyID: String)?
    /// Makes a container end-to-end encrypted with `wrapped` (`previous` nil: it must be new or
    /// hold nothing yet), or replaces its wrapped key if the one kept is still `previous`.
    /// Throws `encrypted_container` for a container that already holds plain data,
    /// `already_exists` if it is encrypted already and no `previous` was given, `not_found` if
    /// `previous` was given for a plain container, `conflict` if the key kept is not `previous`.
    /// `keyID` must be the id recorded when it was made encrypted (`conflict` otherwise).
    func setContainerKey(account: Int64, container: ContainerName, wrapped: [UInt8], previous: [UInt8]?, keyID: String)
        async throws
}

/// Accounts and tokens: who a request acts for, and the admin operations on accounts.
public protocol AccountStore: Sendable {
    /// The principal a token hash belongs to, or `nil`.
    func principal(tokenHash: [UInt8]) async throws -> Principal?
    /// This deployment's identity: made once when the store is created, kept in it, and the
    /// same for every server sharing it. A client that sees another identity at the same URL
    /// knows it talks to a different server, and deletes nothing on its word.
    func deploymentID() async throws -> String
    /// The ids of the encryption keys data in this deployment was sealed with, the first used
    /// first: each is recorded in the transaction that first stores a reference to a value
    /// sealed with it (a chunk's location, a manifest, a key-value value), so a server must be
    /// given every one of them.
    func sealingKeys() async throws -> [SealingKeyID]
    /// Whether an admin token exists.
    func hasAdminToken() async throws -> Bool
    /// Records an admin token's hash.
    func addAdminToken(hash: [UInt8]) async throws
    /// Creates an account with one token. Throws `already_exists` for a taken name.
    func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo
    /// Gives an account another token on `terms` (checked already), its expiry counted from the
    /// store's clock and never later than `notAfter` (store clock, ns: the expiry of the token
    /// that asks). Throws `not_found` for an unknown account, `forbidden` past
    /// ``AccountLimits/maximumTokens`` live tokens, `unauthorized` when `notAfter` is under a
    /// second away.
    /// - Returns: The token as lists show it.
    @discardableResult
    func addToken(account: AccountName, tokenHash: [UInt8], terms: TokenTerms, notAfter: Int64?) async throws
        -> TokenSummary
    /// An account's tokens, oldest first (expired ones included, marked). Throws `not_found`.
    func tokens(account: AccountName) async throws -> [TokenSummary]
    /// Revokes one token (an account's or an admin token, as long as another admin token
    /// remains). - Returns: Whether it existed.
    func revokeToken(hash: [UInt8]) async throws -> Bool
    /// Revokes the token whose public id (``TokenSummary/id``) is `id`, if it is `account`'s
    /// (any account's when `nil`), with ``revokeToken(hash:)``'s rule for admin tokens.
    /// - Returns: Whether it existed.
    func revokeToken(id: String, account: AccountName?) async throws -> Bool
    /// Removes the tokens that expired before `cutoff` (store clock, ns), with their web sessions.
    /// - Returns: How many.
    func removeExpiredTokens(before cutoff: Int64) async throws -> Int
    /// Revokes every token of an account. Throws `not_found`. - Returns: How many.
    func revokeTokens(account: AccountName) async throws -> Int
    /// An account's name, quota and use.
    func account(_ accountID: Int64) async throws -> AccountInfo
    /// Every account's recorded use and the sum of the chunks it holds.
    func accounts() async throws -> [AccountUsage]
    /// Every account (or the one named) with its quota, use, tokens, containers and live
    /// documents, by name. - Throws: `not_found` for a name no account has.
    func accountSummaries(named name: AccountName?) async throws -> [AccountSummary]
    /// Sets an account's quota: below its use, new data is refused and what it has is kept.
    /// - Throws: `not_found`, `bad_request` for a negative quota.
    func setQuota(account: AccountName, quota: Int64) async throws -> AccountSummary
    /// Deletes an account and everything it has, in one transaction: its containers with
    /// their documents, every version, key-value pairs, keys, WebDAV properties and locks; its
    /// share links, web sessions, tokens and chunk holdings. The chunks no other account holds
    /// are then garbage for `gc`. With `dryRun`, only counts what would go.
    /// - Throws: `not_found`.
    func deleteAccount(_ name: AccountName, dryRun: Bool) async throws -> AccountDeletion
}

/// Documents, their versions and the change feed, and the chunks each account holds (what a
/// commit may reference, what the quota counts).
public protocol DocumentStore: Sendable {
    /// The ids (of `ids`) the account does not hold, in the order given.
    func missingChunks(account: Int64, ids: [ChunkID]) async throws -> [ChunkID]
    /// Records that the account holds these chunks (already stored durably). Throws
    /// `quota_exceeded` (recording nothing) if they would take it past its quota.
    ///
    /// With `uploadStartedAt` (``clock()`` read before the chunks were stored), a chunk that
    /// garbage collection is deleting, or finished deleting after that time, is not recorded:
    /// its stored copy may be gone. The client finds it missing at commit and sends it again.
    /// - Returns: How many were new to the account and their plain bytes.
    func addChunks(account: Int64, _ chunks: [OwnedChunk], uploadStartedAt: Int64?) async throws -> (
        count: Int, bytes: Int64
    )
    /// Records a pending version (whatever its base: a stale base is settled at commit).
    func announce(account: Int64, container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo
    /// Commits an announced version with this manifest. If `baseVersion` is not the current
    /// version (and the content differs), both are kept: the later modification time becomes
    /// current (a tie goes to this commit) and the other an unresolved `conflict` version.
    /// Throws `missing_chunks` if the account lacks a referenced chunk, `not_found` for an
    /// unknown version, `conflict` if the version was already committed.
    func commit(
        account: Int64, container: ContainerName, path: DocumentPath, version: Int64, baseVersion: Int64?,
        manifest: Manifest, encoded: [UInt8]
    ) async throws -> DocumentInfo
    /// Announces and commits each of `items` at once, all in one transaction, each on its own:
    /// an item that cannot be committed (`missing_chunks`, `invalid_path`, `quota_exceeded`, …)
    /// leaves no trace and fails alone. A stale base is settled as ``commit(account:container:path:version:baseVersion:manifest:encoded:)`` does.
    /// - Returns: One result per item, in order.
    func commitDirect(account: Int64, container: ContainerName, _ items: [DirectCommitItem]) async throws
        -> [Result<DocumentInfo, XferError>]
    /// A committed version (the current one if `version` is `nil`) and its encoded manifest.
    /// Throws `not_found` if there is none (or it is a deletion).
    func manifest(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> (info: DocumentInfo, manifest: [UInt8])
    /// Several documents' manifests, as ``manifest(account:container:path:version:)`` gives
    /// each, read together (one transaction), in order. Once more than `budget` bytes of
    /// manifests are read, the rest are not read: the one that passed it and each later one
    /// answers ``ManifestRead/overBudget``.
    func manifests(
        account: Int64, container: ContainerName, _ wanted: [(path: DocumentPath, version: Int64?)], budget: Int
    ) async throws
        -> [ManifestRead]
    /// One version of a document, or (`version` `nil`) its newest state: the current version,
    /// or its newest pending one if it was never committed. Throws `not_found`.
    func document(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws
        -> DocumentInfo
    /// Every version the store keeps of a document, newest first. Throws `not_found`.
    func versions(account: Int64, container: ContainerName, path: DocumentPath) async throws -> VersionList
    /// Makes `keep` (the current version or a conflict version) current; the other contenders
    /// are removed, or with `keepAll` kept as superseded. Throws `not_found`, `bad_request`.
    func resolve(account: Int64, container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo
    /// One page of the documents whose path starts with `prefix`, in bytewise path order,
    /// deleted ones left out: at most `limit`, those after the path `after` when given; `more`
    /// and `next` say whether and from where to go on.
    func list(account: Int64, container: ContainerName, prefix: String, after: String?, limit: Int) async throws
        -> DocumentList

    /// One page of the documents `query` selects, in its order: at most `limit`, after the
    /// position `after` names (a page token this store gave for the same query). A page may
    /// hold fewer than `limit` and still say `more` when most rows it read did not match.
    /// - Throws: `bad_request` for a query ``DocumentQuery/validate()`` refuses or a token it did not give.
    func query(account: Int64, container: ContainerName, _ query: DocumentQuery, after: String?, limit: Int)
        async throws -> DocumentList
    /// Deletes a document by committing a deletion version, which keeps `seal` (an end-to-end
    /// encrypted container's deletion seal, made by the deleting device) as its manifest digest.
    /// Throws `not_found`, `conflict`.
    func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?, seal: String?)
        async throws -> DocumentInfo
    /// Versions and key-value entries whose last change has a sequence number above `after`,
    /// in sequence order.
    func changes(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws -> ChangeList
    /// See the extension's default.
    func watchRemoteChanges(_ handler: @escaping @Sendable () -> Void)
}

/// The containers' key-value stores.
public protocol KeyValueStore: Sendable {
    /// Sets or deletes a key, last writer wins. Throws `too_large` for a bad key and
    /// `quota_exceeded` past the container's limits (the previous value stays).
    func setValue(account: Int64, container: ContainerName, _ write: KeyValueWrite) async throws -> KeyValueWriteResult
    /// One live key. Throws `not_found`.
    func value(account: Int64, container: ContainerName, key: String) async throws -> KeyValueEntry
    /// Every live key.
    func values(account: Int64, container: ContainerName) async throws -> KeyValueList
}

/// Garbage collection and verification: the deletion protocol that keeps an upload and a
/// collection from losing a chunk, expiry, and walks of every manifest and chunk record.
public protocol MaintenanceStore: Sendable {
    /// Which of `ids` some account holds (a chunk no account holds may be deleted).
    func heldChunks(_ ids: [ChunkID]) async throws -> Set<ChunkID>
    /// The store's clock, nanoseconds since 1970: one clock for every server sharing the store.
    func clock() async throws -> Int64
    /// Marks for deletion those of `ids` no account holds (from now on an upload cannot record
    /// them), and returns them; the caller deletes their stored copies, then ``endDeletion(_:)``.
    func beginDeletion(_ ids: [ChunkID]) async throws -> [ChunkID]
    /// Records that the stored copies of `ids` are gone, at the store's clock.
    func endDeletion(_ ids: [ChunkID]) async throws
    /// Forgets deletions that finished before `cutoff` (store clock, ns): no upload still
    /// running can have started before them.
    func forgetDeletions(before cutoff: Int64) async throws
    /// Drops the chunks accounts hold for no committed version (uploaded for a commit that never
    /// came) that were recorded before `cutoff` (Unix seconds), giving their bytes back.
    func expireLeases(olderThan cutoff: Int64) async throws -> (chunks: Int, bytes: Int64)
    /// Removes `uploading` versions announced before `cutoff` (Unix seconds) and never committed.
    func expireUploads(olderThan cutoff: Int64) async throws -> Int
    /// Committed versions with their encoded manifests, in key order after `after`.
    func storedManifests(after: StoredVersionKey?, limit: Int) async throws -> [StoredManifest]
    /// Every account's chunk records in key order after `after`.
    func chunkRecords(after: ChunkRecordKey?, limit: Int) async throws -> [ChunkRecordRow]
}

/// Where the chunks of a packed chunk store (``S3ChunkStore``) live: the index beside its packs.
public protocol ChunkLocationIndex: Sendable {
    /// Records where packed chunks are stored, stamped with the store's clock; a chunk already
    /// located keeps its first location (a second copy is dead space a compaction reclaims).
    /// `sealedWith` is the key the entries are sealed with (recorded as in use in the same transaction).
    func recordLocations(_ locations: [ChunkLocation], sealedWith key: SealingKeyID?) async throws
    /// The locations of those of `ids` that are located, in no particular order.
    func locations(_ ids: [ChunkID]) async throws -> [ChunkLocation]
    /// The located chunks whose id starts with byte `shard`.
    func locations(shard: UInt8) async throws -> [ChunkLocation]
    /// The chunks located in one pack, by offset.
    func locations(pack: String) async throws -> [ChunkLocation]
    /// Forgets chunks' locations.
    /// - Returns: The packs they were in that now hold no located chunk.
    func removeLocations(_ ids: [ChunkID]) async throws -> Set<String>
    /// The bytes of located chunks per pack (packs with none are absent).
    func packUsage() async throws -> [String: Int64]
    /// Points those chunks of `moved` that are still located in `pack` at their new place (a
    /// compaction rewrote them); the others were removed meanwhile and stay removed.
    /// - Returns: How many moved.
    func moveLocations(_ moved: [ChunkLocation], from pack: String, sealedWith key: SealingKeyID?) async throws -> Int
}

extension AccountStore {
    /// Issues another token for an account (shown once; stored as its hash) on `terms`.
    /// - Throws: `bad_request` for terms ``TokenTerms/validate()`` refuses, `not_found`.
    public func issueToken(account: String, terms: TokenTerms = TokenTerms(), notAfter: Int64? = nil) async throws
        -> TokenInfo
    {
        try terms.validate()
        let token = TokenHash.generate()
        let summary = try await addToken(
            account: try AccountName(account), tokenHash: TokenHash.hash(token), terms: terms, notAfter: notAfter)
        return TokenInfo(
            account: account, token: token, id: summary.id, device: summary.device, readOnly: summary.readOnly,
            container: summary.container, expiresAt: summary.expiresAt)
    }

    /// Revokes one token (by itself or by its public id) or every token of an account, as the
    /// request says.
    /// - Throws: `bad_request` unless exactly one of `token`, `id` and `account` is given.
    public func revoke(_ request: RevokeTokenRequest) async throws -> RevokeTokenResult {
        switch (request.token, request.id, request.account) {
        case (let token?, nil, nil):
            guard token.utf8.count <= 256 else { throw XferError(.badRequest, "that is not an xfer token") }
            return RevokeTokenResult(revoked: try await revokeToken(hash: TokenHash.hash(token)) ? 1 : 0)
        case (nil, let id?, nil):
            return RevokeTokenResult(
                revoked: try await revokeToken(id: try TokenHash.publicID(id), account: nil) ? 1 : 0)
        case (nil, nil, let account?):
            return RevokeTokenResult(revoked: try await revokeTokens(account: try AccountName(account)))
        default:
            throw XferError(
                .badRequest,
                "give one of \"token\" (one token), \"id\" (one token by its id) or \"account\" (all of its tokens)")
        }
    }

}

extension DocumentStore {
    /// Records chunks with no deletion check (for callers that did not store them just now).
    public func addChunks(account: Int64, _ chunks: [OwnedChunk]) async throws -> (count: Int, bytes: Int64) {
        try await addChunks(account: account, chunks, uploadStartedAt: nil)
    }

    /// Calls `handler` whenever another process sharing the store changes something, for as
    /// long as the store is open. The default (a store only this process uses) never calls it.
    public func watchRemoteChanges(_ handler: @escaping @Sendable () -> Void) {}
}

extension MetadataStore {
    /// Deletes a document with no seal (a plain container's deletion).
    func delete(account: Int64, container: ContainerName, path: DocumentPath, baseVersion: Int64?) async throws
        -> DocumentInfo
    {
        try await delete(account: account, container: container, path: path, baseVersion: baseVersion, seal: nil)
    }
}
