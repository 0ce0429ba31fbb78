import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// WebDAV (RFC 4918, classes 1 and 2) at `/dav/CONTAINER/`, over the container's `Documents/` scope:
/// what every operating system's file manager, rclone and davfs2 can mount. Authenticated with
/// HTTP Basic, the password an account token (the user name is not checked), or a Bearer token.
///
/// A file document is a file; a folder is a path prefix with documents below it, or a
/// directory document (an empty folder); a package is a folder whose contents are read only
/// (it is written whole, by a device). Every change is a new version through the same rules as
/// a device's (``DocumentWriter``): a PUT is cut, hashed and stored by the server's own
/// pipeline (``UploadedFile``), deduplicated, and committed on the current version; a DELETE is
/// a deletion version (Recently Deleted keeps it); COPY and MOVE commit the same manifests under
/// the new names (no chunk is copied) and MOVE then deletes the old ones; dead properties set
/// with PROPPATCH are kept beside the documents and go with them; locks
/// (``DavRoutes/lock(_:_:)``) bind WebDAV clients. An end-to-end
/// encrypted container is refused: the server cannot read it.
struct DavRoutes: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    let limits: ServerLimits
    let changes: ChangeNotifier
    let quota: QuotaGate
    let limiter: TokenLimiter

    /// The scope WebDAV shows.
    static let scope = "Documents/"
    /// Documents one COPY, MOVE or DELETE of a folder may touch; past it, nothing is changed.
    static let maximumTreeDocuments = 20_000
    static let methods = [
        "OPTIONS", "PROPFIND", "PROPPATCH", "GET", "HEAD", "PUT", "MKCOL", "DELETE", "COPY", "MOVE", "LOCK", "UNLOCK"
    ]

    var writer: DocumentWriter { DocumentWriter(metadata: metadata, changes: changes) }
    var bytes: DocumentBytes { DocumentBytes(chunks: chunks, maximumLength: limits.frames.maximumChunkLength) }

    func register(on router: Router<XferRequestContext>) {
        let dav = router.group("dav")
        for name in Self.methods {
            guard let method = HTTPRequest.Method(name) else { continue }
            dav.on("**", method: method) { request, context in await answer(request, context) }
            dav.on("", method: method) { request, context in await answer(request, context) }
        }
    }

    // MARK: Dispatch

    /// Who is asking, and on which container and path.
    struct Target {
        var account: Int64
        var container: ContainerName
        /// The path below the container's scope, without a leading or trailing `/`; empty for its root.
        var relative: String
        /// Whether the request's path ended in `/`.
        var slash: Bool
        /// The token's key in the ``TokenLimiter``.
        var tokenKey: [UInt8]? = nil
        /// The writing device its versions record: the token's device, else `webdav`.
        var device = "webdav"
    }

    /// The methods that only read; every other one writes (a read-only token is refused them).
    static let readingMethods: Set<String> = ["OPTIONS", "PROPFIND", "GET", "HEAD"]

    /// Every WebDAV answer, an error's included, carries the web view's hardening headers
    /// (``WebSecurity/harden(_:)``): a file read here is never run as a page of this origin.
    func answer(_ request: Request, _ context: XferRequestContext) async -> Response {
        var response: Response
        do {
            response = try await route(request)
        } catch {
            response = Self.failure(error, request, context)
        }
        WebSecurity.harden(&response.headers)
        return response
    }

    /// The method's handler, once the token and its scope allow the request.
    func route(_ request: Request) async throws -> Response {
        let (principal, key) = try await authenticate(request)
        var target = try Self.target(request.uri.path, account: principal.accountID)
        target.tokenKey = key
        target.device = principal.device ?? target.device
        // The token's scope, as on the /v1 routes (a COPY or MOVE stays in the container).
        try principal.check(
            Self.readingMethods.contains(request.method.rawValue) ? .read : .write, container: target.container)
        if try await metadata.containerKey(account: principal.accountID, container: target.container) != nil {
            throw XferError(
                .encryptedContainer,
                "container \(target.container) is end-to-end encrypted: the server cannot read it; use xfer")
        }
        switch request.method.rawValue {
        case "OPTIONS": return options()
        case "PROPFIND": return try await propfind(request, target)
        case "PROPPATCH": return try await proppatch(request, target)
        case "GET", "HEAD": return try await get(request, target)
        case "PUT": return try await put(request, target)
        case "MKCOL": return try await mkcol(request, target)
        case "DELETE": return try await delete(request, target)
        case "COPY", "MOVE": return try await copy(request, target, move: request.method.rawValue == "MOVE")
        case "LOCK": return try await lock(request, target)
        case "UNLOCK": return try await unlock(request, target)
        default: return Response(status: .methodNotAllowed)
        }
    }

    /// What a failed request is answered with: WebDAV's own status, 429 with `Retry-After`,
    /// 401 with a Basic challenge, or the error's status (logged when it is the server's fault).
    static func failure(_ error: any Error, _ request: Request, _ context: XferRequestContext) -> Response {
        if let error = error as? DavStatus { return plain(error.status, error.message) }
        if let retry = (error as? XferError)?.cause as? RetryAfter {
            var response = plain(.tooManyRequests, ErrorMiddleware.body(for: error).error.message)
            response.headers[.retryAfter] = String(retry.seconds)
            return response
        }
        if (error as? XferError)?.code == .unauthorized {
            var response = plain(.unauthorized, ErrorMiddleware.body(for: error).error.message)
            response.headers[.wwwAuthenticate] = "Basic realm=\"xfer\", charset=\"UTF-8\""
            return response
        }
        let status = ErrorMiddleware.status(for: error)
        if status.code >= 500 {
            context.logger.error(
                "WebDAV request failed",
                metadata: ["method": "\(request.method)", "status": "\(status.code)", "error": "\(error)"])
        }
        return plain(status, ErrorMiddleware.body(for: error).error.message)
    }

    /// A status chosen by WebDAV's rules rather than by an error's code.
    struct DavStatus: Error {
        var status: HTTPResponse.Status
        var message: String
    }

    /// A 207 Multi-Status answer.
    static func multistatus(_ xml: String) -> Response {
        var buffer = ByteBuffer()
        buffer.writeString(xml)
        return Response(
            status: .davMultiStatus,
            headers: [.contentType: "application/xml; charset=utf-8", .contentLength: String(buffer.readableBytes)],
            body: ResponseBody(byteBuffer: buffer))
    }

    /// Bytes a streamed multistatus gathers before it sends them.
    static let multistatusPiece = 64 << 10

    /// A 207 Multi-Status answer written while `responses` makes it: each `D:response` passed
    /// to `write` is sent once ``multistatusPiece`` bytes have gathered (chunked, no length).
    static func multistatus(
        _ responses: @escaping @Sendable (_ write: (String) async throws -> Void) async throws -> Void
    ) -> Response {
        Response(
            status: .davMultiStatus, headers: [.contentType: "application/xml; charset=utf-8"],
            body: ResponseBody { writer in
                var buffer = ByteBuffer(string: DavXML.head)
                try await responses { xml in
                    buffer.writeString(xml)
                    if buffer.readableBytes >= multistatusPiece {
                        try await writer.write(buffer)
                        buffer.clear()
                    }
                }
                buffer.writeString(DavXML.tail)
                try await writer.write(buffer)
                try await writer.finish(nil)
            })
    }

    static func plain(_ status: HTTPResponse.Status, _ message: String) -> Response {
        var buffer = ByteBuffer()
        buffer.writeString(message + "\n")
        return Response(
            status: status,
            headers: [.contentType: "text/plain; charset=utf-8", .contentLength: String(buffer.readableBytes)],
            body: ResponseBody(byteBuffer: buffer))
    }

    /// The account of `Authorization: Basic` (the password a token) or `Bearer`.
    func authenticate(_ request: Request) async throws -> (principal: Principal, key: [UInt8]) {
        let header = request.headers[.authorization]
        guard header != nil else {
            throw XferError(.unauthorized, "sign in with any user name and an account token as the password")
        }
        guard let (principal, key) = try await Credentials.authenticate(header, basic: true, metadata),
            !principal.isAdmin
        else {
            throw XferError(
                .unauthorized, "the password is not an account token of this server (the admin token has no documents)")
        }
        try limiter.admit(key)
        return (principal, key)
    }

    /// `/dav/CONTAINER/REST` read: percent-decoded, NFC, no `.` or `..` component.
    static func target(_ rawPath: String, account: Int64) throws -> Target {
        guard let decoded = rawPath.removingPercentEncoding, decoded.hasPrefix("/dav/") else {
            throw XferError(.badRequest, "the path is not percent-encoded UTF-8 under /dav/")
        }
        var components = Self.components(Self.strip("/dav/", from: decoded))
        guard !components.isEmpty else {
            throw DavStatus(status: .forbidden, message: "name a container: /dav/CONTAINER/")
        }
        let container = try ContainerName(components.removeFirst())
        guard !components.contains(where: { $0 == "." || $0 == ".." }) else {
            throw XferError(.invalidPath, "a path must not hold . or ..")
        }
        let relative = components.joined(separator: "/").precomposedStringWithCanonicalMapping
        return Target(account: account, container: container, relative: relative, slash: decoded.hasSuffix("/"))
    }

    func options() -> Response {
        Response(
            status: .ok,
            headers: [HTTPField.Name("DAV")!: "1, 2", .allow: Self.methods.joined(separator: ", "), .contentLength: "0"]
        )
    }

    // MARK: Resources

    /// What a path names.
    enum Resource {
        /// The scope's root.
        case root
        /// A folder: documents below `prefix` (ending in `/`), and or a directory document.
        case folder(prefix: String, document: DocumentInfo?)
        /// A file document.
        case file(DocumentInfo)
        /// A package, or a folder inside one (`entry` its path there, empty for the package itself).
        case packageFolder(DocumentInfo, Manifest, entry: String)
        /// A file inside a package.
        case packageFile(DocumentInfo, Manifest, index: Int)

        var isCollection: Bool {
            switch self {
            case .root, .folder, .packageFolder: return true
            case .file, .packageFile: return false
            }
        }
    }

    static func documentPath(_ relative: String) throws -> DocumentPath { try DocumentPath(scope + relative) }

    // Paths are split, compared and cut on their UTF-8 bytes, never on Characters: a component
    // may begin with a combining mark, which a Character comparison would join to the "/".

    /// The `/`-separated components of a path.
    static func components(_ path: some StringProtocol) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `path` lies strictly below the folder `ancestor` (`ancestor/…`).
    static func isBelow(_ path: String, _ ancestor: String) -> Bool {
        path.utf8.starts(with: (ancestor + "/").utf8)
    }

    /// `path` without its leading `prefix` (which it must start with).
    static func strip(_ prefix: String, from path: String) -> String {
        String(decoding: path.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// The live document at `path`, if any.
    func live(_ target: Target, _ path: DocumentPath) async throws -> DocumentInfo? {
        do {
            let info = try await metadata.document(
                account: target.account, container: target.container, path: path, version: nil)
            return info.state == .current ? info : nil
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
    }

    /// Whether any live document lies below `prefix`.
    func hasDocuments(_ target: Target, below prefix: String) async throws -> Bool {
        var after: String? = nil
        for _ in 0..<(Self.maximumTreeDocuments / 100) {
            let page = try await metadata.list(
                account: target.account, container: target.container, prefix: prefix, after: after, limit: 100)
            if page.documents.contains(where: { $0.state == .current }) { return true }
            guard page.more, let last = page.documents.last else { return false }
            after = last.path.value
        }
        return false
    }

    /// What `relative` names, or `nil` for nothing.
    func resource(_ target: Target, _ relative: String) async throws -> Resource? {
        if relative.isEmpty { return .root }
        let path = try Self.documentPath(relative)
        if let info = try await live(target, path) {
            switch info.kind {
            case .file: return .file(info)
            case .directory: return .folder(prefix: path.value + "/", document: info)
            case .package:
                let stored = try await metadata.manifest(
                    account: target.account, container: target.container, path: path, version: info.version)
                return .packageFolder(info, try Manifest(decoding: stored.manifest), entry: "")
            }
        }
        if try await hasDocuments(target, below: path.value + "/") {
            return .folder(prefix: path.value + "/", document: nil)
        }
        // Inside a package: the nearest ancestor that is one.
        var components = Self.components(relative)
        var inner: [String] = []
        while components.count > 1 {
            inner.insert(components.removeLast(), at: 0)
            let ancestor = try Self.documentPath(components.joined(separator: "/"))
            guard let info = try await live(target, ancestor) else { continue }
            guard info.kind == .package else { return nil }
            let stored = try await metadata.manifest(
                account: target.account, container: target.container, path: ancestor, version: info.version)
            let manifest = try Manifest(decoding: stored.manifest)
            let entryPath = inner.joined(separator: "/")
            let entries = manifest.entries
            for index in 0..<entries.count where entries.path(at: index) == entryPath {
                return entries.kind(at: index) == .directory
                    ? .packageFolder(info, manifest, entry: entryPath) : .packageFile(info, manifest, index: index)
            }
            return nil
        }
        return nil
    }

    /// The folder a new document at `relative` goes into must exist and be writable.
    func requireWritableParent(_ target: Target, _ relative: String) async throws {
        let parent = Self.components(relative).dropLast().joined(separator: "/")
        switch try await resource(target, parent) {
        case .root?, .folder?: return
        case .packageFolder?, .packageFile?:
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        case .file?, nil:
            throw DavStatus(status: .conflict, message: "the folder \(parent) does not exist; make it first (MKCOL)")
        }
    }

    // MARK: PROPFIND

    static let liveProperties = [
        "resourcetype", "displayname", "getcontentlength", "getlastmodified", "creationdate", "getetag",
        "getcontenttype",
        "lockdiscovery", "supportedlock"
    ]

    /// One resource's properties as `(name, XML)`; `lockDiscovery` its ``lockDiscovery(_:_:_:now:)``.
    static func properties(of resource: Resource, name: String, lockDiscovery: String) -> [(String, String)] {
        var props: [(String, String)] = [
            ("displayname", "<D:displayname>\(DavXML.escape(name))</D:displayname>"),
            ("lockdiscovery", lockDiscovery), ("supportedlock", supportedLock)
        ]
        func dated(_ nanoseconds: Int64) {
            props.append(("getlastmodified", "<D:getlastmodified>\(DavXML.httpDate(nanoseconds))</D:getlastmodified>"))
            props.append(("creationdate", "<D:creationdate>\(WebRoutes.iso(nanoseconds))</D:creationdate>"))
        }
        func file(size: Int64, etag: String) {
            props.append(("resourcetype", "<D:resourcetype/>"))
            props.append(("getcontentlength", "<D:getcontentlength>\(size)</D:getcontentlength>"))
            props.append(("getetag", "<D:getetag>\(DavXML.escape(etag))</D:getetag>"))
            props.append(("getcontenttype", "<D:getcontenttype>application/octet-stream</D:getcontenttype>"))
        }
        let collection = ("resourcetype", "<D:resourcetype><D:collection/></D:resourcetype>")
        switch resource {
        case .root:
            props.append(collection)
        case .folder(_, let document):
            props.append(collection)
            if let document { dated(document.mtimeNs) }
        case .file(let info):
            file(size: info.size, etag: etag(info))
            dated(info.mtimeNs)
        case .packageFolder(let info, _, _):
            props.append(collection)
            dated(info.mtimeNs)
        case .packageFile(let info, let manifest, let index):
            file(size: manifest.entries.size(at: index), etag: DocumentBytes.etag(info, entry: index))
            dated(manifest.entries.mtimeNanoseconds(at: index))
        }
        return props
    }

    static func etag(_ info: DocumentInfo) -> String { DocumentBytes.etag(info) }

    /// The entity tags of an `If-Match` or `If-None-Match` list (weak ones compared by their tag).
    static func etags(_ header: String) -> [String] {
        header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.map {
            $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0
        }
    }

    /// A path's href: `/dav/CONTAINER/` and each component percent-encoded.
    static func href(_ container: ContainerName, _ relative: String, collection: Bool) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let parts = ([container.value] + components(relative)).map {
            $0.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0
        }
        return "/dav/" + parts.joined(separator: "/") + (collection ? "/" : "")
    }

    func propfind(_ request: Request, _ target: Target) async throws -> Response {
        let body = try await request.body.collect(upTo: DavXML.maximumBody)
        let asked = try DavXML.propfind(String(buffer: body))
        let depth =
            request.headers[HTTPField.Name("Depth")!]?.trimmingCharacters(in: .whitespaces).lowercased() ?? "infinity"
        guard depth == "0" || depth == "1" else {
            throw DavStatus(status: .forbidden, message: "Depth: infinity is not offered; ask with Depth: 0 or 1")
        }
        guard let resource = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        let name = Self.components(target.relative).last ?? target.container.value
        var members: [(relative: String, name: String, resource: Resource)] = [(target.relative, name, resource)]
        if depth == "1" {
            for (childName, child) in try await children(target, resource) {
                members.append(
                    (target.relative.isEmpty ? childName : target.relative + "/" + childName, childName, child))
            }
        }
        let dead = try await metadata.deadProperties(
            account: target.account, container: target.container,
            paths: members.map { Self.propertyPath($0.relative) })
        let (locks, now) = try await metadata.davLocks(account: target.account, container: target.container)
        let container = target.container
        let listed = members
        // Written as it is made, a piece at a time: what the answer holds in memory stays at
        // one piece however many members, properties and locks it lists.
        return Self.multistatus { write in
            for (index, member) in listed.enumerated() {
                try await write(
                    Self.answer(
                        asked, member.resource,
                        href: Self.href(container, member.relative, collection: member.resource.isCollection),
                        name: member.name, dead: dead[Self.propertyPath(member.relative)] ?? [],
                        lockDiscovery: Self.lockDiscovery(
                            member.relative, locks, container, now: now, rootedOnly: index > 0)))
            }
        }
    }

    static func answer(
        _ asked: DavXML.PropfindRequest, _ resource: Resource, href: String, name: String, dead: [DeadProperty],
        lockDiscovery: String
    ) -> String {
        let props = properties(of: resource, name: name, lockDiscovery: lockDiscovery)
        switch asked {
        case .allProperties:
            return DavXML.response(href: href, found: props.map(\.1) + dead.map(\.xml), missing: [])
        case .propertyNames:
            return DavXML.response(
                href: href,
                found: props.map { "<D:\($0.0)/>" }
                    + dead.map { DavXML.empty(DavXML.Name(namespace: $0.namespace, local: $0.name)) },
                missing: [])
        case .properties(let names):
            var found: [String] = []
            var missing: [DavXML.Name] = []
            for name in names {
                if name.namespace == DavXML.dav, let prop = props.first(where: { $0.0 == name.local }) {
                    found.append(prop.1)
                } else if let property = dead.first(where: { $0.namespace == name.namespace && $0.name == name.local })
                {
                    found.append(property.xml)
                } else {
                    missing.append(name)
                }
            }
            return DavXML.response(href: href, found: found, missing: missing)
        }
    }

    /// Where a path's dead properties are kept: its document path, or its folder's without
    /// the trailing `/` (`Documents` for the root).
    static func propertyPath(_ relative: String) -> String { relative.isEmpty ? "Documents" : scope + relative }

    /// A collection's members, each with its name.
    func children(_ target: Target, _ resource: Resource) async throws -> [(String, Resource)] {
        switch resource {
        case .file, .packageFile:
            return []
        case .packageFolder(let info, let manifest, let entry):
            let entries = manifest.entries
            let prefix = entry.isEmpty ? "" : entry + "/"
            var members: [(String, Resource)] = []
            for index in 0..<entries.count {
                let path = entries.path(at: index)
                guard !path.isEmpty, path.utf8.starts(with: prefix.utf8) else { continue }
                let name = Self.strip(prefix, from: path)
                guard !name.utf8.contains(UInt8(ascii: "/")) else { continue }
                members.append(
                    (
                        name,
                        entries.kind(at: index) == .directory
                            ? .packageFolder(info, manifest, entry: path)
                            : .packageFile(info, manifest, index: index)
                    ))
                guard members.count <= Self.maximumTreeDocuments else {
                    throw DavStatus(
                        status: .davInsufficientStorage,
                        message:
                            "this folder of a package holds more than \(Self.maximumTreeDocuments) entries; pull the package with xfer"
                    )
                }
            }
            return members
        case .root, .folder:
            let prefix: String
            if case .folder(let folder, _) = resource { prefix = folder } else { prefix = Self.scope }
            var members: [(String, Resource)] = []
            var start: FolderPosition? = nil
            repeat {
                let page = try await metadata.folder(
                    account: target.account, container: target.container, prefix: prefix, from: start, limit: 1000)
                for entry in page.entries {
                    let name = entry.name.hasSuffix("/") ? String(entry.name.dropLast()) : entry.name
                    if let folder = entry.folder {
                        members.append(
                            (
                                name,
                                .folder(
                                    prefix: folder, document: entry.document?.kind == .directory ? entry.document : nil)
                            ))
                    } else if let info = entry.document, info.state == .current {
                        switch info.kind {
                        case .file: members.append((name, .file(info)))
                        case .directory: members.append((name, .folder(prefix: info.path.value + "/", document: info)))
                        case .package:
                            // Its size and date from the listing; its contents when asked for.
                            let manifest = try Manifest(kind: .package, chunker: .default, entries: [])
                            members.append((name, .packageFolder(info, manifest, entry: "")))
                        }
                    }
                }
                start = page.next
                guard members.count <= Self.maximumTreeDocuments else {
                    throw DavStatus(
                        status: .davInsufficientStorage,
                        message:
                            "this folder holds more than \(Self.maximumTreeDocuments) entries; list it with xfer ls")
                }
            } while start != nil
            return members
        }
    }

    /// Sets and removes dead properties, all or none (RFC 4918 §9.2): the live properties are
    /// protected (403, and the others then 424 Failed Dependency); within the bounds of
    /// ``DeadProperty`` (507 otherwise).
    func proppatch(_ request: Request, _ target: Target) async throws -> Response {
        let body = try await request.body.collect(upTo: DavXML.maximumBody)
        let changes = try DavXML.proppatch(String(buffer: body), maximumChanges: DeadProperty.maximumPerPath)
        switch try await resource(target, target.relative) {
        case nil: throw DavStatus(status: .notFound, message: "no such file or folder")
        case .packageFile?: throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        case .packageFolder(_, _, let entry)? where !entry.isEmpty:
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        default: break
        }
        try await checkWrite(request, target, [Change(relative: target.relative)])
        let protected = Set(
            changes.map(\.name).filter { $0.namespace == DavXML.dav && Self.liveProperties.contains($0.local) })
        var statuses: [(DavXML.Name, String)]
        if protected.isEmpty {
            try await metadata.patchDeadProperties(
                account: target.account, container: target.container, path: Self.propertyPath(target.relative),
                changes.map { change in
                    switch change {
                    case .set(let name, let xml):
                        return .set(DeadProperty(namespace: name.namespace, name: name.local, xml: xml))
                    case .remove(let name): return .remove(namespace: name.namespace, name: name.local)
                    }
                })
            statuses = changes.map { ($0.name, "HTTP/1.1 200 OK") }
        } else {
            statuses = changes.map {
                ($0.name, protected.contains($0.name) ? "HTTP/1.1 403 Forbidden" : "HTTP/1.1 424 Failed Dependency")
            }
        }
        var seen = Set<DavXML.Name>()
        let href = Self.href(target.container, target.relative, collection: target.slash)
        var xml = DavXML.head + "<D:response><D:href>\(DavXML.escape(href))</D:href>"
        for (name, status) in statuses where seen.insert(name).inserted {
            xml += "<D:propstat><D:prop>\(DavXML.empty(name))</D:prop><D:status>\(status)</D:status></D:propstat>"
        }
        xml += "</D:response>" + DavXML.tail
        return Self.multistatus(xml)
    }

    // MARK: GET, PUT, MKCOL, DELETE

    func get(_ request: Request, _ target: Target) async throws -> Response {
        let headers: HTTPFields = [.contentType: "application/octet-stream", .cacheControl: "private, no-store"]
        switch try await resource(target, target.relative) {
        case .file(let info)?:
            let stored = try await metadata.manifest(
                account: target.account, container: target.container, path: info.path, version: info.version)
            let manifest = try Manifest(decoding: stored.manifest)
            guard manifest.entries.count == 1, manifest.entries.kind(at: 0) == .file else {
                throw DavStatus(status: .forbidden, message: "\(info.path) is a symbolic link; it has no bytes")
            }
            var withDate = headers
            withDate[.lastModified] = DavXML.httpDate(info.mtimeNs)
            withDate[.contentDisposition] = WebSecurity.attachment(Self.components(target.relative).last ?? "")
            return bytes.fileResponse(
                manifest.entries.chunks(at: 0), size: manifest.entries.size(at: 0), etag: Self.etag(info),
                request: request, headers: withDate)
        case .packageFile(let info, let manifest, let index)?:
            guard manifest.entries.kind(at: index) == .file else {
                throw DavStatus(status: .forbidden, message: "a symbolic link has no bytes")
            }
            var named = headers
            named[.contentDisposition] = WebSecurity.attachment(Self.components(target.relative).last ?? "")
            return bytes.fileResponse(
                manifest.entries.chunks(at: index), size: manifest.entries.size(at: index),
                etag: DocumentBytes.etag(info, entry: index), request: request, headers: named)
        case nil:
            throw DavStatus(status: .notFound, message: "no such file or folder")
        default:
            throw DavStatus(status: .methodNotAllowed, message: "a folder has no bytes; list it with PROPFIND")
        }
    }

    func put(_ request: Request, _ target: Target) async throws -> Response {
        // A part of a file is not the file (RFC 9110 §14.5): it would replace the whole of it.
        if request.headers[.contentRange] != nil || request.headers[HTTPField.Name("X-Update-Range")!] != nil {
            throw DavStatus(
                status: .badRequest, message: "a PUT writes a whole file; partial writes (Content-Range) are not taken")
        }
        guard !target.relative.isEmpty, !target.slash else {
            throw DavStatus(status: .methodNotAllowed, message: "a folder cannot be written with PUT")
        }
        let path = try Self.documentPath(target.relative)
        let existing = try await resource(target, target.relative)
        switch existing {
        case .file?, nil: break
        case .packageFile?:
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        default: throw DavStatus(status: .methodNotAllowed, message: "\(target.relative) is a folder")
        }
        // Conditional writes (RFC 9110 §13.1): If-Match against the current version's ETag,
        // If-None-Match: * to create only; a client that says what it saw never overwrites more.
        var current: DocumentInfo? = nil
        if case .file(let info)? = existing { current = info }
        if let match = request.headers[.ifMatch] {
            guard let current, match == "*" || Self.etags(match).contains(Self.etag(current)) else {
                throw DavStatus(
                    status: .preconditionFailed, message: "\(target.relative) is not the version If-Match names")
            }
        }
        if let noneMatch = request.headers[.ifNoneMatch], let current,
            noneMatch == "*" || Self.etags(noneMatch).contains(Self.etag(current))
        {
            throw DavStatus(status: .preconditionFailed, message: "\(target.relative) exists")
        }
        try await requireWritableParent(target, target.relative)
        try await checkWrite(request, target, [Change(relative: target.relative, member: existing == nil)])
        // Based on the version current when the request came: one committed by another device
        // while this body was arriving makes this one a conflict version, and both are kept.
        // The locks are asked again once the body is in, just before the commit: a lock taken
        // while it arrived stops the write (its chunks are left to gc).
        try await limiter.upload(target.tokenKey) {
            try await writeFile(target, path, base: current?.version, body: request.body) {
                try await checkWrite(request, target, [Change(relative: target.relative, member: existing == nil)])
            }
        }
        return Response(status: existing == nil ? .created : .noContent, headers: [.contentLength: "0"])
    }

    /// Stores `body` (none: an empty file) as a new version of file `path` based on `base`
    /// (none: on whatever is there, a new document or one deleted, or with `onlyNew`, refusing
    /// a live one with `already_exists`): cut, hashed and stored by the server's pipeline,
    /// then, once `beforeCommit` has not thrown, committed.
    func writeFile(
        _ target: Target, _ path: DocumentPath, base: Int64?, onlyNew: Bool = false, body: RequestBody?,
        beforeCommit: () async throws -> Void = {}
    ) async throws {
        var base = base
        if base == nil {
            base = try await writer.newBase(
                account: target.account, container: target.container, path: path, refusingLive: onlyNew)
        }
        let startedAt = try await metadata.clock()
        var file = UploadedFile(
            path: path, intake: ChunkIntake(metadata: metadata, chunks: chunks, quota: quota),
            account: target.account, startedAt: startedAt)
        let manifest: Manifest
        do {
            if let body {
                var pieces = body.makeAsyncIterator()
                while let buffer = try await Self.next(&pieces) {
                    try await file.feed(Array(buffer.readableBytesView))
                }
            }
            manifest = try await file.finish()
        } catch {
            // A body cut short: what it still had in flight stops with the request.
            await file.abandon()
            throw error
        }
        try await beforeCommit()
        _ = try await writer.commit(
            account: target.account, container: target.container, path: path, manifest, base: base,
            device: target.device)
    }

    /// The next piece of a request's body; a body that stops early (its client went, or sent
    /// less than it announced) is the client's error, not the server's.
    static func next(_ pieces: inout RequestBody.AsyncIterator) async throws -> ByteBuffer? {
        do {
            return try await pieces.next()
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(
                .badRequest, "the request body ended before it was whole; nothing was written", cause: error)
        }
    }

    func mkcol(_ request: Request, _ target: Target) async throws -> Response {
        if let length = request.headers[.contentLength], length != "0" {
            throw DavStatus(status: .unsupportedMediaType, message: "MKCOL takes no body")
        }
        if request.headers[.transferEncoding] != nil {
            throw DavStatus(status: .unsupportedMediaType, message: "MKCOL takes no body")
        }
        guard !target.relative.isEmpty, try await resource(target, target.relative) == nil else {
            throw DavStatus(status: .methodNotAllowed, message: "\(target.relative) exists already")
        }
        try await requireWritableParent(target, target.relative)
        try await checkWrite(request, target, [Change(relative: target.relative, member: true)])
        let path = try Self.documentPath(target.relative)
        _ = try await writer.commit(
            account: target.account, container: target.container, path: path, try DocumentWriter.folderManifest(),
            base: try await writer.newBase(
                account: target.account, container: target.container, path: path, refusingLive: true),
            device: target.device)
        return Response(status: .created, headers: [.contentLength: "0"])
    }

    func delete(_ request: Request, _ target: Target) async throws -> Response {
        guard !target.relative.isEmpty else {
            throw DavStatus(status: .forbidden, message: "the container's root is not deleted from here")
        }
        guard let resource = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        try await checkWrite(request, target, [Change(relative: target.relative, below: true, member: true)])
        try await remove(target, resource)
        try await metadata.removeDeadProperties(
            account: target.account, container: target.container, path: Self.propertyPath(target.relative))
        try await metadata.releaseDavLocks(
            account: target.account, container: target.container, below: Self.propertyPath(target.relative))
        return Response(status: .noContent)
    }

    /// Deletes a file, a package, or a folder with everything below it (each a deletion version).
    func remove(_ target: Target, _ resource: Resource) async throws {
        switch resource {
        case .root:
            throw DavStatus(status: .forbidden, message: "the container's root is not deleted from here")
        case .packageFile,
            .packageFolder(_, _, entry: _) where !Self.isWholePackage(resource):
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        case .file(let info), .packageFolder(let info, _, _):
            _ = try await writer.delete(
                account: target.account, container: target.container, path: info.path, base: info.version)
        case .folder(let prefix, let document):
            for info in try await tree(target, prefix) {
                _ = try await writer.delete(
                    account: target.account, container: target.container, path: info.path, base: info.version)
            }
            if let document {
                _ = try await writer.delete(
                    account: target.account, container: target.container, path: document.path, base: document.version)
            }
        }
    }

    static func isWholePackage(_ resource: Resource) -> Bool {
        if case .packageFolder(_, _, let entry) = resource { return entry.isEmpty }
        return false
    }

    /// Every live document below `prefix`, at most ``maximumTreeDocuments``.
    func tree(_ target: Target, _ prefix: String) async throws -> [DocumentInfo] {
        var found: [DocumentInfo] = []
        var after: String? = nil
        while true {
            let page = try await metadata.list(
                account: target.account, container: target.container, prefix: prefix, after: after, limit: 1000)
            found += page.documents.filter { $0.state == .current }
            guard found.count <= Self.maximumTreeDocuments else {
                throw DavStatus(
                    status: .davInsufficientStorage,
                    message:
                        "more than \(Self.maximumTreeDocuments) documents lie below \(prefix); nothing was changed; use xfer"
                )
            }
            guard page.more, let last = page.documents.last else { return found }
            after = last.path.value
        }
    }

    // MARK: COPY, MOVE

    func copy(_ request: Request, _ target: Target, move: Bool) async throws -> Response {
        guard let header = request.headers[HTTPField.Name("Destination")!] else {
            throw DavStatus(status: .badRequest, message: "\(move ? "MOVE" : "COPY") needs a Destination header")
        }
        let destination = try Self.target(Self.path(ofURL: header), account: target.account)
        guard destination.container == target.container else {
            throw DavStatus(status: .badGateway, message: "copies and moves stay in one container")
        }
        let overwrite = request.headers[HTTPField.Name("Overwrite")!]?.uppercased() != "F"
        let depth = request.headers[HTTPField.Name("Depth")!]?.lowercased() ?? "infinity"
        guard depth == "0" || depth == "infinity" else {
            throw DavStatus(status: .badRequest, message: "a COPY or MOVE has Depth 0 or infinity")
        }
        guard !target.relative.isEmpty, !destination.relative.isEmpty else {
            throw DavStatus(status: .forbidden, message: "the container's root is not copied or moved")
        }
        guard destination.relative != target.relative else {
            throw DavStatus(status: .forbidden, message: "the source and the destination are the same")
        }
        guard !Self.isBelow(destination.relative, target.relative) else {
            throw DavStatus(status: .forbidden, message: "a folder cannot be copied or moved into itself")
        }
        // Nor onto a folder it lies in: overwriting that folder would delete the source first.
        guard !Self.isBelow(target.relative, destination.relative) else {
            throw DavStatus(
                status: .forbidden,
                message: "\(target.relative) lies in \(destination.relative); it cannot replace a folder that holds it")
        }
        guard let source = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        if case .packageFile = source {
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here; copy the package")
        }
        if case .packageFolder(_, _, let entry) = source, !entry.isEmpty {
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here; copy the package")
        }
        try await requireWritableParent(destination, destination.relative)
        try await checkWrite(
            request, target,
            [Change(relative: destination.relative, below: true, member: true)]
                + (move ? [Change(relative: target.relative, below: true, member: true)] : []))
        // What is to be placed is read, and bounded, before anything at the destination goes.
        var documents: [DocumentInfo] = []
        if case .folder(let prefix, _) = source, depth != "0" || move { documents = try await tree(target, prefix) }
        let existing = try await resource(destination, destination.relative)
        if let existing {
            guard overwrite else {
                throw DavStatus(
                    status: .preconditionFailed, message: "\(destination.relative) exists and Overwrite is F")
            }
            // A file replaced by a file is a new version of it; anything else goes first.
            if case .file = existing, !source.isCollection {} else { try await remove(destination, existing) }
        }
        let account = target.account
        let container = target.container
        // Dead properties go with what they describe (the destination's own are replaced): moved
        // (or copied) before a move deletes the source, which would take them with it. Moved,
        // they are never counted twice against the container's bounds.
        try await metadata.copyDeadProperties(
            account: account, container: container, from: Self.propertyPath(target.relative),
            to: Self.propertyPath(destination.relative), move: move)
        func place(_ info: DocumentInfo, at relative: String) async throws {
            let stored = try await metadata.manifest(
                account: account, container: container, path: info.path, version: info.version)
            let path = try Self.documentPath(relative)
            let base = try await writer.newBase(account: account, container: container, path: path, refusingLive: false)
            _ = try await writer.commit(
                account: account, container: container, path: path, try Manifest(decoding: stored.manifest),
                base: base, like: info, device: target.device)
        }
        switch source {
        case .file(let info), .packageFolder(let info, _, _):
            try await place(info, at: destination.relative)
            if move {
                _ = try await writer.delete(account: account, container: container, path: info.path, base: info.version)
            }
        case .folder(let prefix, let document):
            // The folder itself: its directory document, or a new one (an empty folder stays one).
            let folder = try Self.documentPath(destination.relative)
            if let document {
                try await place(document, at: destination.relative)
            } else if documents.isEmpty {
                _ = try await writer.commit(
                    account: account, container: container, path: folder, try DocumentWriter.folderManifest(),
                    base: try await writer.newBase(
                        account: account, container: container, path: folder, refusingLive: false),
                    device: target.device)
            }
            for info in documents {
                try await place(info, at: destination.relative + "/" + Self.strip(prefix, from: info.path.value))
            }
            if move {
                for info in documents {
                    _ = try await writer.delete(
                        account: account, container: container, path: info.path, base: info.version)
                }
                if let document {
                    _ = try await writer.delete(
                        account: account, container: container, path: document.path, base: document.version)
                }
            }
        case .root, .packageFile:
            throw DavStatus(status: .forbidden, message: "this cannot be copied or moved")
        }
        // Locks stay on their URLs: a moved source's go (RFC 4918 §9.9.4), a copy takes none.
        if move {
            try await metadata.releaseDavLocks(
                account: account, container: container, below: Self.propertyPath(target.relative))
        }
        return Response(status: existing == nil ? .created : .noContent, headers: [.contentLength: "0"])
    }
}

extension HTTPResponse.Status {
    /// 207: one status per resource, in the XML body (RFC 4918 §13).
    static var davMultiStatus: Self { .init(code: 207, reasonPhrase: "Multi-Status") }
    /// 507: the request would take more than the server gives one request (RFC 4918 §11.5).
    static var davInsufficientStorage: Self { .init(code: 507, reasonPhrase: "Insufficient Storage") }
}
