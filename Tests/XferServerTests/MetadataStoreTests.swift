import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// The metadata store's answers, asked directly, on every backend this run can reach: SQLite
/// always, PostgreSQL when XFER_POSTGRES_URL is set (tools/ops/pg-up.sh; each test in its own
/// schema). The rules are written once over SQL (`SQLMetadataStore`); this suite is where a
/// difference between the two databases (types, text order, NULLs, clocks, locks) turns red.
@Suite struct MetadataStoreTests {
    static let postgres = ProcessInfo.processInfo.environment["XFER_POSTGRES_URL"]
    static let backends = ["sqlite"] + (postgres == nil ? [] : ["postgres"])

    static func withStore<T>(
        _ kind: String, policy: StorePolicy = StorePolicy(),
        _ body: (any MetadataStore, Int64) async throws -> T
    ) async throws -> T {
        let unique = UUID().uuidString.prefix(8).lowercased()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-meta-\(unique)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store: any MetadataStore
        if kind == "postgres", let url = postgres {
            let postgres = try await PostgresMetadataStore(url: url, policy: policy, schema: "m_\(unique)")
            store = postgres
            defer { postgres.shutdown() }
            let account = try await store.createAccount(
                name: try AccountName("alice"), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(unique)"))
            return try await body(store, try await Self.accountID(store, account.name))
        }
        store = try SQLiteMetadataStore(path: directory + "/metadata.sqlite", policy: policy)
        let account = try await store.createAccount(
            name: try AccountName("alice"), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(unique)"))
        return try await body(store, try await Self.accountID(store, account.name))
    }

    static func accountID(_ store: any MetadataStore, _ name: String) async throws -> Int64 {
        try #require(try await store.accounts().first { $0.name == name }).id
    }

    static func chunk(_ seed: UInt8, length: Int = 1000) -> OwnedChunk {
        OwnedChunk(id: ChunkID.of([seed, 1, 2, 3]), length: length)
    }

    static func manifest(_ chunks: [OwnedChunk], mtime: Int64 = 1) throws -> (Manifest, [UInt8]) {
        let manifest = try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: mtime,
                    chunks: chunks.map { .init(id: $0.id, length: $0.length) })
            ])
        return (manifest, manifest.encoded())
    }

    /// Announces and commits `chunks` at `path` from `base`.
    static func put(
        _ store: any MetadataStore, _ account: Int64, _ path: String, _ chunks: [OwnedChunk], base: Int64?,
        mtime: Int64 = 1
    ) async throws -> DocumentInfo {
        let path = try DocumentPath(path)
        let (manifest, encoded) = try manifest(chunks, mtime: mtime)
        let announced = try await store.announce(
            account: account, container: try ContainerName("c"),
            AnnounceRequest(
                path: path, kind: .file, size: manifest.totalSize, mtimeNs: mtime, mode: 0o644, baseVersion: base,
                device: "d"))
        return try await store.commit(
            account: account, container: try ContainerName("c"), path: path, version: announced.version,
            baseVersion: base, manifest: manifest, encoded: encoded)
    }

    @Test(arguments: backends) func versionsConflictsResolveAndDeleteFollowOneStateMachine(_ kind: String) async throws
    {
        try await Self.withStore(kind) { store, account in
            let container = try ContainerName("c")
            let (a, b, c) = (Self.chunk(1), Self.chunk(2), Self.chunk(3))
            #expect(try await store.addChunks(account: account, [a, b, c]) == (3, 3000))
            #expect(
                try await store.missingChunks(account: account, ids: [a.id, Self.chunk(9).id, a.id]) == [
                    Self.chunk(9).id
                ])
            // A commit of a chunk the account does not hold is refused, naming it.
            await #expect(throws: XferError.self) {
                _ = try await Self.put(store, account, "Documents/x", [Self.chunk(9)], base: nil)
            }
            let first = try await Self.put(store, account, "Documents/n", [a], base: nil)
            #expect(first.state == .current && first.version == 1 && first.size == 1000 && first.device == "d")
            let second = try await Self.put(store, account, "Documents/n", [b], base: first.version, mtime: 5)
            #expect(second.state == .current && second.baseVersion == first.version)
            // From a stale base and earlier: kept as a conflict; the current one stays.
            let stale = try await Self.put(store, account, "Documents/n", [c], base: first.version, mtime: 2)
            #expect(stale.state == .conflict)
            let info = try await store.document(
                account: account, container: container, path: try DocumentPath("Documents/n"), version: nil)
            #expect(info.version == second.version && info.conflicts == [stale.version])
            let resolved = try await store.resolve(
                account: account, container: container,
                ResolveRequest(path: try DocumentPath("Documents/n"), keep: stale.version))
            #expect(resolved.state == .current && resolved.conflicts == nil)
            // The contender not kept is removed (its chunk reference with it).
            let listed = try await store.versions(
                account: account, container: container, path: try DocumentPath("Documents/n"))
            #expect(listed.versions.map(\.state) == [.current, .superseded])
            // A delete from a stale base is a conflict; from the current one it is a version.
            await #expect(throws: XferError.self) {
                _ = try await store.delete(
                    account: account, container: container, path: try DocumentPath("Documents/n"),
                    baseVersion: first.version)
            }
            let deleted = try await store.delete(
                account: account, container: container, path: try DocumentPath("Documents/n"),
                baseVersion: resolved.version)
            #expect(deleted.state == .deleted && deleted.baseVersion == resolved.version)
            // Every change took its own number: the feed has no gaps and no repeats.
            let feed = try await store.changes(account: account, container: container, after: 0, limit: 100)
            let numbers = feed.changes.map(\.sequence)
            #expect(numbers == numbers.sorted() && Set(numbers).count == numbers.count && feed.cursor == feed.head)
            // The manifest of a committed version comes back as it was stored.
            await #expect(throws: XferError.self) {
                _ = try await store.manifest(
                    account: account, container: container, path: try DocumentPath("Documents/n"),
                    version: second.version)
            }
            let (manifest, encoded) = try Self.manifest([c], mtime: 2)
            let stored = try await store.manifest(
                account: account, container: container, path: try DocumentPath("Documents/n"),
                version: stale.version)
            #expect(stored.manifest == encoded && stored.info.manifestDigest == manifest.digest.hex)
        }
    }

    @Test(arguments: backends) func aBatchCommitsWhatItCanAndRefusesTheRestOneByOne(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let held = Self.chunk(1)
            _ = try await store.addChunks(account: account, [held])
            let good = try Self.manifest([held])
            let bad = try Self.manifest([Self.chunk(7)])
            func item(_ path: String, _ manifest: (Manifest, [UInt8])) throws -> DirectCommitItem {
                DirectCommitItem(
                    announce: AnnounceRequest(
                        path: try DocumentPath(path), kind: .file, size: manifest.0.totalSize,
                        mtimeNs: 1, mode: 0o600, baseVersion: nil),
                    manifest: manifest.0, encoded: manifest.1)
            }
            let results = try await store.commitDirect(
                account: account, container: try ContainerName("c"),
                [try item("Documents/a", good), try item("Documents/b", bad), try item("Documents/c", good)])
            #expect(results.count == 3)
            #expect((try? results[0].get())?.state == .current && (try? results[2].get())?.state == .current)
            guard case .failure(let error) = results[1] else {
                Issue.record("a commit of a missing chunk went through")
                return
            }
            #expect(error.code == .missingChunks)
            // The refused one left nothing behind: no document, no pending version.
            let page = try await store.list(
                account: account, container: try ContainerName("c"), prefix: "", after: nil, limit: 10)
            #expect(page.documents.map(\.path.value) == ["Documents/a", "Documents/c"])
            #expect(try await store.expireUploads(olderThan: Int64.max) == 0)

            // A batch takes the container's feed numbers once and writes the last at its end:
            // a refused first item (whose savepoint took the first number) leaves a gap at
            // most, never a number taken twice, and the next commit comes after all of them.
            let container = try ContainerName("c")
            let second = try await store.commitDirect(
                account: account, container: container,
                [try item("Documents/d", bad), try item("Documents/e", good), try item("Documents/g", good)])
            #expect(second.map { (try? $0.get())?.state } == [nil, .current, .current])
            let after = try await Self.put(store, account, "Documents/f", [held], base: nil)
            let feed = try await store.changes(account: account, container: container, after: 0, limit: 100)
            let numbers = feed.changes.map(\.sequence)
            #expect(Set(numbers).count == numbers.count && numbers == numbers.sorted())
            // Every document, in the order committed (a number taken twice, or a last number
            // not written, would hide one past the head or put it out of order).
            #expect(
                feed.changes.map(\.path.value) == [
                    "Documents/a", "Documents/c", "Documents/e", "Documents/g", "Documents/f"
                ])
            #expect(feed.head == numbers.last && after.version == 1)

            // Manifests read together: each its own answer, and none read past the budget.
            let wanted: [(path: DocumentPath, version: Int64?)] = [
                (try DocumentPath("Documents/e"), nil), (try DocumentPath("Documents/b"), nil),
                (try DocumentPath("Documents/c"), nil)
            ]
            let reads = try await store.manifests(account: account, container: container, wanted, budget: 1 << 20)
            guard case .manifest(let info, let manifest) = reads[0], case .failed(let missing) = reads[1],
                case .manifest = reads[2]
            else {
                Issue.record("\(reads)")
                return
            }
            #expect(info.path.value == "Documents/e" && manifest == good.1 && missing.code == .notFound)
            let tight = try await store.manifests(account: account, container: container, wanted, budget: good.1.count)
            guard case .manifest = tight[0], case .overBudget = tight[1], case .overBudget = tight[2] else {
                Issue.record("\(tight)")
                return
            }
            let short = try await store.manifests(
                account: account, container: container, wanted, budget: good.1.count - 1)
            guard case .overBudget = short[0] else {
                Issue.record("\(short)")
                return
            }
        }
    }

    @Test(arguments: backends) func namesListInByteOrderWithPrefixesAndPages(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let held = Self.chunk(1)
            _ = try await store.addChunks(account: account, [held])
            let names = [
                "Documents/b", "Documents/B", "Documents/é", "Documents/a_z", "Documents/a.z", "Documents/Z", "Data/k"
            ]
            for name in names { _ = try await Self.put(store, account, name, [held], base: nil) }
            var seen: [String] = []
            var after: String? = nil
            repeat {
                let page = try await store.list(
                    account: account, container: try ContainerName("c"), prefix: "Documents/", after: after, limit: 2)
                seen += page.documents.map(\.path.value)
                after = page.next
            } while after != nil
            let expected = names.filter { $0.hasPrefix("Documents/") }.sorted {
                $0.utf8.lexicographicallyPrecedes($1.utf8)
            }
            #expect(seen == expected)
            // The namespace is a tree: nothing below a file, in either order.
            await #expect(throws: XferError.self) {
                _ = try await Self.put(store, account, "Documents/b/inner", [held], base: nil)
            }
            await #expect(throws: XferError.self) { _ = try await Self.put(store, account, "Data", [held], base: nil) }
        }
    }

    @Test(arguments: backends) func keyValueWritesCountBytesAndLastWriterWins(_ kind: String) async throws {
        var policy = StorePolicy()
        policy.keyValueMaximumKeys = 3
        try await Self.withStore(kind, policy: policy) { store, account in
            let container = try ContainerName("c")
            func set(_ key: String, _ value: JSONValue?, at time: Int64) async throws -> KeyValueWriteResult {
                try await store.setValue(
                    account: account, container: container,
                    KeyValueWrite(key: key, value: value, timestampNs: time, device: "d"))
            }
            #expect(try await set("é", .string("ü"), at: 10).applied)
            #expect(try await set("B", .string("x"), at: 10).applied)
            #expect(try await set("a", .string("y"), at: 10).applied)
            // A stale write is refused and the stored entry returned.
            let stale = try await set("a", .string("old"), at: 5)
            #expect(!stale.applied && stale.entry.value == .string("y"))
            // The fourth key is over the limit.
            await #expect(throws: XferError.self) { _ = try await set("d", .string("z"), at: 10) }
            let list = try await store.values(account: account, container: container)
            #expect(list.entries.map(\.key) == ["B", "a", "é"])
            // Bytes, not characters: "é" and "ü" are two bytes each in UTF-8, JSON quotes included.
            #expect(list.bytes == (2 + 4) + (1 + 3) + (1 + 3))
            #expect(try await set("a", nil, at: 20).applied)
            await #expect(throws: XferError.self) {
                _ = try await store.value(account: account, container: container, key: "a")
            }
            #expect(try await store.values(account: account, container: container).entries.count == 2)
        }
    }

    @Test(arguments: backends) func quotaReferencesAndTheDeletionProtocolAgree(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let (a, b) = (Self.chunk(1), Self.chunk(2, length: 500))
            #expect(try await store.addChunks(account: account, [a, b, a]) == (2, 1500))
            #expect(try await store.addChunks(account: account, [a]) == (0, 0))
            _ = try await Self.put(store, account, "Documents/n", [a], base: nil)
            #expect(try await store.account(account).used == 1500)
            // b is a lease nothing references: it expires, and its bytes go back.
            #expect(try await store.expireLeases(olderThan: Int64.max) == (1, 500))
            #expect(try await store.account(account).used == 1000)
            #expect(try await store.heldChunks([a.id, b.id]) == [a.id])
            // A deletion marks only what no account holds; an upload that began before the
            // deletion finished cannot count on the stored copy.
            let started = try await store.clock()
            #expect(try await store.beginDeletion([a.id, b.id]) == [b.id])
            try await store.endDeletion([b.id])
            #expect(try await store.clock() >= started)
            #expect(try await store.addChunks(account: account, [b], uploadStartedAt: started) == (0, 0))
            #expect(
                try await store.addChunks(account: account, [b], uploadStartedAt: try await store.clock() + 1) == (
                    1, 500
                ))
            try await store.forgetDeletions(before: Int64.max)
            let records = try await store.chunkRecords(after: nil, limit: 10)
            #expect(Set(records.map(\.id)) == [a.id, b.id] && records.first { $0.id == a.id }?.refs == 1)
            let manifests = try await store.storedManifests(after: nil, limit: 10)
            #expect(manifests.count == 1 && manifests[0].path == "Documents/n" && manifests[0].state == "current")
            // The quota is charged whole or not at all.
            await #expect(throws: XferError.self) {
                _ = try await store.addChunks(account: account, [OwnedChunk(id: ChunkID.of([9]), length: 1 << 30)])
            }
        }
    }

    @Test(arguments: backends) func tokensAndAccounts(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let token = TokenHash.generate()
            try await store.addToken(
                account: try AccountName("alice"), tokenHash: TokenHash.hash(token), terms: TokenTerms(), notAfter: nil)
            let principal = try #require(try await store.principal(tokenHash: TokenHash.hash(token)))
            #expect(principal.accountID == account && !principal.isAdmin && principal.authenticatedAt > 0)
            #expect(try await store.principal(tokenHash: TokenHash.hash("nobody")) == nil)
            await #expect(throws: XferError.self) {
                _ = try await store.createAccount(
                    name: try AccountName("alice"), quota: 1, tokenHash: TokenHash.hash("again"))
            }
            #expect(try await !store.hasAdminToken())
            try await store.addAdminToken(hash: TokenHash.hash("admin"))
            #expect(try await store.principal(tokenHash: TokenHash.hash("admin"))?.isAdmin == true)
            // The last admin token stays.
            await #expect(throws: XferError.self) { _ = try await store.revokeToken(hash: TokenHash.hash("admin")) }
            #expect(try await store.revokeTokens(account: try AccountName("alice")) == 2)
            #expect(try await store.principal(tokenHash: TokenHash.hash(token)) == nil)
            #expect(try await !store.deploymentID().isEmpty)
        }
    }

    @Test(arguments: backends) func tokenTermsAreKeptListedAndRevokedByID(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let alice = try AccountName("alice")
            let terms = TokenTerms(device: "phone", readOnly: true, container: "notes", expiresInSeconds: 3600)
            let issued = try await store.addToken(
                account: alice, tokenHash: TokenHash.hash("phone-token"), terms: terms, notAfter: nil)
            #expect(issued.id == TokenHash.publicID(ofHash: TokenHash.hash("phone-token")) && issued.id.count == 16)
            let principal = try #require(try await store.principal(tokenHash: TokenHash.hash("phone-token")))
            #expect(principal.accountID == account && principal.device == "phone")
            #expect(principal.scope == TokenScope(readOnly: true, container: "notes") && !principal.isExpired)
            // Its expiry is the store's clock plus the hour, in nanoseconds.
            let expires = try #require(principal.expiresAt)
            #expect(abs(expires - principal.authenticatedAt - 3_600_000_000_000) < 60_000_000_000)
            // A token made before terms existed keeps full scope and no expiry.
            let tokens = try await store.tokens(account: alice)
            #expect(tokens.count == 2)
            let listed = try #require(tokens.first { $0.id == issued.id })
            #expect(
                listed.device == "phone" && listed.readOnly && listed.container == "notes" && !listed.expired
                    && listed.expiresAt != nil)
            let first = try #require(tokens.first { $0.id != issued.id })
            #expect(first.scope.isFull && first.expiresAt == nil && first.device == nil)
            // Revoked by id: only within the account named, only once.
            try await store.addAdminToken(hash: TokenHash.hash("admin"))
            _ = try await store.createAccount(
                name: try AccountName("bob"), quota: 1, tokenHash: TokenHash.hash("bob-token"))
            #expect(try await !store.revokeToken(id: issued.id, account: try AccountName("bob")))
            #expect(try await store.revokeToken(id: issued.id, account: alice))
            #expect(try await !store.revokeToken(id: issued.id, account: nil))
            #expect(try await store.principal(tokenHash: TokenHash.hash("phone-token")) == nil)
            // Expired tokens go when gc asks, admin tokens never.
            try await store.addToken(
                account: alice, tokenHash: TokenHash.hash("short"), terms: TokenTerms(expiresInSeconds: 1),
                notAfter: nil)
            #expect(try await store.removeExpiredTokens(before: 0) == 0)
            #expect(try await store.removeExpiredTokens(before: Int64.max) == 1)
            #expect(try await store.principal(tokenHash: TokenHash.hash("short")) == nil)
            #expect(try await store.principal(tokenHash: TokenHash.hash("admin"))?.isAdmin == true)
            #expect(try await store.tokens(account: alice).count == 1)
            // Never later than the asking token's expiry; nothing from one under a second from it.
            // An hour ahead: these two must still be live when the token limit is counted below,
            // however slowly a loaded machine gets there.
            let now = try await store.clock()
            let hourAhead = try await store.clock() + 3_600_000_000_000
            let child = try await store.addToken(
                account: alice, tokenHash: TokenHash.hash("child"), terms: TokenTerms(expiresInSeconds: 86_400),
                notAfter: hourAhead)
            #expect(try #require(child.expiresAt) <= hourAhead / 1_000_000_000)
            let unbounded = try await store.addToken(
                account: alice, tokenHash: TokenHash.hash("unbounded"), terms: TokenTerms(), notAfter: hourAhead)
            #expect(unbounded.expiresAt != nil, "a token with no expiry asked of an expiring one gets the asker's")
            await #expect(throws: XferError.self) {
                try await store.addToken(
                    account: alice, tokenHash: TokenHash.hash("again"), terms: TokenTerms(), notAfter: now + 500_000_000
                )
            }
            // At most AccountLimits.maximumTokens live tokens.
            for index in try await store.tokens(account: alice).count..<AccountLimits.maximumTokens {
                try await store.addToken(
                    account: alice, tokenHash: TokenHash.hash("many-\(index)"), terms: TokenTerms(), notAfter: nil)
            }
            await #expect(throws: XferError.self) {
                try await store.addToken(
                    account: alice, tokenHash: TokenHash.hash("one-too-many"), terms: TokenTerms(), notAfter: nil)
            }
            #expect(try await store.tokens(account: alice).count == AccountLimits.maximumTokens)
        }
    }

    @Test(arguments: backends) func theAdminSeesEachAccountsUseAndSetsItsQuota(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let (a, b) = (Self.chunk(1), Self.chunk(2))
            _ = try await store.addChunks(account: account, [a, b])
            let first = try await Self.put(store, account, "Documents/one", [a], base: nil)
            _ = try await Self.put(store, account, "Documents/two", [b], base: nil)
            // a second version is one document still
            _ = try await Self.put(store, account, "Documents/one", [b], base: first.version)
            _ = try await store.delete(
                account: account, container: try ContainerName("c"), path: try DocumentPath("Documents/two"),
                baseVersion: 1)
            _ = try await store.createAccount(
                name: try AccountName("bob"), quota: 5, tokenHash: TokenHash.hash("bob-token"))
            let all = try await store.accountSummaries(named: nil)
            #expect(all.map(\.name) == ["alice", "bob"])
            let alice = try #require(all.first)
            #expect(
                alice.documents == 1 && alice.containers == 1 && alice.tokens == 1 && alice.quota == 1 << 30
                    && alice.used == 2000)
            #expect(alice.createdAt > 1_700_000_000)
            #expect(
                all[1]
                    == AccountSummary(
                        name: "bob", quota: 5, used: 0, versionBytes: 0, createdAt: all[1].createdAt, tokens: 1,
                        containers: 0, documents: 0))

            let lowered = try await store.setQuota(account: try AccountName("alice"), quota: 1000)
            #expect(
                lowered.quota == 1000 && lowered.used == 2000 && lowered.documents == 1, "below its use: nothing goes")
            #expect(try await store.accountSummaries(named: try AccountName("alice")) == [lowered])
            await #expect(throws: XferError.self) {
                _ = try await store.setQuota(account: try AccountName("alice"), quota: -1)
            }
            await #expect(throws: XferError.self) {
                _ = try await store.setQuota(account: try AccountName("nobody"), quota: 1)
            }
            await #expect(throws: XferError.self) {
                _ = try await store.accountSummaries(named: try AccountName("nobody"))
            }
        }
    }

    @Test(arguments: backends) func deletingAnAccountRemovesAllItHasAndNothingElse(_ kind: String) async throws {
        try await Self.withStore(kind) { store, account in
            let c = try ContainerName("c")
            let (a, b) = (Self.chunk(1), Self.chunk(2))
            _ = try await store.addChunks(account: account, [a, b])
            let first = try await Self.put(store, account, "Documents/one", [a], base: nil)
            _ = try await Self.put(store, account, "Documents/one", [b], base: first.version)
            _ = try await store.setValue(
                account: account, container: c,
                KeyValueWrite(key: "k", value: .string("v"), timestampNs: 1, device: "d"))
            try await store.patchDeadProperties(
                account: account, container: c, path: "Documents/one",
                [.set(DeadProperty(namespace: "urn:x", name: "p", xml: "<p:p xmlns:p=\"urn:x\">1</p:p>"))])
            _ = try await store.takeDavLock(
                account: account, container: c,
                DavLock(
                    token: "urn:uuid:a", path: "Documents/one", exclusive: true, infinite: false, owner: nil,
                    timeout: 60))
            _ = try await store.createShare(
                account: account, container: c, path: try DocumentPath("Documents/one"), version: nil, password: nil,
                hash: TokenHash.hash("share"), lifetime: nil)
            try await store.addToken(
                account: try AccountName("alice"), tokenHash: TokenHash.hash("alice-2"), terms: TokenTerms(),
                notAfter: nil)
            #expect(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash("alice-2"), sessionHash: TokenHash.hash("session"), lifetime: 3600) != nil
            )
            let bob = try await store.createAccount(
                name: try AccountName("bob"), quota: 1 << 30, tokenHash: TokenHash.hash("bob-token"))
            let bobID = try await Self.accountID(store, bob.name)
            _ = try await store.addChunks(account: bobID, [b])
            _ = try await Self.put(store, bobID, "Documents/bob", [b], base: nil)

            let preview = try await store.deleteAccount(try AccountName("alice"), dryRun: true)
            #expect(
                preview
                    == AccountDeletion(
                        name: "alice", containers: 1, documents: 1, versions: 2, tokens: 2, used: 2000, dryRun: true))
            #expect(
                try await store.accountSummaries(named: try AccountName("alice")).first?.documents == 1,
                "a dry run removes nothing")

            var deleted = try await store.deleteAccount(try AccountName("alice"), dryRun: false)
            deleted.dryRun = true
            #expect(deleted == preview)
            await #expect(throws: XferError.self) {
                _ = try await store.accountSummaries(named: try AccountName("alice"))
            }
            await #expect(throws: XferError.self) {
                _ = try await store.deleteAccount(try AccountName("alice"), dryRun: false)
            }
            #expect(try await store.principal(tokenHash: TokenHash.hash("alice-2")) == nil, "its tokens went with it")
            #expect(try await store.webSession(hash: TokenHash.hash("session")) == nil, "and its web sessions")
            #expect(try await store.shares(account: account).isEmpty)
            #expect(
                try await store.missingChunks(account: account, ids: [a.id, b.id]) == [a.id, b.id], "it holds no chunks"
            )
            let left = try await store.accountSummaries(named: nil)
            #expect(
                left.map(\.name) == ["bob"] && left[0].documents == 1 && left[0].used == 1000, "bob keeps all he had")
            // The name is free again, and a new account by it starts empty.
            _ = try await store.createAccount(
                name: try AccountName("alice"), quota: 1, tokenHash: TokenHash.hash("new-alice"))
            #expect(try await store.accountSummaries(named: try AccountName("alice"))[0].containers == 0)
        }
    }

    @Test(arguments: backends) func chunkLocationsMoveAndEmptyTheirPacks(_ kind: String) async throws {
        try await Self.withStore(kind) { store, _ in
            let ids = (0..<5).map { ChunkID.of([UInt8($0)]) }
            try await store.recordLocations(
                ids.enumerated().map {
                    ChunkLocation(id: $1, pack: $0 < 3 ? "p1" : "p2", offset: Int64($0) * 10, length: 10)
                }, sealedWith: nil)
            // Recording again changes nothing.
            try await store.recordLocations(
                [ChunkLocation(id: ids[0], pack: "other", offset: 0, length: 1)], sealedWith: nil)
            #expect(try await store.locations(ids).count == 5)
            #expect(try await store.locations([ids[0]]).first?.pack == "p1")
            #expect(try await store.locations(pack: "p1").map(\.offset) == [0, 10, 20])
            #expect(try await store.packUsage() == ["p1": 30, "p2": 20])
            var sharded = 0
            for shard in UInt8.min...UInt8.max { sharded += try await store.locations(shard: shard).count }
            #expect(sharded == 5)
            #expect(
                try await store.moveLocations(
                    [ChunkLocation(id: ids[0], pack: "p3", offset: 0, length: 10)], from: "p1", sealedWith: nil) == 1)
            #expect(
                try await store.moveLocations(
                    [ChunkLocation(id: ids[1], pack: "p3", offset: 0, length: 10)], from: "p2", sealedWith: nil) == 0)
            #expect(try await store.removeLocations([ids[1], ids[2]]) == ["p1"])
            #expect(try await store.removeLocations([ids[3]]) == [])
        }
    }
}
