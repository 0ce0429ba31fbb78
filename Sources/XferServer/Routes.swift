import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The /v1 routes (docs/PROTOCOL.md): documents, chunks, the change feed and accounts.
struct Routes: Sendable {
    let metadata: any MetadataStore
    let chunks: any ChunkStore
    let limits: ServerLimits
    let changes: ChangeNotifier
    let quota: QuotaGate
    let limiter: TokenLimiter
    /// The store's deployment identity, read once: it never changes.
    let deployment = DeploymentCache()
    /// Where share links' passwords are hashed: the server's one gate, shared with the web view.
    var passwords = PasswordGate()

    func register(on router: Router<XferRequestContext>) {
        router.add(middleware: ErrorMiddleware())
        router.get("/v1/health") { _, _ -> Response in
            Self.json(
                HealthStatus(
                    status: "ok", version: XferVersion.current,
                    features: ServerFeature.allCases.filter(limits.features.contains).map(\.rawValue)))
        }
        router.get("/metrics", use: metrics)
        let v1 = router.group("v1").add(middleware: AuthMiddleware(metadata: metadata, limiter: limiter))
        v1.post("admin/accounts", use: createAccount)
        v1.get("admin/accounts", use: listAccounts)
        v1.get("admin/accounts/:name", use: showAccount)
        v1.put("admin/accounts/:name/quota", use: setQuota)
        v1.delete("admin/accounts/:name", use: deleteAccount)
        v1.post("admin/tokens", use: newToken)
        v1.post("admin/tokens/revoke", use: revokeToken)
        v1.post("admin/gc", use: collectGarbage)
        v1.post("admin/verify", use: verify)
        v1.get("admin/accounts/:name/tokens", use: accountTokens)
        // Every route that acts for an account goes through its token's scope: what it reads
        // and what it writes (``Principal/check(_:container:)``).
        v1.get("account", use: scoped(.read, account))
        v1.get("tokens", use: scoped(.read, ownTokens))
        v1.post("tokens", use: scoped(.read, issueOwnToken))
        v1.post("tokens/revoke", use: scoped(.read, revokeOwnToken))
        v1.post("chunks/missing", use: scoped(.read, missing))
        v1.post("chunks", use: scoped(.write, upload))
        v1.post("chunks/download", use: scoped(.read, download))
        v1.post("containers/:container/announce", use: scoped(.write, announce))
        v1.post("containers/:container/commit", use: scoped(.write, commit))
        v1.post("containers/:container/commits", use: scoped(.write, commitBatch))
        v1.post("containers/:container/manifests", use: scoped(.read, manifestBatch))
        v1.get("containers/:container/documents", use: scoped(.read, list))
        v1.get("containers/:container/query", use: scoped(.read, query))
        v1.get("containers/:container/document", use: scoped(.read, stat))
        v1.delete("containers/:container/document", use: scoped(.write, delete))
        v1.get("containers/:container/manifest", use: scoped(.read, manifest))
        v1.get("containers/:container/changes", use: scoped(.read, changeList))
        v1.get("containers/:container/versions", use: scoped(.read, versions))
        v1.post("containers/:container/resolve", use: scoped(.write, resolve))
        v1.get("containers/:container/kv", use: scoped(.read, keyValues))
        v1.put("containers/:container/kv", use: scoped(.write, setKeyValue))
        v1.get("containers/:container/key", use: scoped(.read, containerKey))
        v1.put("containers/:container/key", use: scoped(.manage, setContainerKey))
        registerShares(on: v1)
        registerMembers(on: v1)
        registerAccountKeys(on: v1)
        registerRecords(on: v1)
    }

    typealias Handler = @Sendable (Request, XferRequestContext) async throws -> Response

    /// `handler` for an account's token that may `access` the container the path names (the
    /// chunk routes: the `container` query parameter, whose owner's chunks they reach; none:
    /// the account's own), resolved once by the one rule (``ContainerTarget``).
    func scoped(_ access: Principal.Access, _ handler: @escaping Handler) -> Handler {
        { request, context in
            let principal = try context.requireAccount()
            let named = try (context.parameters.get("container") ?? request.uri.queryParameters.get("container"))
                .map { try ContainerName(String($0)) }
            var context = context
            context.target = try await ContainerTarget.resolve(principal, named: named, for: access, store: metadata)
            return try await handler(request, context)
        }
    }

    // MARK: Helpers

    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireJSON.encode(value))))
    }

    /// Reads, parses and validates a JSON body of at most `limit` bytes (the type's own limit
    /// unless a route sets one): a larger body is refused by its `Content-Length` before any of
    /// it is read, or as soon as it passes the limit.
    /// - Throws: `too_large` (413) naming the limit; `bad_request` from parsing or ``WireRequest/validate()``.
    static func decode<T: WireRequest>(_ type: T.Type, _ request: Request, limit: Int = T.maximumBodyBytes) async throws
        -> T
    {
        func tooLarge(_ size: String) -> XferError {
            XferError(
                .tooLarge,
                "the request body is \(size); this route takes at most \(limit) bytes (\(ByteCount(Int64(limit))))")
        }
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw tooLarge("\(declared) bytes")
        }
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw tooLarge("larger")
        }
        let value = try WireJSON.decode(type, from: body.readableBytesView)
        try value.validate()
        return value
    }

    /// The body of a records route, at most `limit` bytes, in CloudKit's key names (``RecordJSON``).
    static func records<T: Decodable>(_ type: T.Type, _ request: Request, limit: Int = RecordLimits.requestBytes)
        async throws -> T
    {
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw XferError(.tooLarge, "the request body is \(declared) bytes; records routes take at most \(limit)")
        }
        do {
            return try RecordJSON.decode(type, from: try await request.body.collect(upTo: limit).readableBytesView)
        } catch is NIOTooManyBytesError {
            throw XferError(.tooLarge, "the request body is larger than the \(limit) bytes records routes take")
        }
    }

    static func path(_ request: Request) throws -> DocumentPath {
        guard let raw = request.uri.queryParameters.get("path") else {
            throw XferError(.badRequest, "the path query parameter is required")
        }
        return try DocumentPath(String(raw))
    }

    static func optionalInt(_ request: Request, _ name: String) throws -> Int64? {
        guard let raw = request.uri.queryParameters.get(name) else { return nil }
        guard let value = Int64(raw), value >= 0 else {
            throw XferError(.badRequest, "\(name) must be a non-negative integer")
        }
        return value
    }

    static func intParameter(_ request: Request, _ name: String, default value: Int, range: ClosedRange<Int>) throws
        -> Int
    {
        guard let raw = try optionalInt(request, name) else { return value }
        guard range.contains(Int(clamping: raw)) else {
            throw XferError(.badRequest, "\(name) must be in \(range.lowerBound)...\(range.upperBound)")
        }
        return Int(raw)
    }

    static func checkCount(_ count: Int) throws {
        guard count <= ProtocolLimits.maximumIDsPerRequest else {
            throw XferError(.tooLarge, "\(count) ids in one request; at most \(ProtocolLimits.maximumIDsPerRequest)")
        }
    }
}
