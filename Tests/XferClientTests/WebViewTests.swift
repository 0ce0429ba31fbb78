import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer
import XferTestSupport

/// The web view over a real server and a real HTTP client, as a browser uses it: cookies kept,
/// redirects looked at, not followed. (The pages in a real browser: tools/suites/web-test.py.)
@Suite(LiveServer.plainOnly("the web view shows plain containers; an encrypted one is tested on its own here"))
struct WebViewTests {
    /// A browser's cookie jar over one HTTP client.
    final class Browser: @unchecked Sendable {
        let base: String
        /// Generous waits: the whole client suite runs at once on two cores, and a request may
        /// queue behind every other test's work.
        let client = HTTPClient(
            eventLoopGroupProvider: .singleton,
            configuration: HTTPClient.Configuration(
                redirectConfiguration: .disallow, timeout: .init(connect: .seconds(120)),
                connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 32)))
        var cookies: [String: String] = [:]

        init(_ base: String) { self.base = base }

        struct Page {
            var status: Int
            var headers: HTTPHeaders
            var body: [UInt8]
            var text: String { String(decoding: body, as: UTF8.self) }
        }

        func get(_ path: String, headers extra: [(String, String)] = []) async throws -> Page {
            try await send(.GET, path, headers: extra)
        }

        func post(_ path: String, form: [String: String], origin: String? = nil) async throws -> Page {
            let body = form.map { "\($0.key)=\(WebViewTests.encode($0.value))" }.joined(separator: "&")
            var headers = [("Content-Type", "application/x-www-form-urlencoded"), ("Origin", origin ?? base)]
            headers.append(("Sec-Fetch-Site", origin == nil ? "same-origin" : "cross-site"))
            return try await send(.POST, path, headers: headers, body: Array(body.utf8))
        }

        func send(_ method: HTTPMethod, _ path: String, headers extra: [(String, String)] = [], body: [UInt8]? = nil)
            async throws -> Page
        {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            for (name, value) in extra { request.headers.add(name: name, value: value) }
            if !cookies.isEmpty {
                request.headers.add(
                    name: "Cookie", value: cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; "))
            }
            if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
            let response = try await client.execute(request, timeout: .seconds(180))
            var collected = try await response.body.collect(upTo: 64 << 20)
            for line in response.headers["Set-Cookie"] {
                let pair = line.split(separator: ";")[0].split(
                    separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let (name, value) = (String(pair[0]), pair.count > 1 ? String(pair[1]) : "")
                if value.isEmpty || line.contains("Max-Age=0") { cookies[name] = nil } else { cookies[name] = value }
            }
            return Page(
                status: Int(response.status.code), headers: response.headers,
                body: collected.readBytes(length: collected.readableBytes) ?? [])
        }

        /// A multipart form, fields in order, files last (as a browser sends the page's forms).
        func upload(_ path: String, fields: [(String, String)], files: [(name: String, bytes: [UInt8])]) async throws
            -> Page
        {
            let boundary = "----xferTestBoundary\(UUID().uuidString)"
            var body: [UInt8] = []
            for (name, value) in fields {
                body += Array(
                    "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8)
            }
            for file in files {
                body += Array(
                    "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"\(file.name)\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                        .utf8)
                body += file.bytes + Array("\r\n".utf8)
            }
            body += Array("--\(boundary)--\r\n".utf8)
            return try await send(
                .POST, path,
                headers: [
                    ("Content-Type", "multipart/form-data; boundary=\(boundary)"), ("Origin", base),
                    ("Sec-Fetch-Site", "same-origin")
                ], body: body)
        }

        /// The value of hidden field `csrf` on a page.
        static func csrf(_ page: Page) -> String? {
            guard let range = page.text.range(of: #"name="csrf" value=""#) else { return nil }
            return String(page.text[range.upperBound...].prefix { $0 != "\"" })
        }

        func signIn(_ token: String) async throws {
            let form = try await get("/web/signin")
            let page = try await post("/web/signin", form: ["token": token, "csrf": try #require(Self.csrf(form))])
            #expect(page.status == 303)
        }

        func shutdown() async { try? await client.shutdown() }
    }

    static func encode(_ value: String) -> String {
        value.addingPercentEncoding(
            withAllowedCharacters: CharacterSet(
                charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? ""
    }

    static func browse<T: Sendable>(_ server: LiveServer, _ body: @escaping @Sendable (Browser) async throws -> T)
        async throws -> T
    {
        let browser = Browser(server.remote.connection.server)
        do {
            let result = try await body(browser)
            await browser.shutdown()
            return result
        } catch {
            await browser.shutdown()
            throw error
        }
    }

    @Test func signingInSetsAStrictHttpOnlyCookieAndSigningOutEndsIt() async throws {
        try await LiveServer.run { server in
            try await Self.browse(server) { browser in
                // Signed out, every page leads to the sign-in form.
                let home = try await browser.get("/web/")
                #expect(home.status == 303 && home.headers["Location"].first == "/web/signin")
                let form = try await browser.get("/web/signin")
                #expect(form.status == 200 && form.text.contains("Account token"))
                #expect(form.headers["Set-Cookie"].first?.hasPrefix("xfer_signin=") == true)
                // A form without its token, or from another site, signs nothing in (each
                // answer is a fresh form, with a fresh token).
                #expect(try await browser.post("/web/signin", form: ["token": server.token, "csrf": "0"]).status == 403)
                let fresh = try #require(Browser.csrf(try await browser.get("/web/signin")))
                #expect(
                    try await browser.post(
                        "/web/signin", form: ["token": server.token, "csrf": fresh], origin: "https://evil.example"
                    ).status == 403)
                #expect(browser.cookies["xfer_session"] == nil)
                // The admin token and a wrong one are refused.
                let admin = try String(contentsOfFile: server.root + "/data/admin-token", encoding: .utf8)
                    .trimmingCharacters(in: .whitespacesAndNewlines)
                let csrf = try #require(Browser.csrf(try await browser.get("/web/signin")))
                #expect(try await browser.post("/web/signin", form: ["token": admin, "csrf": csrf]).status == 401)
                let again = try #require(Browser.csrf(try await browser.get("/web/signin")))
                #expect(
                    try await browser.post("/web/signin", form: ["token": "xfer_nope", "csrf": again]).status == 401)
                let third = try #require(Browser.csrf(try await browser.get("/web/signin")))
                let signedIn = try await browser.post("/web/signin", form: ["token": server.token, "csrf": third])
                #expect(signedIn.status == 303)
                let cookie = try #require(signedIn.headers["Set-Cookie"].first { $0.hasPrefix("xfer_session=") })
                for attribute in ["HttpOnly", "SameSite=Strict", "Path=/web", "Max-Age="] {
                    #expect(cookie.contains(attribute))
                }
                #expect(!cookie.contains("Secure"))  // plain HTTP here; TLS servers add it
                #expect(!cookie.contains(server.token))
                let page = try await browser.get("/web/")
                #expect(page.status == 200 && page.text.contains("tester"))
                #expect(page.headers["Content-Security-Policy"].first?.contains("default-src 'none'") == true)
                // Signing out needs the page's token and this site.
                let token = try #require(Browser.csrf(page))
                #expect(try await browser.post("/web/signout", form: ["csrf": "bad"]).status == 403)
                #expect(
                    try await browser.post("/web/signout", form: ["csrf": token], origin: "https://evil.example").status
                        == 403)
                let kept = browser.cookies
                #expect(try await browser.post("/web/signout", form: ["csrf": token]).status == 303)
                #expect(try await browser.get("/web/").status == 303)
                // The old cookie, replayed, is dead on the server too.
                browser.cookies = kept
                #expect(try await browser.get("/web/").status == 303)
            }
        }
    }

    @Test func browseAndDownloadFilesWithRangesAndPackagesAsTar() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source"
            let big = Files.random(count: 3_000_000, seed: 7)
            try Files.write(source + "/big.bin", big)
            try Files.write(source + "/Album/cover.txt", Array("cover".utf8))
            try Files.write(
                source + "/Album/tracks/01 - the first one with a long name that tar keeps in a pax record, été.txt",
                Array(repeating: 9, count: 70_000))
            try FileManager.default.createSymbolicLink(atPath: source + "/Album/link", withDestinationPath: "cover.txt")
            _ = try await server.push(source + "/big.bin", "Documents/Work/big.bin")
            _ = try await server.push(source + "/Album", "Documents/Album")
            _ = try await server.push(source + "/Album/cover.txt", "Documents/Work/deeper/more/c.txt")
            _ = try await server.push(source + "/Album/cover.txt", "Documents/my report.txt")
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                let top = try await browser.get("/web/c/default?folder=Documents/")
                #expect(top.status == 200)
                // One entry per folder, however much lies below it.
                #expect(top.text.components(separatedBy: "<bdi>Work</bdi>").count == 2)
                #expect(top.text.contains("folder=Documents%2FWork%2F"))
                let work = try await browser.get("/web/c/default?folder=Documents%2FWork%2F")
                #expect(
                    work.text.contains("big.bin") && work.text.contains("<bdi>deeper</bdi>")
                        && !work.text.contains("c.txt"))
                // The whole file, then ranges of it.
                let raw = "/web/c/default/raw?path=Documents%2FWork%2Fbig.bin"
                let whole = try await browser.get(raw)
                #expect(whole.status == 200 && whole.body == big)
                #expect(whole.headers["Content-Disposition"].first?.hasPrefix("attachment") == true)
                #expect(whole.headers["Accept-Ranges"].first == "bytes")
                let part = try await browser.get(raw, headers: [("Range", "bytes=1000000-1999999")])
                #expect(part.status == 206 && part.body == Array(big[1_000_000..<2_000_000]))
                #expect(part.headers["Content-Range"].first == "bytes 1000000-1999999/3000000")
                let tail = try await browser.get(raw, headers: [("Range", "bytes=-10")])
                #expect(tail.status == 206 && tail.body == Array(big.suffix(10)))
                let open = try await browser.get(raw, headers: [("Range", "bytes=2999990-")])
                #expect(open.body == Array(big.suffix(10)))
                let beyond = try await browser.get(raw, headers: [("Range", "bytes=3000000-")])
                #expect(beyond.status == 416 && beyond.headers["Content-Range"].first == "bytes */3000000")
                // A stale If-Range gets the whole file.
                let huge = try await browser.get(raw, headers: [("Range", "bytes=2999999-9223372036854775807")])
                #expect(huge.status == 206 && huge.body == Array(big.suffix(1)))
                let stale = try await browser.get(raw, headers: [("Range", "bytes=0-9"), ("If-Range", "\"other\"")])
                #expect(stale.status == 200 && stale.body.count == big.count)
                // The package as tar, unpacked by tar itself: the same tree.
                let tar = try await browser.get("/web/c/default/raw?path=Documents%2FAlbum")
                #expect(tar.status == 200 && tar.headers["Content-Type"].first == "application/x-tar")
                let out = server.root + "/untar"
                try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
                try Data(tar.body).write(to: URL(fileURLWithPath: out + "/a.tar"))
                let process = ChildProcess()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/tar")
                process.arguments = ["-xf", out + "/a.tar", "-C", out]
                try process.run()
                process.waitUntilExit()
                #expect(process.terminationStatus == 0)
                // Kind, mode and content (tar keeps times to the second only: left out).
                func withoutTimes(_ line: String) -> String {
                    var fields = line.split(separator: " ").map(String.init)
                    if fields.count >= 3, fields[0] != "symlink" { fields.remove(at: 2) }
                    return fields.joined(separator: " ")
                }
                let original = try Files.snapshot(source + "/Album").mapValues(withoutTimes)
                let unpacked = try Files.snapshot(out + "/Album").mapValues(withoutTimes)
                #expect(unpacked == original)
                #expect(
                    Files.read(
                        out
                            + "/Album/tracks/01 - the first one with a long name that tar keeps in a pax record, été.txt"
                    ) == Array(repeating: 9, count: 70_000))
                #expect(
                    (try? FileManager.default.destinationOfSymbolicLink(atPath: out + "/Album/link")) == "cover.txt")
                // The document page lists versions and the package's contents.
                let item = try await browser.get("/web/c/default/item?path=Documents%2FAlbum")
                #expect(item.status == 200 && item.text.contains("Download as .tar") && item.text.contains("tracks/"))
                // Search.
                // A GET form sends a space as `+`.
                let spaced = try await browser.get("/web/c/default/search?name=my+rep*&kind=")
                #expect(spaced.status == 200 && spaced.text.contains("Documents/my report.txt"))
                // A document's page links every folder above it.
                let deep = try await browser.get("/web/c/default/item?path=Documents%2FWork%2Fbig.bin")
                #expect(
                    deep.text.contains("href=\"/web/c/default?folder=Documents%2FWork%2F\"")
                        && deep.text.contains("href=\"/web/c/default\""))
                let found = try await browser.get("/web/c/default/search?name=*.BIN&kind=")
                #expect(
                    found.status == 200 && found.text.contains("Documents/Work/big.bin")
                        && !found.text.contains("Album"))
                // Bad input is a page that says so, not a crash.
                #expect(try await browser.get("/web/c/default/search?name=a%2Fb").status == 400)
                #expect(try await browser.get("/web/c/default?folder=nope").status == 400)
                #expect(try await browser.get("/web/c/default?folder=Documents%2F&page=garbage").status == 400)
                #expect(try await browser.get("/web/c/default/raw?path=Documents%2Fnone").status == 404)
                #expect(try await browser.get("/web/c/bad%20name").status == 400)
            }
        }
    }

    @Test func hostileNamesAreShownAsTextAndDownloadedAsAttachments() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source"
            let names = [
                "<script>alert(1)</script>.html", "quote\"'&amp;.txt", "שלום-txt.exe",
                String(repeating: "long", count: 60) + ".txt",
                "<img src=x onerror=alert(2)>", "x\"\u{301} autofocus y=\"\u{301}"
            ]
            for (index, name) in names.enumerated() {
                try Files.write(source + "/\(index)", Array("<script>alert('content')</script>".utf8))
                _ = try await server.push(source + "/\(index)", "Documents/" + name)
            }
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                for page in [
                    "/web/c/default?folder=Documents%2F", "/web/c/default/search?name=*",
                    "/web/c/default/item?path=" + Self.encode("Documents/" + names[4]),
                    "/web/c/default?folder=" + Self.encode("Documents/<script>alert(1)</")
                ] {
                    let text = try await browser.get(page).text
                    #expect(!text.contains("<script>alert"), "\(page)")
                    #expect(!text.contains("<img src=x"), "\(page)")
                    #expect(!text.contains("quote\"'"), "\(page)")
                    // A quote joined to a combining mark is still a quote to an HTML parser.
                    #expect(Array(text.utf8).firstRange(of: Array("\"\u{301}".utf8)) == nil, "\(page)")
                }
                // The key-value store, read only, escaped as well.
                _ = try await server.client().setValue(.string("<script>alert(3)</script>"), forKey: "<b>theme</b>")
                let kv = try await browser.get("/web/c/default/kv").text
                #expect(!kv.contains("<script>alert(3)") && !kv.contains("<b>theme"))
                #expect(
                    kv.contains("&lt;b&gt;theme&lt;/b&gt;")
                        && kv.contains("&quot;&lt;script&gt;alert(3)&lt;/script&gt;&quot;"))
                let listing = try await browser.get("/web/c/default?folder=Documents%2F").text
                // A name with a `/` is a folder and what is below it.
                #expect(listing.contains("<bdi>&lt;script&gt;alert(1)&lt;</bdi>"))
                #expect(listing.contains("<bdi>&lt;img src=x onerror=alert(2)&gt;</bdi>"))
                #expect(listing.contains("quote&quot;&#39;&amp;amp;.txt"))
                #expect(listing.contains("<bdi>שלום-txt.exe</bdi>"))
                // Content is never served as a page, whatever its name says.
                let raw = try await browser.get("/web/c/default/raw?path=" + Self.encode("Documents/" + names[4]))
                #expect(raw.headers["Content-Type"].first == "application/octet-stream")
                #expect(raw.headers["X-Content-Type-Options"].first == "nosniff")
                #expect(
                    raw.headers["Content-Disposition"].first?.hasPrefix(
                        "attachment; filename=\"<img src=x onerror=alert(2)>\"") == true)
                let rtl = try await browser.get("/web/c/default/raw?path=" + Self.encode("Documents/" + names[2]))
                #expect(
                    rtl.headers["Content-Disposition"].first?.contains(
                        "filename=\"____-txt.exe\"; filename*=UTF-8''%D7%A9") == true)
            }
        }
    }

    @Test func oneAccountSeesNothingOfAnothersAndEncryptedContainersShowNothing() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source"
            try Files.write(source + "/secret.txt", Array("alice's".utf8))
            _ = try await server.push(source + "/secret.txt", "Documents/secret.txt")
            // An encrypted container of the same account: listed as such, nothing shown.
            var sealed = Remote(
                connection: server.remote.connection, container: try ContainerName("vault"),
                stateDirectory: server.root + "/vault-state")
            let key = try await EncryptedContainers(remote: sealed).create(
                passphrase: "p", parameters: try ScryptParameters(logN: 10, r: 8, p: 1))
            sealed = Remote(
                connection: server.remote.connection, container: try ContainerName("vault"),
                stateDirectory: server.root + "/vault-state",
                endToEnd: EndToEndKeys(key: key))
            _ = try await server.push(source + "/secret.txt", "Documents/hidden-name.txt", from: sealed)
            let bob = try await server.data.createAccount(name: "bob", quota: nil).token!
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                let home = try await browser.get("/web/").text
                #expect(
                    home.contains("href=\"/web/c/default\"") && home.contains("encrypted")
                        && !home.contains("href=\"/web/c/vault\""))
                let vault = try await browser.get("/web/c/vault?folder=Documents%2F")
                #expect(
                    vault.status == 200 && vault.text.contains("end-to-end encrypted")
                        && !vault.text.contains("hidden-name"))
                let refused = try await browser.get("/web/c/vault/raw?path=Documents%2Fhidden-name.txt")
                #expect(refused.status >= 400 && !refused.body.contains(Array("alice's".utf8)))
            }
            try await Self.browse(server) { browser in
                try await browser.signIn(bob)
                let home = try await browser.get("/web/").text
                #expect(home.contains("bob") && !home.contains("/web/c/default"))
                let listing = try await browser.get("/web/c/default?folder=Documents%2F")
                #expect(!listing.text.contains("secret.txt"))
                let stolen = try await browser.get("/web/c/default/raw?path=Documents%2Fsecret.txt")
                #expect(stolen.status == 404 && !stolen.text.contains("alice's"))
            }
        }
    }

    @Test func uploadsAreOrdinaryVersionsThatPullAndSyncAsAnyOther() async throws {
        try await LiveServer.run { server in
            let big = Files.random(count: 2_500_000, seed: 11)
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                let page = try await browser.get("/web/c/default?folder=Documents%2F")
                let csrf = try #require(Browser.csrf(page))
                // Without the token, or from another site, nothing is stored.
                let refused = try await browser.upload(
                    "/web/c/default/upload", fields: [("csrf", "bad"), ("folder", "Documents/")],
                    files: [("nope.bin", [1, 2, 3])])
                #expect(refused.status == 403)
                let tokenLast = try await browser.upload(
                    "/web/c/default/upload", fields: [("folder", "Documents/"), ("csrf", csrf)],
                    files: [("nope.bin", [1, 2, 3])])
                #expect(tokenLast.status == 403)
                let uploaded = try await browser.upload(
                    "/web/c/default/upload", fields: [("csrf", csrf), ("folder", "Documents/In/")],
                    files: [("big.bin", big), ("small é.txt", Array("hello".utf8))])
                #expect(uploaded.status == 303)
                #expect(
                    try await server.client().list(prefix: "Documents/").documents.map(\.path.value)
                        == ["Documents/In/big.bin", "Documents/In/small é.txt"])
                // The CLI's engine pulls exactly what was uploaded.
                _ = try await server.pull("Documents/In/big.bin", server.root + "/pulled.bin")
                #expect(Files.read(server.root + "/pulled.bin") == big)
                // Cut as a device cuts: the same bytes pushed from a device send no chunk.
                try Files.write(server.root + "/same.bin", big)
                let pushed = try await server.push(server.root + "/same.bin", "Documents/copy.bin")
                #expect(pushed.chunksSent == 0 && pushed.chunks > 5)
                let info = try await server.client().stat("Documents/In/big.bin")
                #expect(info.device == "web" && info.size == Int64(big.count))
                // Uploading again makes a new version; the old one stays.
                _ = try await browser.upload(
                    "/web/c/default/upload", fields: [("csrf", csrf), ("folder", "Documents/In/")],
                    files: [("small é.txt", Array("again".utf8))])
                #expect(
                    try await server.client().versions("Documents/In/small é.txt").map(\.state) == [
                        .current, .superseded
                    ])
                // A name that is not a name is refused, nothing stored.
                let bad = try await browser.upload(
                    "/web/c/default/upload", fields: [("csrf", csrf), ("folder", "../")], files: [("x", [1])])
                #expect(bad.status == 400)
            }
        }
    }

    @Test func foldersRenamesDeletionsRestoresAndConflictChoicesKeepEveryVersion() async throws {
        try await LiveServer.run { server in
            let a = server.client(device: "a")
            let b = server.client(server.otherDevice("b"), device: "b")
            let file = server.root + "/n.txt"
            try Files.write(file, Array("one".utf8))
            try Files.setMtime(file, 1_000)
            _ = try await a.push(file, as: "Documents/n.txt")
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                let csrf = try #require(Browser.csrf(try await browser.get("/web/")))
                // A new folder is a directory document, shown even while empty.
                #expect(
                    try await browser.post(
                        "/web/c/default/mkdir", form: ["csrf": csrf, "folder": "Documents/", "name": "Empty"]
                    ).status == 303)
                #expect(try await a.stat("Documents/Empty").kind == .directory)
                #expect(
                    try await browser.post(
                        "/web/c/default/mkdir", form: ["csrf": csrf, "folder": "Documents/", "name": "n.txt"]
                    ).status == 409)
                #expect(
                    try await browser.post(
                        "/web/c/default/mkdir", form: ["csrf": csrf, "folder": "Documents/", "name": "a/b"]
                    ).status == 400)
                // Rename from the version the page showed; a stale page changes nothing.
                #expect(
                    try await browser.post(
                        "/web/c/default/rename",
                        form: ["csrf": csrf, "path": "Documents/n.txt", "base": "9", "name": "m.txt"]
                    ).status >= 400)
                #expect(
                    try await browser.post(
                        "/web/c/default/rename",
                        form: ["csrf": csrf, "path": "Documents/n.txt", "base": "1", "name": "m.txt"]
                    ).status == 303)
                #expect(try await a.stat("Documents/m.txt").state == .current)
                #expect(try await a.stat("Documents/n.txt").state == .deleted)
                // Delete, then restore from Recently Deleted.
                let m = try await a.stat("Documents/m.txt")
                #expect(
                    try await browser.post(
                        "/web/c/default/delete",
                        form: ["csrf": csrf, "path": "Documents/m.txt", "base": String(m.version)]
                    ).status == 303)
                let deleted = try await browser.get("/web/c/default/deleted")
                #expect(deleted.text.contains("Documents/m.txt") && deleted.text.contains("Restore"))
                let gone = try await a.stat("Documents/m.txt")
                #expect(
                    try await browser.post(
                        "/web/c/default/restore",
                        form: [
                            "csrf": csrf, "path": "Documents/m.txt",
                            "version": String(try #require(gone.baseVersion)), "base": String(gone.version)
                        ]
                    ).status == 303)
                _ = try await a.pull("Documents/m.txt", into: server.root + "/m.txt")
                #expect(Files.read(server.root + "/m.txt") == Array("one".utf8))
                // A conflict, settled by choosing the losing version; the winner stays in history.
                let base = try await a.stat("Documents/m.txt")
                let mine = server.root + "/a-m.txt"
                _ = try await a.pull("Documents/m.txt", into: mine)
                _ = try await b.pull("Documents/m.txt", into: server.root + "/b.txt")
                try Files.write(mine, Array("two".utf8))
                try Files.setMtime(mine, 2_000)
                _ = try await a.push(mine, as: "Documents/m.txt")
                try Files.write(server.root + "/b.txt", Array("three".utf8))
                try Files.setMtime(server.root + "/b.txt", 3_000)
                let winner = try await b.push(server.root + "/b.txt", as: "Documents/m.txt")
                let loser = try #require(winner.conflicts.first)
                let history = try await a.versions("Documents/m.txt").map {
                    "\($0.version) \($0.state) \($0.device ?? "")"
                }
                #expect(loser > base.version, "\(history)")
                let item = try await browser.get("/web/c/default/item?path=Documents%2Fm.txt")
                #expect(item.text.contains("conflict-note") && item.text.contains("Keep this version"))
                // Renaming now would leave the conflict version behind: refused.
                #expect(
                    try await browser.post(
                        "/web/c/default/rename",
                        form: ["csrf": csrf, "path": "Documents/m.txt", "base": String(winner.version), "name": "z.txt"]
                    ).status == 409)
                // A choice made on a page older than the current version is refused.
                #expect(
                    try await browser.post(
                        "/web/c/default/resolve",
                        form: [
                            "csrf": csrf, "path": "Documents/m.txt", "keep": String(loser),
                            "base": String(winner.version - 1)
                        ]
                    ).status == 409)
                #expect(
                    try await browser.post(
                        "/web/c/default/resolve",
                        form: [
                            "csrf": csrf, "path": "Documents/m.txt", "keep": String(loser),
                            "base": String(winner.version)
                        ]
                    ).status == 303)
                let settled = try await a.stat("Documents/m.txt")
                #expect(settled.conflicts == nil && settled.version == loser)
                #expect(
                    try await a.versions("Documents/m.txt").contains {
                        $0.version == winner.version && $0.state == .superseded
                    })
                // Every one of these needs the session's token.
                #expect(
                    try await browser.post(
                        "/web/c/default/delete", form: ["csrf": "x", "path": "Documents/m.txt", "base": String(loser)]
                    ).status == 403)
                #expect(try await a.stat("Documents/m.txt").state == .current)
            }
        }
    }

    @Test func shareLinksGrantOneDocumentToAnyoneWithTheLinkUntilRevoked() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source"
            let first = Files.random(count: 300_000, seed: 21)
            try Files.write(source + "/report.pdf", first)
            try Files.write(source + "/other.txt", Array("not shared".utf8))
            _ = try await server.push(source + "/report.pdf", "Documents/report.pdf")
            _ = try await server.push(source + "/other.txt", "Documents/other.txt")
            try await Self.browse(server) { owner in
                try await owner.signIn(server.token)
                let item = try await owner.get("/web/c/default/item?path=Documents%2Freport.pdf")
                let csrf = try #require(Browser.csrf(item))
                #expect(item.text.contains("share-form"))
                func link(_ form: [String: String]) async throws -> String {
                    var fields = ["csrf": csrf, "path": "Documents/report.pdf", "base": "1", "days": "7"]
                    fields.merge(form) { $1 }
                    let made = try await owner.post("/web/c/default/share", form: fields)
                    #expect(made.status == 200)
                    let range = try #require(made.text.range(of: "id=\"share-url\" value=\""))
                    return String(made.text[range.upperBound...].prefix { $0 != "\"" })
                }
                let open = try await link([:])
                let pinned = try await link(["pin": "1"])
                let locked = try await link(["password": "correct horse", "days": "0"])
                #expect(open.hasPrefix(owner.base + "/s/") && open != pinned)
                // The list shows three, never their secrets.
                let list = try await owner.get("/web/shares")
                #expect(list.text.components(separatedBy: "class=\"small danger revoke\"").count == 4)
                for url in [open, pinned, locked] { #expect(!list.text.contains(String(url.suffix(64)))) }
                // A new version: the open link shows it, the pinned one the first.
                let second = Files.random(count: 200_000, seed: 22)
                try Files.write(source + "/report.pdf", second)
                _ = try await server.push(source + "/report.pdf", "Documents/report.pdf")
                try await Self.browse(server) { stranger in
                    let path = { (url: String) in String(url.dropFirst(owner.base.count)) }
                    let page = try await stranger.get(path(open))
                    #expect(page.status == 200 && page.text.contains("report.pdf") && !page.text.contains("other.txt"))
                    #expect(!page.text.contains("tester"))
                    #expect(try await stranger.get(path(open) + "/download").body == second)
                    #expect(try await stranger.get(path(pinned) + "/download").body == first)
                    let part = try await stranger.get(path(open) + "/download", headers: [("Range", "bytes=0-99")])
                    #expect(part.status == 206 && part.body == Array(second.prefix(100)))
                    // Nothing else of the account through it.
                    #expect(try await stranger.get(path(open) + "/download?path=Documents%2Fother.txt").body == second)
                    #expect(try await stranger.get("/web/c/default?folder=Documents%2F").status == 303)
                    // The password: asked, a wrong one refused, the right one remembered.
                    let ask = try await stranger.get(path(locked))
                    #expect(ask.status == 200 && ask.text.contains("protected by a password"))
                    #expect(try await stranger.get(path(locked) + "/download").status == 303)
                    #expect(try await stranger.post(path(locked), form: ["password": "wrong"]).status == 401)
                    #expect(try await stranger.post(path(locked), form: ["password": "correct horse"]).status == 303)
                    #expect(try await stranger.get(path(locked) + "/download").body == second)
                    // A made-up link, or a revoked one, shows nothing.
                    #expect(try await stranger.get("/s/" + String(repeating: "a", count: 64)).status == 404)
                    #expect(try await stranger.get("/s/short").status == 404)
                    let id = try #require(
                        list.text.range(of: "name=\"id\" value=\"").map {
                            String(list.text[$0.upperBound...].prefix { $0 != "\"" })
                        })
                    #expect(try await owner.post("/web/shares/revoke", form: ["csrf": csrf, "id": id]).status == 303)
                    // The list is newest first: the password link is gone, the others stay.
                    #expect(try await stranger.get(path(locked)).status == 404)
                    #expect(try await stranger.get(path(open)).status == 200)
                    #expect(try await stranger.get(path(pinned)).status == 200)
                    // Once the document is deleted, no link shows any version of it.
                    _ = try await server.client().delete("Documents/report.pdf")
                    #expect(try await stranger.get(path(open)).status == 404)
                    #expect(try await stranger.get(path(pinned) + "/download").status == 404)
                    // A new document at the same path is another one: the old links stay dead.
                    _ = try await server.push(source + "/other.txt", "Documents/report.pdf")
                    #expect(try await stranger.get(path(open)).status == 404)
                    #expect(try await stranger.get(path(pinned) + "/download").status == 404)
                }
            }
        }
    }

    @Test func aShareLinksPasswordCannotBeGuessedQuickly() async throws {
        try await LiveServer.run { server in
            try Files.write(server.root + "/f", Array("x".utf8))
            _ = try await server.push(server.root + "/f", "Documents/f")
            try await Self.browse(server) { owner in
                try await owner.signIn(server.token)
                let csrf = try #require(Browser.csrf(try await owner.get("/web/")))
                let made = try await owner.post(
                    "/web/c/default/share",
                    form: ["csrf": csrf, "path": "Documents/f", "base": "1", "days": "1", "password": "p"])
                let range = try #require(made.text.range(of: "/s/"))
                let secret = String(made.text[range.upperBound...].prefix(64))
                // Twenty guesses at once: at most ten are checked (the others are refused, 429,
                // or 503 while two checks already run).
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<20 {
                        group.addTask { try await owner.post("/s/" + secret, form: ["password": "guess"]).status }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
                // Each attempt counts from its start: ten are let through (checked, 401, or turned
                // away while two checks run, 503), the other ten refused unchecked.
                #expect(statuses.allSatisfy { [401, 429, 503].contains($0) })
                #expect(statuses.filter { $0 == 429 }.count == 20 - ShareAttempts.limit)
                // Past the limit, even the right password waits for the minute to pass.
                #expect(try await owner.post("/s/" + secret, form: ["password": "p"]).status == 429)
            }
        }
    }

    // The limit guards against a hang (the stream would wait forever): with every test of a pass
    // running at once on two loaded cores, this one ran past 2 minutes in CI (2026-11-27).
    @Test(.timeLimit(.minutes(10))) func theEventStreamAnnouncesAPushFromAnotherDevice() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source"
            try Files.write(source + "/new.txt", Array("new".utf8))
            try await Self.browse(server) { browser in
                try await browser.signIn(server.token)
                var request = HTTPClientRequest(url: browser.base + "/web/c/default/events")
                request.headers.add(
                    name: "Cookie", value: browser.cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; "))
                let response = try await browser.client.execute(request, timeout: .seconds(180))
                #expect(response.status == .ok && response.headers["Content-Type"].first == "text/event-stream")
                var iterator = response.body.makeAsyncIterator()
                let first = try #require(try await iterator.next())
                #expect(String(buffer: first).contains("retry:"))
                _ = try await server.push(source + "/new.txt", "Documents/new.txt", from: server.otherDevice("phone"))
                var seen = ""
                while !seen.contains("event: change"), let buffer = try await iterator.next() {
                    seen += String(buffer: buffer)
                }
                #expect(seen.contains("event: change"))
            }
        }
    }
}
