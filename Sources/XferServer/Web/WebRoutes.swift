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
    /// Where share links' passwords are hashed: the server's one gate, shared with /v1.
    var passwords = PasswordGate()

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
    func refuseEncrypted(_ target: ContainerTarget, _ session: WebContext) async throws -> Response? {
        guard try await metadata.containerKey(account: target.accountID, container: target.container) != nil else {
            return nil
        }
        return html("encrypted", ["container": target.named.value], title: target.named.value, session: session)
    }

    /// The container the page's path names, resolved for the session's account by the one rule
    /// (``ContainerTarget``): its own, or one shared with it that allows `access`.
    func target(_ context: XferRequestContext, _ session: WebContext, _ access: Principal.Access) async throws
        -> ContainerTarget
    {
        try await ContainerTarget.resolve(
            session.principal, named: try ContainerName(context.parameters.get("container") ?? ""), for: access,
            store: metadata)
    }

    func commonValues(_ container: ContainerName) -> [String: Any] {
        [
            "container": container.value, "containerHref": Self.containerHref(container),
            "searchAction": Self.href(container, "search"), "deletedHref": Self.href(container, "deleted"),
            "uploadAction": Self.href(container, "upload"), "mkdirAction": Self.href(container, "mkdir"),
            "renameAction": Self.href(container, "rename"), "deleteAction": Self.href(container, "delete"),
            "restoreAction": Self.href(container, "restore"), "resolveAction": Self.href(container, "resolve"),
            "shareAction": Self.href(container, "share"), "kvHref": Self.href(container, "kv")
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

    static func containerHref(_ container: ContainerName, folder: String? = nil, page: String? = nil) -> String {
        "/web/c/\(container.pathSegment)"
            + WebSecurity.query([("folder", folder.flatMap { $0.isEmpty ? nil : $0 }), ("page", page)])
    }

    /// The address of one of the container's pages or actions.
    static func href(_ container: ContainerName, _ page: String) -> String {
        "/web/c/\(container.pathSegment)/\(page)"
    }

    static func rawHref(_ container: ContainerName, _ path: DocumentPath, version: Int64?) -> String {
        href(container, "raw")
            + WebSecurity.query([("path", path.value), ("version", version.map(String.init))])
    }

    /// The folders from the container down to `prefix`, each a link.
    /// A folder page's own folder is its heading, not a link (`includingLast: false`); a
    /// document's page links every folder above it. The container comes first unless the page
    /// is the container's top.
    static func crumbs(_ container: ContainerName, _ prefix: String, includingLast: Bool = false) -> [[String: Any]] {
        var crumbs: [[String: Any]] = [["name": container.value, "href": containerHref(container)]]
        var walked = ""
        let parts = prefix.split(separator: "/")
        for part in includingLast ? parts[...] : parts.dropLast() {
            walked += part + "/"
            crumbs.append(["name": String(part), "href": containerHref(container, folder: walked)])
        }
        return prefix.isEmpty && !includingLast ? [] : crumbs
    }

    static func row(_ info: DocumentInfo?, name: String, container: ContainerName) -> [String: Any] {
        guard let info else { return ["name": name, "kind": "folder", "size": "", "device": ""] }
        var row: [String: Any] = [
            "name": name, "path": info.path.value, "kind": info.kind.rawValue,
            "size": info.kind == .directory ? "" : ByteCount(info.size).description,
            "modified": date(info.mtimeNs), "modifiedISO": iso(info.mtimeNs), "device": info.device ?? "",
            "href": Self.href(container, "item") + WebSecurity.query([("path", info.path.value)])
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
