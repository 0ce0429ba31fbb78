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
        /// The owner's account, once resolved (``ContainerTarget``).
        var account: Int64
        /// The container in its owner's account, once resolved.
        var container: ContainerName
        /// The container as the path names it (`OWNER:NAME` for a member): what hrefs show.
        var named: ContainerName
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
        // The one rule of container access, as on the /v1 routes (a COPY or MOVE stays in the
        // container): the token's scope, then whose container and as what.
        let resolved = try await ContainerTarget.resolve(
            principal, named: target.named,
            for: Self.readingMethods.contains(request.method.rawValue) ? .read : .write, store: metadata)
        target.account = resolved.accountID
        target.container = resolved.container
        target.device = resolved.device(claimed: target.device) ?? target.device
        if try await metadata.containerKey(account: target.account, container: target.container) != nil {
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
        return Target(
            account: account, container: container, named: container, relative: relative, slash: decoded.hasSuffix("/"))
    }

    func options() -> Response {
        Response(
            status: .ok,
            headers: [HTTPField.Name("DAV")!: "1, 2", .allow: Self.methods.joined(separator: ", "), .contentLength: "0"]
        )
    }

}

extension HTTPResponse.Status {
    /// 207: one status per resource, in the XML body (RFC 4918 §13).
    static var davMultiStatus: Self { .init(code: 207, reasonPhrase: "Multi-Status") }
    /// 507: the request would take more than the server gives one request (RFC 4918 §11.5).
    static var davInsufficientStorage: Self { .init(code: 507, reasonPhrase: "Insufficient Storage") }
}
