import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import XferCore
import XferProtocol

/// The web view `xfer serve` offers at `/web/` (docs/WEB.md): sign in with an account token,
/// browse a container's folders, search it, open a document and its versions, download a file
/// (with `Range`) or a package (as tar), see what was deleted, and watch the page follow what
/// other devices push. Pages are rendered on the server (``WebTemplates``); the one script
/// only refreshes a page when the change feed moves.
struct WebRoutes: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    let limits: ServerLimits
    let changes: ChangeNotifier
    let quota: QuotaGate
    /// The limits of the token each session was opened with: its requests here count as that
    /// token's own (the same key as its /v1 and WebDAV requests).
    let limiter: TokenLimiter
    let shareAttempts = ShareAttempts()
    let passwords = PasswordGate()

    /// Rows of a folder, search or Recently Deleted page.
    static let pageSize = 200
    /// Entries of a package listed on its page.
    static let packageEntries = 1000

    var bytes: DocumentBytes { DocumentBytes(chunks: chunks, maximumLength: limits.frames.maximumChunkLength) }

    func register(on router: Router<XferRequestContext>) {
        router.get("/") { _, _ in Response(status: .seeOther, headers: [.location: "/web/"]) }
        let web = router.group("web").add(middleware: WebSessionMiddleware(metadata: metadata))
        web.get("static/app.css") { _, _ in Self.asset(WebTemplates.css, type: "text/css; charset=utf-8") }
        web.get("static/app.js") { _, _ in Self.asset(WebTemplates.script, type: "text/javascript; charset=utf-8") }
        web.get("static/icon.svg") { _, _ in Self.asset(WebTemplates.icon, type: "image/svg+xml") }
        router.get("favicon.ico") { _, _ in Self.asset(WebTemplates.icon, type: "image/svg+xml") }
        web.get("signin", use: page(signinPage))
        web.post("signin", use: page(signin))
        web.post("signout", use: page(signout))
        web.get("", use: page(home))
        web.get("c/:container", use: page(folder))
        web.get("c/:container/search", use: page(search))
        web.get("c/:container/deleted", use: page(deleted))
        web.get("c/:container/item", use: page(item))
        web.get("c/:container/raw", use: page(raw))
        web.get("c/:container/events", use: page(events))
        web.get("c/:container/kv", use: page(keyValues))
        registerActions(on: web)
        registerShares(on: router, web: web)
    }

    // MARK: Sessions

    @Sendable func signinPage(_ request: Request, context: XferRequestContext) async throws -> Response {
        if context.principal != nil { return Self.redirect("/web/") }
        return signinForm(error: nil, status: .ok)
    }

    func signinForm(error: String?, status: HTTPResponse.Status) -> Response {
        let token = WebSecurity.secret()
        var values: [String: Any] = ["csrf": token]
        if let error { values["error"] = error }
        var response = html("signin", values, title: "Sign in", session: nil, status: status)
        response.setCookie(
            WebSecurity.cookie(WebSecurity.signinCookie, token, maxAge: 3600, secure: limits.secureCookies))
        return response
    }

    @Sendable func signin(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        let form = try await WebSecurity.form(request)
        guard let expected = request.cookies[WebSecurity.signinCookie]?.value, WebSecurity.isSecret(expected),
            let sent = form["csrf"], WebSecurity.same(sent, expected)
        else {
            return signinForm(error: "The sign-in form had expired; sign in again.", status: .forbidden)
        }
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let secret = WebSecurity.secret()
        let lifetime = Int64(limits.webSessionLifetime.components.seconds)
        guard !token.isEmpty, token.utf8.count <= 256,
            let session = try await metadata.openWebSession(
                tokenHash: TokenHash.hash(token), sessionHash: WebSecurity.hash(secret),
                lifetime: lifetime * 1_000_000_000)
        else {
            return signinForm(
                error:
                    "That is not a valid account token of this server with full access (the admin token, a read-only or one-container token, and an expired one cannot sign in here).",
                status: .unauthorized)
        }
        _ = session
        var response = Self.redirect("/web/")
        response.setCookie(
            WebSecurity.cookie(WebSecurity.sessionCookie, secret, maxAge: Int(lifetime), secure: limits.secureCookies))
        response.setCookie(WebSecurity.cookie(WebSecurity.signinCookie, "", maxAge: 0, secure: limits.secureCookies))
        return response
    }

    @Sendable func signout(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        _ = try await checkForm(request, session)
        try await metadata.closeWebSession(hash: WebSecurity.hash(session.secret))
        var response = Self.redirect("/web/signin")
        response.setCookie(WebSecurity.cookie(WebSecurity.sessionCookie, "", maxAge: 0, secure: limits.secureCookies))
        return response
    }

    /// A form from a signed-in page: from this site, with the session's CSRF token.
    /// - Returns: The form's fields.
    func checkForm(_ request: Request, _ session: WebContext) async throws -> [String: String] {
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        let form = try await WebSecurity.form(request)
        guard let sent = form["csrf"], WebSecurity.same(sent, WebSecurity.csrf(session.secret)) else {
            throw XferError(.forbidden, "the form's token does not match this session; reload the page and try again")
        }
        return form
    }

    // MARK: Pages

    @Sendable func home(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let account = try await metadata.account(session.principal.accountID)
        let containers = try await metadata.containers(account: session.principal.accountID)
        let values: [String: Any] = [
            "used": ByteCount(account.charged).description, "quota": ByteCount(account.quota).description,
            "usedBytes": account.charged, "quotaBytes": max(1, account.quota), "highBytes": account.quota / 10 * 9,
            "containers": containers.map { summary -> [String: Any] in
                ["name": summary.name, "encrypted": summary.encrypted, "href": Self.containerHref(summary.name)]
            }
        ]
        return html("containers", values, title: "Containers", session: session)
    }

    @Sendable func folder(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        let fields = WebSecurity.queryFields(request)
        let prefix = (fields["folder"] ?? "").precomposedStringWithCanonicalMapping
        guard prefix.isEmpty || prefix.hasSuffix("/"), prefix.utf8.count <= DocumentPathRules.maximumPathBytes,
            !prefix.utf8.contains(0), !prefix.hasPrefix("/")
        else {
            throw XferError(.badRequest, "folder must be empty or a path ending in /")
        }
        var start: FolderPosition? = nil
        if let token = fields["page"] {
            guard let position = FolderPosition(token: token), position.key.utf8.starts(with: prefix.utf8) else {
                throw XferError(.badRequest, "page is not a token this server gave")
            }
            start = position
        }
        let listing = try await metadata.folder(
            account: session.principal.accountID, container: container, prefix: prefix,
            from: start, limit: Self.pageSize)
        let rows = listing.entries.map { entry -> [String: Any] in
            if let below = entry.folder {
                var row = Self.row(entry.document, name: entry.name, container: container)
                row["href"] = Self.containerHref(container.value, folder: below)
                row["kind"] = "folder"
                row["size"] = ""
                return row
            }
            return Self.row(entry.document, name: entry.name, container: container)
        }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        values["crumbs"] = Self.crumbs(container, prefix)
        values["here"] = prefix.isEmpty ? container.value : String(prefix.dropLast().split(separator: "/").last ?? "")
        values["folder"] = prefix
        if let next = listing.next {
            values["moreHref"] = Self.containerHref(container.value, folder: prefix, page: next.token)
        }
        return html(
            "folder", values, title: prefix.isEmpty ? container.value : prefix, session: session,
            events: "/web/c/\(container.value)/events")
    }

    @Sendable func search(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        // A GET form: `+` is a space (as in a form body). Empty fields mean "any".
        let parameters = WebSecurity.queryFields(request)
        let query = try DocumentQuery(parameter: { key in parameters[key].flatMap { $0.isEmpty ? nil : $0 } })
        let list = try await metadata.query(
            account: session.principal.accountID, container: container, query,
            after: parameters["page"], limit: Self.pageSize)
        let rows = list.documents.map { Self.row($0, name: $0.path.value, container: container) }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        values["name"] = query.name ?? ""
        values["isFile"] = query.kinds == [.file]
        values["isPackage"] = query.kinds == [.package]
        values["summary"] = rows.isEmpty ? "No document matches." : "\(rows.count)\(list.more ? "+" : "") matching"
        if list.more, let next = list.next {
            var pairs = query.parameters.map { ($0.0, Optional($0.1)) }
            pairs.append(("page", next))
            values["moreHref"] = "/web/c/\(container.value)/search" + WebSecurity.query(pairs)
        }
        return html("search", values, title: "Search", session: session, events: "/web/c/\(container.value)/events")
    }

    @Sendable func deleted(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        var query = DocumentQuery()
        query.state = .deleted
        query.sort = .modified
        query.descending = true
        let page = request.uri.queryParameters.get("page").map { String($0) }
        let list = try await metadata.query(
            account: session.principal.accountID, container: container, query, after: page, limit: Self.pageSize)
        let rows = list.documents.map { info -> [String: Any] in
            var row = Self.row(info, name: info.path.value, container: container)
            row["size"] = ""
            row["note"] = "deleted"
            if let previous = info.baseVersion {
                row["restore"] = ["path": info.path.value, "version": String(previous), "base": String(info.version)]
            }
            return row
        }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        if list.more, let next = list.next {
            values["moreHref"] = "/web/c/\(container.value)/deleted" + WebSecurity.query([("page", next)])
        }
        return html(
            "deleted", values, title: "Recently Deleted", session: session, events: "/web/c/\(container.value)/events")
    }

    @Sendable func item(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        let path = try Routes.path(request)
        let account = session.principal.accountID
        let versions = try await metadata.versions(account: account, container: container, path: path).versions
        guard let newest = versions.first(where: { $0.state == .current || $0.state == .deleted }) ?? versions.first
        else {
            throw XferError(.notFound, "no document \(path) in container \(container)")
        }
        let name = String(path.value.split(separator: "/").last ?? "")
        var values = commonValues(container)
        values["name"] = name
        values["crumbs"] = Self.crumbs(container, Self.parent(path), includingLast: true)
        values["here"] = name
        values["kind"] = newest.kind.rawValue
        values["size"] = newest.state == .deleted ? "—" : ByteCount(newest.size).description
        values["modified"] = Self.date(newest.mtimeNs)
        values["version"] = String(newest.version)
        if let device = newest.device { values["device"] = device }
        if newest.state == .deleted { values["deleted"] = true }
        if let conflicts = newest.conflicts, !conflicts.isEmpty {
            values["conflicts"] = conflicts.map(String.init).joined(separator: ", ")
        }
        values["path"] = path.value
        values["base"] = String(newest.version)
        if newest.state == .current { values["actions"] = true }
        values["versions"] = versions.map { version -> [String: Any] in
            var row: [String: Any] = [
                "version": String(version.version), "state": version.state.rawValue,
                "size": version.state == .deleted ? "" : ByteCount(version.size).description,
                "modified": Self.date(version.mtimeNs), "device": version.device ?? ""
            ]
            if (version.state == .current || version.state == .superseded || version.state == .conflict)
                && version.kind != .directory
            {
                row["href"] = Self.rawHref(container, path, version: version.version)
            }
            if version.state == .superseded && version.kind != .directory {
                row["restore"] = [
                    "path": path.value, "version": String(version.version), "base": String(newest.version)
                ]
            }
            if let conflicts = newest.conflicts, !conflicts.isEmpty,
                version.state == .current || version.state == .conflict
            {
                row["keep"] = ["path": path.value, "version": String(version.version), "base": String(newest.version)]
            }
            return row
        }
        if newest.state == .current && newest.kind != .directory {
            let stored = try await metadata.manifest(
                account: account, container: container, path: path, version: newest.version)
            let manifest = try Manifest(decoding: stored.manifest)
            if manifest.kind == .file, manifest.entries.count == 1, manifest.entries.kind(at: 0) == .symlink {
                values["symlink"] = manifest.entries.symlinkTarget(at: 0) ?? ""
            } else {
                values["downloadHref"] = Self.rawHref(container, path, version: nil)
                values["downloadLabel"] = manifest.kind == .package ? "Download as .tar" : "Download"
            }
            if manifest.kind == .package {
                let entries = manifest.entries
                let shown = min(entries.count, Self.packageEntries)
                values["files"] = String(manifest.fileCount)
                values["entries"] = (0..<shown).map { index -> [String: Any] in
                    let kind = entries.kind(at: index)
                    return [
                        "path": entries.path(at: index) + (kind == .directory ? "/" : ""),
                        "size": kind == .file ? ByteCount(entries.size(at: index)).description : ""
                    ]
                }
                values["hasEntries"] = shown > 0
                if entries.count > shown { values["entriesLeft"] = String(entries.count - shown) }
            }
        }
        return html("item", values, title: name, session: session, events: "/web/c/\(container.value)/events")
    }

    /// The container's key-value store, read only (apps write it; `xfer kv` too).
    @Sendable func keyValues(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        let list = try await metadata.values(account: session.principal.accountID, container: container)
        let rows = list.entries.filter { $0.value != nil }.map { entry -> [String: Any] in
            [
                "key": entry.key, "value": entry.value?.description ?? "", "modified": Self.date(entry.timestampNs),
                "device": entry.device
            ]
        }
        var values = commonValues(container)
        values["entries"] = rows
        values["hasEntries"] = !rows.isEmpty
        values["used"] = ByteCount(Int64(list.bytes)).description
        values["limit"] = ByteCount(Int64(list.maximumBytes)).description
        values["keys"] = String(rows.count)
        values["maximumKeys"] = String(list.maximumKeys)
        return html(
            "kv", values, title: "Key-value store", session: session, events: "/web/c/\(container.value)/events")
    }

    /// A file's bytes (one `Range` honoured) or a package as a tar stream, always as a download.
    @Sendable func raw(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        if try await metadata.containerKey(account: session.principal.accountID, container: container) != nil {
            throw XferError(
                .encryptedContainer, "container \(container) is end-to-end encrypted: the server cannot read it")
        }
        let path = try Routes.path(request)
        let stored = try await metadata.manifest(
            account: session.principal.accountID, container: container, path: path,
            version: try Routes.optionalInt(request, "version"))
        guard stored.info.state != .deleted, stored.info.state != .uploading else {
            throw XferError(
                .notFound, "version \(stored.info.version) of \(path) holds no content (\(stored.info.state.rawValue))")
        }
        let manifest = try Manifest(decoding: stored.manifest)
        return try serve(
            manifest, info: stored.info, name: String(path.value.split(separator: "/").last ?? "download"),
            request: request)
    }

    /// A version's bytes as a download: a file (one `Range` honoured, `If-Range` against its
    /// manifest digest) or a package as a tar stream. Shared by the pages and share links.
    func serve(_ manifest: Manifest, info: DocumentInfo, name: String, request: Request) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/octet-stream"]
        headers[.cacheControl] = "private, no-store"
        let etag = DocumentBytes.etag(info)
        headers[.eTag] = etag
        let bytes = bytes
        let path = info.path
        switch manifest.kind {
        case .package:
            headers[.contentDisposition] = WebSecurity.attachment(name + ".tar")
            headers[.contentType] = "application/x-tar"
            let root = name
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    try await bytes.writeTar(manifest, root: root, to: &writer)
                    try await writer.finish(nil)
                })
        case .directory:
            throw XferError(.badRequest, "\(path) is a folder; open it to see what it holds")
        case .file:
            guard manifest.entries.count == 1, manifest.entries.kind(at: 0) == .file else {
                throw XferError(.badRequest, "\(path) is a symbolic link; it has no bytes to download")
            }
            headers[.contentDisposition] = WebSecurity.attachment(name)
            return bytes.fileResponse(
                manifest.entries.chunks(at: 0), size: manifest.entries.size(at: 0), etag: etag,
                request: request, headers: headers)
        }
    }

    /// Server-sent events: `change` each time the container's change feed moves, a comment
    /// every 20 s to keep proxies from closing the stream. Each open stream counts against
    /// the account's long polls (``ServerLimits/maximumWaitingPollsPerAccount``); a stream
    /// ends after an hour (the browser reconnects), when the server stops, or as soon as the
    /// browser closes the connection (``ClientPresence``), its slot given back then.
    @Sendable func events(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        let account = session.principal.accountID
        if let refusal = try await refuseEncrypted(container, session) { return refusal }
        let cap = limits.maximumWaitingPollsPerAccount
        let (metadata, changes) = (metadata, changes)
        let presence = await context.presence()
        let start = try await metadata.changes(account: account, container: container, after: Int64.max - 1, limit: 1)
            .head
        var headers: HTTPFields = [.contentType: "text/event-stream"]
        headers[.cacheControl] = "no-store"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                // The slot is taken where it is given back: a stream whose head never went out
                // (the browser left first) holds none.
                guard changes.polls.enter(account, limit: cap) else {
                    try await writer.write(
                        ByteBuffer(
                            string:
                                "retry: 30000\n: this account has \(cap) change-feed requests waiting, the server's limit\n\n"
                        ))
                    try await writer.finish(nil)
                    return
                }
                defer { changes.polls.leave(account) }
                let end = ContinuousClock.now + .seconds(3600)
                var cursor = start
                try await writer.write(ByteBuffer(string: "retry: 3000\n: xfer\n\n"))
                var stopping = false
                while !stopping && ContinuousClock.now < end {
                    let seen = cursor
                    let present = await ClientPresence.run(until: presence) {
                        await withGracefulShutdownHandler {
                            await changes.wait(account: account, container: container, seconds: 20) {
                                guard
                                    let head = try? await metadata.changes(
                                        account: account, container: container, after: Int64.max - 1, limit: 1
                                    ).head
                                else {
                                    return false
                                }
                                return head != seen
                            }
                        } onGracefulShutdown: {
                            changes.drain()
                        }
                    }
                    // The browser left: the slot goes back now, not at a write that fails later.
                    guard present else { break }
                    if changes.isDraining { stopping = true }
                    let head =
                        (try? await metadata.changes(
                            account: account, container: container, after: Int64.max - 1, limit: 1
                        ).head) ?? seen
                    if head != seen {
                        cursor = head
                        try await writer.write(ByteBuffer(string: "event: change\ndata: \(head)\n\n"))
                    } else {
                        try await writer.write(ByteBuffer(string: ": waiting\n\n"))
                    }
                }
                try await writer.finish(nil)
            })
    }

    // MARK: Helpers

    /// Runs a page handler; an error becomes a page that says what went wrong (a request that
    /// needs a session and has none goes to the sign-in page; a refusal that says when to ask
    /// again carries `Retry-After`). A signed-in request is first taken from the rate of the
    /// token its session was opened with (``TokenLimiter``), as that token's /v1 requests are.
    func page(_ handler: @escaping @Sendable (Request, XferRequestContext) async throws -> Response)
        -> @Sendable (Request, XferRequestContext) async throws -> Response
    {
        { request, context in
            var response: Response
            do {
                // A signed-in request is its token's, counted as the token's /v1 requests are.
                if let session = context.web { try limiter.admit(session.tokenKey) }
                response = try await handler(request, context)
            } catch let error as WebSignInNeeded {
                _ = error
                response = Self.redirect("/web/signin")
            } catch {
                let body = ErrorMiddleware.body(for: error).error
                let status = ErrorMiddleware.status(for: error)
                response = html(
                    "error", ["heading": status.reasonPhrase, "message": body.message],
                    title: status.reasonPhrase, session: context.web, status: status)
                if let retry = (error as? XferError)?.cause as? RetryAfter {
                    response.headers[.retryAfter] = String(retry.seconds)
                }
            }
            WebSecurity.harden(&response.headers)
            return response
        }
    }

    func requireSession(_ context: XferRequestContext) throws -> WebContext {
        guard let session = context.web else { throw WebSignInNeeded() }
        return session
    }

    /// The page shown in place of an end-to-end encrypted container's contents.
    func refuseEncrypted(_ container: ContainerName, _ session: WebContext) async throws -> Response? {
        guard try await metadata.containerKey(account: session.principal.accountID, container: container) != nil else {
            return nil
        }
        return html("encrypted", ["container": container.value], title: container.value, session: session)
    }

    func commonValues(_ container: ContainerName) -> [String: Any] {
        [
            "container": container.value, "containerHref": Self.containerHref(container.value),
            "searchAction": "/web/c/\(container.value)/search", "deletedHref": "/web/c/\(container.value)/deleted",
            "uploadAction": "/web/c/\(container.value)/upload", "mkdirAction": "/web/c/\(container.value)/mkdir",
            "renameAction": "/web/c/\(container.value)/rename", "deleteAction": "/web/c/\(container.value)/delete",
            "restoreAction": "/web/c/\(container.value)/restore", "resolveAction": "/web/c/\(container.value)/resolve",
            "shareAction": "/web/c/\(container.value)/share", "kvHref": "/web/c/\(container.value)/kv"
        ]
    }

    func html(
        _ template: String, _ values: [String: Any], title: String, session: WebContext?, events: String? = nil,
        status: HTTPResponse.Status = .ok
    ) -> Response {
        var layout: [String: Any] = ["title": title, "version": XferVersion.current]
        if let session {
            layout["signedIn"] = true
            layout["account"] = session.principal.name
            layout["csrf"] = WebSecurity.csrf(session.secret)
            if let events { layout["events"] = events }
        }
        var values = values
        if let session { values["csrf"] = WebSecurity.csrf(session.secret) }
        let page = WebTemplates.render(template, values, layout: layout)
        return Response(
            status: status, headers: [.contentType: "text/html; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
    }

    static func asset(_ text: String, type: String) -> Response {
        var headers: HTTPFields = [.contentType: type]
        headers[.cacheControl] = "public, max-age=3600"
        var response = Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
        WebSecurity.harden(&response.headers)
        return response
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location])
    }

    static func containerHref(_ container: String, folder: String? = nil, page: String? = nil) -> String {
        "/web/c/\(container)"
            + WebSecurity.query([("folder", folder.flatMap { $0.isEmpty ? nil : $0 }), ("page", page)])
    }

    static func rawHref(_ container: ContainerName, _ path: DocumentPath, version: Int64?) -> String {
        "/web/c/\(container.value)/raw"
            + WebSecurity.query([("path", path.value), ("version", version.map(String.init))])
    }

    /// The folders from the container down to `prefix`, each a link.
    /// A folder page's own folder is its heading, not a link (`includingLast: false`); a
    /// document's page links every folder above it. The container comes first unless the page
    /// is the container's top.
    static func crumbs(_ container: ContainerName, _ prefix: String, includingLast: Bool = false) -> [[String: Any]] {
        var crumbs: [[String: Any]] = [["name": container.value, "href": containerHref(container.value)]]
        var walked = ""
        let parts = prefix.split(separator: "/")
        for part in includingLast ? parts[...] : parts.dropLast() {
            walked += part + "/"
            crumbs.append(["name": String(part), "href": containerHref(container.value, folder: walked)])
        }
        return prefix.isEmpty && !includingLast ? [] : crumbs
    }

    static func row(_ info: DocumentInfo?, name: String, container: ContainerName) -> [String: Any] {
        guard let info else { return ["name": name, "kind": "folder", "size": "", "device": ""] }
        var row: [String: Any] = [
            "name": name, "path": info.path.value, "kind": info.kind.rawValue,
            "size": info.kind == .directory ? "" : ByteCount(info.size).description,
            "modified": date(info.mtimeNs), "modifiedISO": iso(info.mtimeNs), "device": info.device ?? "",
            "href": "/web/c/\(container.value)/item" + WebSecurity.query([("path", info.path.value)])
        ]
        if info.state == .uploading { row["note"] = "uploading" }
        if let conflicts = info.conflicts, !conflicts.isEmpty { row["note"] = "conflict" }
        return row
    }

    static func date(_ nanoseconds: Int64) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(nanoseconds / 1_000_000_000))
        return date.formatted(
            .iso8601.year().month().day().dateSeparator(.dash).time(includingFractionalSeconds: false)
                .timeSeparator(.colon).timeZone(separator: .omitted)
        ).replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC")
    }

    static func iso(_ nanoseconds: Int64) -> String {
        Date(timeIntervalSince1970: TimeInterval(nanoseconds / 1_000_000_000)).formatted(.iso8601)
    }
}

/// Thrown where a page needs a signed-in browser and has none: answered with the sign-in page.
struct WebSignInNeeded: Error {}

/// A signed-in browser's session, as a request sees it.
public struct WebContext: Sendable {
    public var principal: Principal
    /// The cookie's secret (the CSRF token is derived from it).
    var secret: String
    /// The key of the token the session was opened with in the ``TokenLimiter``.
    var tokenKey: [UInt8]
}

/// Reads the session cookie; a valid one sets ``XferRequestContext/web``. A request without
/// one goes on (the sign-in page and the assets need none; other pages send it there).
struct WebSessionMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext
    let metadata: any MetadataStore

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        if let secret = request.cookies[WebSecurity.sessionCookie]?.value, WebSecurity.isSecret(secret),
            let session = try await metadata.webSession(hash: WebSecurity.hash(secret))
        {
            context.web = WebContext(principal: session.principal, secret: secret, tokenKey: session.tokenHash)
        }
        return try await next(request, context)
    }
}
