import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferDav
@testable import XferServer

/// WebDAV class 2: the If header's grammar and meaning, which locks conflict, the locks kept
/// on every backend, and LOCK/UNLOCK with the check each write makes, in-process. litmus's
/// `locks` group drives the same from outside (tools/suites/webdav-test.py).
@Suite struct DavLockTests {
    static let container = try! ContainerName("c")

    @Test func anIfHeaderIsReadIntoTaggedAndUntaggedLists() throws {
        let untagged = try DavIf.parse(#"(<urn:uuid:a> ["e1"]) (Not <DAV:no-lock> [W/"e2"])"#)
        #expect(
            untagged.lists == [
                DavIf.List(
                    resource: nil,
                    conditions: [
                        .init(not: false, token: "urn:uuid:a", etag: nil), .init(not: false, token: nil, etag: #""e1""#)
                    ]),
                DavIf.List(
                    resource: nil,
                    conditions: [
                        .init(not: true, token: "DAV:no-lock", etag: nil), .init(not: false, token: nil, etag: #""e2""#)
                    ])
            ])
        #expect(untagged.tokens == ["urn:uuid:a", "DAV:no-lock"])
        let tagged = try DavIf.parse(#"<http://h/dav/c/a> (<urn:uuid:a>) </dav/c/b> (["x]y"])"#)
        #expect(tagged.lists.map(\.resource) == ["http://h/dav/c/a", "/dav/c/b"])
        #expect(tagged.lists[1].conditions[0].etag == #""x]y""#, "a ] inside the quotes belongs to the tag")
        for bad in [
            "", "()", "(<a>", "<http://h/a>", "(x)", "(<a>) <http://h/a> (<b>)", String(repeating: "(<a>)", count: 65)
        ] {
            #expect(throws: XferError.self, "\(bad.prefix(20))") { try DavIf.parse(bad) }
        }
    }

    @Test func anIfHeaderHoldsWhenAListDoes() async throws {
        let state: (String?) async throws -> (etag: String?, tokens: Set<String>) = { url in
            url == nil ? (#""e""#, ["urn:uuid:held"]) : (nil, [])
        }
        func holds(_ header: String) async throws -> Bool { try await DavIf.parse(header).holds(state) }
        #expect(try await holds(#"(<urn:uuid:held> ["e"])"#))
        #expect(try await !holds(#"(<urn:uuid:held> ["other"])"#), "every condition of a list must hold")
        #expect(try await holds(#"(<urn:uuid:gone>) (Not <DAV:no-lock>)"#), "the second list holds")
        #expect(try await !holds("(<DAV:no-lock>)"), "no lock has DAV:no-lock")
        #expect(try await !holds("</dav/c/other> (<urn:uuid:held>)"), "the tagged resource holds no lock")
    }

    @Test func locksConflictWhenEitherIsExclusiveAndEitherCoversTheOther() {
        func lock(_ path: String, exclusive: Bool = true, infinite: Bool = false) -> DavLock {
            DavLock(
                token: UUID().uuidString, path: path, exclusive: exclusive, infinite: infinite, owner: nil, timeout: 60)
        }
        #expect(lock("Documents/a").conflicts(with: lock("Documents/a", exclusive: false)))
        #expect(
            !lock("Documents/a", exclusive: false).conflicts(with: lock("Documents/a", exclusive: false)),
            "shared locks share")
        #expect(lock("Documents/a", infinite: true).conflicts(with: lock("Documents/a/b")))
        #expect(lock("Documents/a/b").conflicts(with: lock("Documents", infinite: true)))
        #expect(!lock("Documents/a").conflicts(with: lock("Documents/a/b")), "depth 0 covers the folder alone")
        #expect(!lock("Documents/a", infinite: true).conflicts(with: lock("Documents/a-b")), "a-b is not below a")
        #expect(
            lock("Documents", infinite: true).covers("Documents/x/y") && !lock("Documents/x").covers("Documents/x/y"))
    }

    @Test(arguments: MetadataStoreTests.backends) func locksAreTakenRefreshedAndReleasedOnEveryBackend(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, account in
            let c = Self.container
            let first = DavLock(
                token: "urn:uuid:1", path: "Documents/a", exclusive: true, infinite: true,
                owner: "<D:owner xmlns:D=\"DAV:\">me</D:owner>",
                timeout: 999_999)
            #expect(try await store.takeDavLock(account: account, container: c, first).isEmpty)
            let inside = DavLock(
                token: "urn:uuid:2", path: "Documents/a/b", exclusive: false, infinite: false, owner: nil, timeout: 60)
            #expect(
                try await store.takeDavLock(account: account, container: c, inside).map(\.token) == ["urn:uuid:1"],
                "the folder's lock covers it")
            let beside = DavLock(
                token: "urn:uuid:3", path: "Documents/a-b", exclusive: true, infinite: false, owner: nil, timeout: 60)
            #expect(try await store.takeDavLock(account: account, container: c, beside).isEmpty)
            var (locks, now) = try await store.davLocks(account: account, container: c)
            #expect(Set(locks.map(\.token)) == ["urn:uuid:1", "urn:uuid:3"])
            let held = try #require(locks.first { $0.token == "urn:uuid:1" })
            #expect(
                held.timeout == DavLock.maximumTimeout && held.owner == first.owner && held.infinite && held.exclusive,
                "the timeout is bounded")
            #expect(held.expiresAt > now && held.expiresAt <= now + DavLock.maximumTimeout * 1_000_000_000)

            let refreshed = try await store.refreshDavLock(
                account: account, container: c, token: "urn:uuid:3", timeout: 120)
            #expect(refreshed?.timeout == 120)
            #expect(
                try await store.refreshDavLock(account: account, container: c, token: "urn:uuid:none", timeout: 120)
                    == nil)
            #expect(try await store.releaseDavLock(account: account, container: c, token: "urn:uuid:3"))
            #expect(
                try await !store.releaseDavLock(account: account, container: c, token: "urn:uuid:3"), "released already"
            )

            try await store.releaseDavLocks(account: account, container: c, below: "Documents")
            (locks, now) = try await store.davLocks(account: account, container: c)
            #expect(locks.isEmpty)
            #expect(
                try await store.takeDavLock(account: account, container: c, inside).isEmpty,
                "the folder's lock went with it")
        }
    }

    func basic(_ token: String) -> String { "Basic " + Data("anyone:\(token)".utf8).base64EncodedString() }
    static let lockBody =
        #"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner><D:href>me</D:href></D:owner></D:lockinfo>"#
    static let lock = HTTPRequest.Method("LOCK")!
    static let unlock = HTTPRequest.Method("UNLOCK")!

    @Test func aLockedFileIsWrittenOnlyWithItsTokenAndALockedFolderGuardsItsMembers() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: auth, body: ByteBuffer(string: "one")
            ) { #expect($0.status == .created) }
            var token = ""
            try await client.execute(
                uri: "/dav/box/a.txt", method: Self.lock, headers: auth, body: ByteBuffer(string: Self.lockBody)
            ) { response in
                #expect(response.status == .ok)
                token = String(response.headers[DavRoutes.lockTokenHeader]?.dropFirst().dropLast() ?? "")
                #expect(String(buffer: response.body).contains("<D:href>me</D:href>"), "the owner comes back")
            }
            #expect(token.hasPrefix("urn:uuid:"))
            try await client.execute(
                uri: "/dav/box/a.txt", method: Self.lock, headers: auth, body: ByteBuffer(string: Self.lockBody)
            ) {
                #expect($0.status.code == 423, "an exclusive lock is held")
            }
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: auth, body: ByteBuffer(string: "two")
            ) {
                #expect($0.status.code == 423, "no token, no write")
            }
            try await client.execute(uri: "/dav/box/a.txt", method: .delete, headers: auth) {
                #expect($0.status.code == 423)
            }
            var withToken = auth
            withToken[DavRoutes.ifHeader] = "(<\(token)>)"
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: withToken, body: ByteBuffer(string: "two")
            ) {
                #expect($0.status == .noContent)
            }
            var wrong = auth
            wrong[DavRoutes.ifHeader] = "(<urn:uuid:not-this>)"
            try await client.execute(uri: "/dav/box/a.txt", method: .put, headers: wrong, body: ByteBuffer(string: "x"))
            {
                #expect($0.status.code == 412, "a list that does not hold")
            }
            try await client.execute(
                uri: "/dav/box/a.txt", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic(fixture.token), HTTPField.Name("Depth")!: "0"]
            ) { response in
                let xml = String(buffer: response.body)
                #expect(
                    xml.contains("<D:lockdiscovery><D:activelock>") && xml.contains(token)
                        && xml.contains("<D:supportedlock>"))
            }
            var unlock = auth
            unlock[DavRoutes.lockTokenHeader] = "<urn:uuid:not-this>"
            try await client.execute(uri: "/dav/box/a.txt", method: Self.unlock, headers: unlock) {
                #expect($0.status == .conflict)
            }
            unlock[DavRoutes.lockTokenHeader] = "<\(token)>"
            try await client.execute(uri: "/dav/box/a.txt", method: Self.unlock, headers: unlock) {
                #expect($0.status == .noContent)
            }
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: auth, body: ByteBuffer(string: "three")
            ) {
                #expect($0.status == .noContent, "unlocked")
            }

            // A folder locked at depth 0 guards what is added to it and removed from it, not its members' bytes.
            try await client.execute(uri: "/dav/box/f", method: HTTPRequest.Method("MKCOL")!, headers: auth) {
                #expect($0.status == .created)
            }
            try await client.execute(
                uri: "/dav/box/f/in.txt", method: .put, headers: auth, body: ByteBuffer(string: "in")
            ) { #expect($0.status == .created) }
            var folderLock = auth
            folderLock[HTTPField.Name("Depth")!] = "0"
            try await client.execute(
                uri: "/dav/box/f/", method: Self.lock, headers: folderLock, body: ByteBuffer(string: Self.lockBody)
            ) { #expect($0.status == .ok) }
            try await client.execute(
                uri: "/dav/box/f/in.txt", method: .put, headers: auth, body: ByteBuffer(string: "in2")
            ) { #expect($0.status == .noContent) }
            try await client.execute(
                uri: "/dav/box/f/new.txt", method: .put, headers: auth, body: ByteBuffer(string: "n")
            ) { #expect($0.status.code == 423) }
            try await client.execute(uri: "/dav/box/f/in.txt", method: .delete, headers: auth) {
                #expect($0.status.code == 423)
            }
            var move = auth
            move[HTTPField.Name("Destination")!] = "/dav/box/g"
            try await client.execute(uri: "/dav/box/f", method: HTTPRequest.Method("MOVE")!, headers: move) {
                #expect($0.status.code == 423)
            }

            // A tagged list on a URL outside the container holds nothing, and is no error: the next list holds.
            var elsewhere = auth
            elsewhere[DavRoutes.ifHeader] =
                "<http://other.example/x> (<urn:uuid:x>) </dav/box/a.txt> (Not <DAV:no-lock>)"
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: elsewhere, body: ByteBuffer(string: "four")
            ) {
                #expect($0.status == .noContent)
            }
            elsewhere[DavRoutes.ifHeader] = "<http://other.example/x> (<urn:uuid:x>)"
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: elsewhere, body: ByteBuffer(string: "five")
            ) {
                #expect($0.status.code == 412, "what it names there holds no lock")
            }

            // A lock on a name that holds nothing makes an empty file there.
            try await client.execute(
                uri: "/dav/box/new.txt", method: Self.lock, headers: auth, body: ByteBuffer(string: Self.lockBody)
            ) { response in
                #expect(response.status == .created)
            }
            try await client.execute(uri: "/dav/box/new.txt", method: .get, headers: auth) { response in
                #expect(response.status == .ok && response.body.readableBytes == 0)
            }
        }
    }

    /// What a write settles last: a file made meanwhile is never emptied by a LOCK's empty file,
    /// and a write whose last check fails (a lock taken while its body arrived) commits nothing.
    @Test func aLateLockOrALateFileStopsTheWriteBeforeItCommits() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let routes = DavRoutes(
            metadata: fixture.data.metadata, chunks: fixture.data.chunks, limits: ServerLimits(),
            changes: ChangeNotifier(),
            quota: QuotaGate(), limiter: TokenLimiter(TokenLimits()))
        let account = try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))!.accountID
        let target = DavRoutes.Target(
            account: account, container: try ContainerName("box"), named: try ContainerName("box"), relative: "a.txt",
            slash: false)
        let path = try DocumentPath("Documents/a.txt")
        try await routes.writeFile(target, path, base: nil, body: nil)
        await #expect(throws: XferError.self, "a live file is not replaced by a lock's empty one") {
            try await routes.writeFile(target, path, base: nil, onlyNew: true, body: nil)
        }
        await #expect(throws: DavRoutes.DavStatus.self) {
            try await routes.writeFile(target, path, base: 1, body: nil) {
                throw DavRoutes.DavStatus(status: .davLocked, message: "locked meanwhile")
            }
        }
        let info = try await fixture.data.metadata.document(
            account: account, container: try ContainerName("box"), path: path, version: nil)
        #expect(info.version == 1, "nothing was committed after the first")
    }
}
