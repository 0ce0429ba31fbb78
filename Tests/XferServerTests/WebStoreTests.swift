import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// What the web view reads from every backend: one folder level, page by page, must be exactly
/// the model of it; sessions expire, end on sign-out and with the token they came from.
@Suite struct WebStoreTests {
    static let container = try! ContainerName("c")

    static func directory(_ store: any MetadataStore, _ account: Int64, _ path: String) async throws {
        let path = try DocumentPath(path)
        let manifest = try Manifest(
            kind: .directory, chunker: .default,
            entries: [
                Manifest.Entry(path: "", kind: .directory, mode: 0o755, mtimeNanoseconds: 1, chunks: [])
            ])
        let announced = try await store.announce(
            account: account, container: container,
            AnnounceRequest(
                path: path, kind: .directory, size: 0, mtimeNs: 1, mode: 0o755, baseVersion: nil, device: "d"))
        _ = try await store.commit(
            account: account, container: container, path: path, version: announced.version,
            baseVersion: nil, manifest: manifest, encoded: manifest.encoded())
    }

    /// The model: the live paths below `prefix`, each first component once, in bytewise order
    /// (a directory document and the folder its contents make are one entry).
    static func model(_ live: [String: Bool], prefix: String) -> [String] {
        var names: Set<String> = []
        for (path, isDirectory) in live where path.hasPrefix(prefix) && path.utf8.count > prefix.utf8.count {
            let rest = String(decoding: path.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
            if let slash = rest.firstIndex(of: "/") {
                names.insert(String(rest[..<slash]) + "/")
            } else {
                names.insert(rest + (isDirectory ? "/" : ""))
            }
        }
        return names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    }

    @Test(arguments: MetadataStoreTests.backends) func everyFolderPageByPageIsTheModelOfIt(_ kind: String) async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let files = [
                "Documents/a.txt", "Documents/a/b.txt", "Documents/a/c/d.txt", "Documents/a-b.txt", "Documents/a0.txt",
                "Documents/é/x", "Documents/z", "Documents/sub/deep/er/file", "Documents/sub-x", "Data/cache.db",
                "Documents/gone/only.txt", "Documents/\u{10FFFF}x", "Documents/ab/c"
            ]
            for (index, name) in files.enumerated() {
                let chunk = MetadataStoreTests.chunk(UInt8(index + 1))
                _ = try await store.addChunks(account: account, [chunk])
                _ = try await MetadataStoreTests.put(store, account, name, [chunk], base: nil)
            }
            // Directory documents: one with contents (shown once), one empty (shown alone).
            try await Self.directory(store, account, "Documents/a")
            try await Self.directory(store, account, "Documents/empty")
            // A folder whose only document was deleted is gone.
            let gone = try await store.document(
                account: account, container: Self.container, path: try DocumentPath("Documents/gone/only.txt"),
                version: nil)
            _ = try await store.delete(
                account: account, container: Self.container, path: gone.path, baseVersion: gone.version)
            var live: [String: Bool] = [:]
            for name in files where name != "Documents/gone/only.txt" { live[name] = false }
            live["Documents/a"] = true
            live["Documents/empty"] = true
            for prefix in [
                "", "Documents/", "Documents/a/", "Documents/sub/", "Documents/sub/deep/", "Documents/none/",
                "Documents/gone/"
            ] {
                let expected = Self.model(live, prefix: prefix)
                for limit in [1, 2, 3, 200] {
                    var got: [String] = []
                    var start: FolderPosition? = nil
                    var pages = 0
                    repeat {
                        let page = try await store.folder(
                            account: account, container: Self.container, prefix: prefix, from: start, limit: limit)
                        #expect(page.entries.count <= limit)
                        got += page.entries.map { $0.name + ($0.folder == nil ? "" : "/") }
                        // Through the token, as a browser carries it.
                        start = try page.next.map { try #require(FolderPosition(token: $0.token)) }
                        pages += 1
                    } while start != nil && pages < 100
                    #expect(got == expected, "prefix \(prefix) limit \(limit)")
                }
            }
            // The empty directory document is a folder entry that carries it.
            let top = try await store.folder(
                account: account, container: Self.container, prefix: "Documents/", from: nil, limit: 200)
            let empty = try #require(top.entries.first { $0.name == "empty" })
            #expect(empty.folder == "Documents/empty/" && empty.document?.kind == .directory)
            #expect(top.entries.first { $0.name == "a.txt" }?.document?.size == 1000)
            // Another account sees nothing of it.
            let other = try await store.createAccount(
                name: try AccountName("bob"), quota: 1 << 30, tokenHash: TokenHash.hash("bob-token"))
            let bob = try await MetadataStoreTests.accountID(store, other.name)
            #expect(
                try await store.folder(account: bob, container: Self.container, prefix: "", from: nil, limit: 10)
                    .entries.isEmpty)
            #expect(try await store.containerList(account: bob).isEmpty)
            #expect(
                try await store.containerList(account: account)
                    == [ContainerEntry(container: "c", role: .owner, encrypted: false, members: 0)])
        }
    }

    @Test func rangesAreReadAsRFC9110SaysWithoutOverflow() {
        func part(_ header: String?, _ size: Int64) -> Range<Int64>? {
            if case .part(let range) = ByteRange(header: header, size: size) { return range }
            return nil
        }
        #expect(part("bytes=0-9", 100) == 0..<10)
        #expect(part("bytes=90-", 100) == 90..<100)
        #expect(part("bytes=-10", 100) == 90..<100)
        #expect(part("bytes=-1000", 100) == 0..<100)
        #expect(part("bytes=50-1000", 100) == 50..<100)
        #expect(part("bytes=0-9223372036854775807", 100) == 0..<100)  // once a crash
        #expect(part("bytes=99-9223372036854775807", 100) == 99..<100)
        for whole in [
            nil, "items=0-1", "bytes=5-3", "bytes=0-1,4-5", "bytes=x-1", "bytes=1-y", "bytes=-",
            "bytes=99999999999999999999-"
        ] {
            if case .whole = ByteRange(header: whole, size: 100) {
            } else {
                Issue.record("\(whole ?? "nil") is not the whole body")
            }
        }
        for unsatisfiable in ["bytes=100-", "bytes=100-200", "bytes=-0"] {
            if case .unsatisfiable = ByteRange(header: unsatisfiable, size: 100) {
            } else {
                Issue.record("\(unsatisfiable) is satisfiable")
            }
        }
        if case .unsatisfiable = ByteRange(header: "bytes=-5", size: 0) {
        } else {
            Issue.record("an empty body has no suffix")
        }
    }

    @Test func escapingIsByScalarSoACombiningMarkCannotEndAnAttribute() {
        let hostile = "x\"\u{301} autofocus y='\u{301}<\u{301}"
        let escaped = WebTemplates.ScalarHTML().escapeText(hostile)
        #expect(!escaped.unicodeScalars.contains { "\"'<>".unicodeScalars.contains($0) })
        let page = WebTemplates.render(
            "error", ["heading": hostile, "message": hostile], layout: ["title": hostile, "version": "v"])
        #expect(Array(page.utf8).firstRange(of: Array("\"\u{301}".utf8)) == nil)
        #expect(page.contains("&quot;\u{301}"))
    }

    @Test(arguments: MetadataStoreTests.backends) func aConflictSettledLongAfterItWasMadeStaysInHistory(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let path = "Documents/old-conflict"
            var chunks: [OwnedChunk] = []
            for seed in 1...20 { chunks.append(MetadataStoreTests.chunk(UInt8(seed))) }
            _ = try await store.addChunks(account: account, chunks)
            let first = try await MetadataStoreTests.put(store, account, path, [chunks[0]], base: nil, mtime: 1)
            let second = try await MetadataStoreTests.put(
                store, account, path, [chunks[1]], base: first.version, mtime: 100)
            // An edit from the first version with an older time: a conflict version.
            let lost = try await MetadataStoreTests.put(
                store, account, path, [chunks[2]], base: first.version, mtime: 50)
            #expect(lost.state == .conflict)
            var current = second.version
            for index in 3..<15 {
                current = try await MetadataStoreTests.put(
                    store, account, path, [chunks[index]], base: current, mtime: Int64(200 + index)
                ).version
            }
            // The conflict was made 40 days ago (and every other version with it).
            try await (store as! any SQLMetadataStore).execute(
                "UPDATE versions SET created_at = created_at - ?", [.int(40 * 86_400)])
            _ = try await store.resolve(
                account: account, container: Self.container,
                ResolveRequest(path: try DocumentPath(path), keep: current, keepAll: true))
            let versions = try await store.versions(
                account: account, container: Self.container, path: try DocumentPath(path)
            ).versions
            #expect(versions.first { $0.version == lost.version }?.state == .superseded)
        }
    }

    @Test func theRequestLogNeverHoldsAShareLinksSecret() {
        let secret = String(repeating: "ab", count: 32)
        #expect(ErrorMiddleware.loggedPath("/s/\(secret)") == "/s/…")
        #expect(ErrorMiddleware.loggedPath("/s/\(secret)/download") == "/s/…/download")
        #expect(ErrorMiddleware.loggedPath("/web/c/default") == "/web/c/default")
    }

    @Test func folderTokensAreReadOnlyAsGiven() {
        #expect(FolderPosition(token: "iDocuments/a") == FolderPosition(key: "Documents/a", inclusive: true))
        #expect(FolderPosition(token: "xb") == FolderPosition(key: "b", inclusive: false))
        for garbage in ["", "q", "i\u{0}", "x" + String(repeating: "a", count: 5000)] {
            #expect(FolderPosition(token: garbage) == nil)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func sessionsExpireEndOnSignOutAndWithTheirToken(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let token = "web-\(UUID().uuidString)"
            try await store.addToken(
                account: try AccountName(try await store.account(account).name), tokenHash: TokenHash.hash(token),
                terms: TokenTerms(), notAfter: nil)
            // An unknown token, or the admin token, opens nothing.
            #expect(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash("nope"), sessionHash: [1], lifetime: 1_000_000_000_000) == nil)
            try await store.addAdminToken(hash: TokenHash.hash("admin-\(token)"))
            #expect(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash("admin-\(token)"), sessionHash: [2], lifetime: 1_000_000_000_000) == nil)
            let session = try #require(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash(token), sessionHash: [3], lifetime: 1_000_000_000_000))
            #expect(session.principal.accountID == account)
            #expect(try await store.webSession(hash: [3])?.principal.accountID == account)
            #expect(try await store.webSession(hash: [4]) == nil)
            try await store.closeWebSession(hash: [3])
            #expect(try await store.webSession(hash: [3]) == nil)
            // Expired: a session of 1 ns is over by the time it is read.
            _ = try await store.openWebSession(tokenHash: TokenHash.hash(token), sessionHash: [5], lifetime: 1)
            #expect(try await store.webSession(hash: [5]) == nil)
            // Revoking the token ends what it opened.
            _ = try await store.openWebSession(
                tokenHash: TokenHash.hash(token), sessionHash: [6], lifetime: 1_000_000_000_000)
            #expect(try await store.webSession(hash: [6]) != nil)
            #expect(try await store.revokeToken(hash: TokenHash.hash(token)))
            #expect(try await store.webSession(hash: [6]) == nil)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func onlyAFullTokenThatHasNotExpiredSignsIn(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let name = try AccountName(try await store.account(account).name)
            for (index, terms) in [TokenTerms(readOnly: true), TokenTerms(container: "notes")].enumerated() {
                try await store.addToken(
                    account: name, tokenHash: TokenHash.hash("scoped-\(index)"), terms: terms, notAfter: nil)
                #expect(
                    try await store.openWebSession(
                        tokenHash: TokenHash.hash("scoped-\(index)"), sessionHash: [UInt8(index)],
                        lifetime: 1_000_000_000_000) == nil, "the web view reaches every container and writes")
            }
            // A session lasts no longer than its token: once the token expires, the session is refused.
            try await store.addToken(
                account: name, tokenHash: TokenHash.hash("brief"),
                terms: TokenTerms(device: "kiosk", expiresInSeconds: 3600), notAfter: nil)
            let session = try #require(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash("brief"), sessionHash: [9], lifetime: 1_000_000_000_000))
            #expect(session.principal.device == "kiosk" && session.principal.expiresAt != nil)
            #expect(try await store.webSession(hash: [9]) != nil)
            try await (store as! any SQLMetadataStore).setTokenExpiry(
                hash: TokenHash.hash("brief"), at: try await store.clock() - 1)
            #expect(try await store.webSession(hash: [9]) == nil)
            #expect(
                try await store.openWebSession(
                    tokenHash: TokenHash.hash("brief"), sessionHash: [10], lifetime: 1_000_000_000_000) == nil)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func anAccountKeepsOnlyItsNewestSessions(_ kind: String) async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let token = "many-\(UUID().uuidString)"
            try await store.addToken(
                account: try AccountName(try await store.account(account).name), tokenHash: TokenHash.hash(token),
                terms: TokenTerms(), notAfter: nil)
            let count = WebSession.maximumPerAccount + 5
            for index in 0..<count {
                _ = try await store.openWebSession(
                    tokenHash: TokenHash.hash(token), sessionHash: [UInt8(index)], lifetime: 1_000_000_000_000)
            }
            var open = 0
            for index in 0..<count where try await store.webSession(hash: [UInt8(index)]) != nil { open += 1 }
            #expect(open == WebSession.maximumPerAccount)
            // The newest is among them.
            #expect(try await store.webSession(hash: [UInt8(count - 1)]) != nil)
        }
    }
    @Test(arguments: MetadataStoreTests.backends) func shareLinksAreAccountsOwnExpireAndGoWhenRevoked(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let chunk = MetadataStoreTests.chunk(1)
            _ = try await store.addChunks(account: account, [chunk])
            _ = try await MetadataStoreTests.put(store, account, "Documents/a", [chunk], base: nil)
            let path = try DocumentPath("Documents/a")
            // Only a live document of this account can be shared.
            await #expect(throws: XferError.self) {
                _ = try await store.createShare(
                    account: account, container: Self.container, path: try DocumentPath("Documents/none"),
                    version: nil, password: nil, hash: [9], lifetime: nil)
            }
            let lasting = try await store.createShare(
                account: account, container: Self.container, path: path, version: nil,
                password: "scrypt$x", hash: [1], lifetime: nil)
            let brief = try await store.createShare(
                account: account, container: Self.container, path: path, version: 1,
                password: nil, hash: [2], lifetime: 1)
            #expect(try await store.share(hash: [1])?.link == lasting)
            #expect(try await store.share(hash: [1])?.password == "scrypt$x")
            #expect(try await store.share(hash: [2]) == nil)  // expired at once
            #expect(try await store.share(hash: [3]) == nil)
            let listed = try await store.shares(account: account)
            #expect(
                listed.map(\.id) == [brief.id, lasting.id] && listed[0].expired && !listed[1].expired
                    && listed[0].version == 1)
            // Another account can neither see nor revoke them.
            let other = try await store.createAccount(
                name: try AccountName("eve"), quota: 1 << 30, tokenHash: TokenHash.hash("eve"))
            let eve = try await MetadataStoreTests.accountID(store, other.name)
            #expect(try await store.shares(account: eve).isEmpty)
            #expect(try await !store.revokeShare(account: eve, id: lasting.id))
            await #expect(throws: XferError.self) {
                _ = try await store.createShare(
                    account: eve, container: Self.container, path: path, version: nil, password: nil, hash: [4],
                    lifetime: nil)
            }
            #expect(try await store.revokeShare(account: account, id: lasting.id))
            #expect(try await store.share(hash: [1]) == nil)
        }
    }

    /// docs/WEB.md: once a document is deleted no link shows any of its versions, and a later
    /// document at the same path is another one, which no earlier link shows either.
    @Test(arguments: MetadataStoreTests.backends) func aLinkShowsOnlyTheLiveDocumentItWasMadeFor(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let (a, b) = (MetadataStoreTests.chunk(1), MetadataStoreTests.chunk(2))
            _ = try await store.addChunks(account: account, [a, b])
            let path = try DocumentPath("Documents/a")
            let first = try await MetadataStoreTests.put(store, account, path.value, [a], base: nil)
            let second = try await MetadataStoreTests.put(store, account, path.value, [b], base: first.version)
            func share(_ version: Int64?, _ hash: UInt8) async throws -> ShareLink {
                try await store.createShare(
                    account: account, container: Self.container, path: path, version: version, password: nil,
                    hash: [hash], lifetime: nil)
            }
            _ = try await share(first.version, 1)
            let pinned = try #require(try await store.share(hash: [1]))
            #expect(try await store.sharedManifest(pinned).info.version == first.version)
            let deleted = try await store.delete(
                account: account, container: Self.container, path: path, baseVersion: second.version)
            #expect(try await store.share(hash: [1]) == nil)
            await #expect(throws: XferError.self) { _ = try await store.sharedManifest(pinned) }
            // While it is deleted, none of its versions can be shared, pinned or not.
            for version in [nil, first.version, second.version] as [Int64?] {
                await #expect(throws: XferError.self) {
                    try await store.checkShare(
                        account: account, container: Self.container, path: path, version: version)
                }
                await #expect(throws: XferError.self) { _ = try await share(version, 2) }
            }
            // A new document at the path: its own versions can be shared, the earlier one's cannot.
            let again = try await MetadataStoreTests.put(store, account, path.value, [a], base: deleted.version)
            for version in [first.version, second.version] {
                await #expect(throws: XferError.self, "version \(version) is the deleted document's") {
                    _ = try await share(version, 3)
                }
            }
            #expect(try await share(again.version, 4).version == again.version)
            #expect(
                try await store.sharedManifest(try #require(try await store.share(hash: [4]))).info.version
                    == again.version)
            // A link that outlived its document (made before it was deleted, however) shows nothing of the new one.
            try await (store as! any SQLMetadataStore).execute(
                """
                INSERT INTO share_links (hash, account_id, container, path, version, created_at) VALUES (?, ?, ?, ?, ?, ?)
                """,
                [
                    .blob([5]), .int(account), .text(Self.container.value), .text(path.value), .int(first.version),
                    .int(0)
                ])
            #expect(try await store.share(hash: [5]) == nil)
            await #expect(throws: XferError.self) {
                _ = try await store.sharedManifest(ShareGrant(link: pinned.link, account: account, password: nil))
            }
        }
    }
}
