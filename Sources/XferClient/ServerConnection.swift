import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XferCore
import XferProtocol

/// A connection to an xfer server: one method per /v1 route, errors as ``XferError`` with
/// the server's code.
public final class ServerConnection: Sendable {
    /// The server's base URL (`http://127.0.0.1:8750`).
    public let server: String
    private let token: String
    private let client: HTTPClient
    private let knownFeatures = Locked<Set<ServerFeature>?>(nil)
    /// Longest time one request may take.
    public let timeout: TimeAmount
    /// When a failed request is sent again (``RetryPolicy``).
    public let retry: RetryPolicy
    /// The ceiling on chunk data sent (`--bwlimit`), shared by every upload of this connection.
    public let uploadLimit: BandwidthLimit?
    /// The ceiling on chunk data received, shared by every download of this connection.
    public let downloadLimit: BandwidthLimit?
    /// Where it says what it does: each request and its answer at `debug`, each try sent again
    /// at `info` (never a token or a body). Silent by default.
    public let logger: Logger

    /// A logger that says nothing: the default of a library's connection.
    public static let silent = Logger(label: "xfer.client", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Creates a connection (nothing is sent until the first request).
    /// - Parameters:
    ///   - server: `http://HOST:PORT` or `HOST:PORT`.
    ///   - token: The account's (or the admin) token.
    ///   - timeout: Longest time one request may take (default 5 minutes).
    ///   - trustRoots: For `https://` servers: a PEM file of the certificate authorities to
    ///     trust instead of the system's (for a private CA or a self-signed server).
    ///   - readTimeout: The longest silence allowed mid-answer (see below).
    ///   - retry: When a failed request is sent again.
    ///   - bandwidth: Bytes a second of chunk data at most, each way (`nil`: as fast as it goes).
    ///   - logger: Where to say what it does (``silent`` by default).
    public init(
        server: String, token: String, timeout: TimeAmount = .minutes(5), readTimeout: TimeAmount = .seconds(75),
        trustRoots: String? = nil, retry: RetryPolicy = RetryPolicy(), bandwidth: Int64? = nil,
        logger: Logger = ServerConnection.silent
    ) {
        var base = server.contains("://") ? server : "http://" + server
        while base.hasSuffix("/") { base.removeLast() }
        self.server = base
        self.token = token
        self.timeout = timeout
        self.retry = retry
        self.logger = logger
        uploadLimit = bandwidth.map { BandwidthLimit(bytesPerSecond: $0) }
        downloadLimit = bandwidth.map { BandwidthLimit(bytesPerSecond: $0) }
        var configuration = HTTPClient.Configuration()
        // Connect: an unreachable server is reported (and retried by sync) quickly. Read: the
        // longest silence allowed mid-answer, above the longest long poll (60 s), so a stalled
        // connection (say, a damaged Content-Length) ends in an error rather than a hang.
        configuration.timeout = .init(connect: .seconds(3), read: readTimeout)
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        configuration.decompression = .disabled
        if let trustRoots {
            // The server's certificate must chain to these roots and name the host; the system's
            // roots are used when none are given.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(trustRoots)
            tls.minimumTLSVersion = .tlsv12
            configuration.tlsConfiguration = tls
        }
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Closes the connection pool. Call once, when done.
    public func shutdown() async {
        try? await client.shutdown()
    }

    // MARK: Routes

    /// `GET /v1/health` (no token needed).
    @discardableResult
    public func health() async throws -> HealthStatus {
        try await json(HealthStatus.self, "GET", "/v1/health", authenticated: false)
    }

    /// The optional parts of the protocol the server understands, asked once (`GET /v1/health`)
    /// and remembered for this connection's life. A server that does not name any, or does not
    /// answer, has none: the caller then sends what every v1 server reads.
    public func features() async -> Set<ServerFeature> {
        if let known = knownFeatures.value { return known }
        guard let status = try? await health() else { return [] }
        let features = Set((status.features ?? []).compactMap(ServerFeature.init(rawValue:)))
        knownFeatures.withLock { $0 = features }
        return features
    }

    /// The account the token belongs to.
    public func account() async throws -> AccountInfo {
        try await json(AccountInfo.self, "GET", "/v1/account")
    }

    /// Creates an account (admin token only); the answer carries the new token.
    public func createAccount(_ request: CreateAccountRequest) async throws -> AccountInfo {
        try await json(AccountInfo.self, "POST", "/v1/admin/accounts", body: WireJSON.encode(request))
    }

    /// Every account, or one (admin token only).
    public func accounts(named name: String? = nil) async throws -> [AccountSummary] {
        guard let name else { return try await json(AccountList.self, "GET", "/v1/admin/accounts").accounts }
        return [try await json(AccountSummary.self, "GET", "/v1/admin/accounts/\(Self.escape(name))")]
    }

    /// Sets an account's quota (admin token only).
    public func setQuota(account name: String, quota: Int64) async throws -> AccountSummary {
        try await json(
            AccountSummary.self, "PUT", "/v1/admin/accounts/\(Self.escape(name))/quota",
            body: WireJSON.encode(SetQuotaRequest(quota: quota)))
    }

    /// Deletes an account and everything it has, or (`dryRun`) says what would go (admin token only).
    public func deleteAccount(_ name: String, dryRun: Bool) async throws -> AccountDeletion {
        try await json(
            AccountDeletion.self, "DELETE", "/v1/admin/accounts/\(Self.escape(name))\(dryRun ? "?dry_run=1" : "")")
    }

    /// Issues another token for an account (admin token only).
    public func newToken(account: String, terms: TokenTerms = TokenTerms()) async throws -> TokenInfo {
        try await json(
            TokenInfo.self, "POST", "/v1/admin/tokens",
            body: WireJSON.encode(NewTokenRequest(account: account, terms: terms)))
    }

    /// An account's tokens (admin token only).
    public func tokens(account name: String) async throws -> [TokenSummary] {
        try await json(TokenList.self, "GET", "/v1/admin/accounts/\(Self.escape(name))/tokens").tokens
    }

    /// The tokens of the account this connection's token belongs to, its own marked `current`
    /// (a token of full scope only).
    public func ownTokens() async throws -> [TokenSummary] {
        try await json(TokenList.self, "GET", "/v1/tokens").tokens
    }

    /// Another token of this connection's account, on `terms` (a token of full scope only; the
    /// new one expires no later than this one).
    public func issueOwnToken(_ terms: TokenTerms) async throws -> TokenInfo {
        try await json(TokenInfo.self, "POST", "/v1/tokens", body: WireJSON.encode(terms))
    }

    /// Revokes one of this account's tokens: by the token itself (any token may revoke itself)
    /// or by its id (a token of full scope only).
    public func revokeOwnToken(_ request: RevokeTokenRequest) async throws -> RevokeTokenResult {
        try await json(RevokeTokenResult.self, "POST", "/v1/tokens/revoke", body: WireJSON.encode(request))
    }

    /// Revokes one token or all of an account's (admin token only).
    public func revokeToken(_ request: RevokeTokenRequest) async throws -> RevokeTokenResult {
        try await json(RevokeTokenResult.self, "POST", "/v1/admin/tokens/revoke", body: WireJSON.encode(request))
    }

    /// Collects garbage on the server (admin token only).
    public func collectGarbage(_ request: GarbageRequest) async throws -> GarbageReport {
        try await json(GarbageReport.self, "POST", "/v1/admin/gc", body: WireJSON.encode(request))
    }

    /// Verifies the server's stores (admin token only); may take long on a large server.
    public func verifyServer() async throws -> ServerVerifyReport {
        try await json(
            ServerVerifyReport.self, "POST", "/v1/admin/verify",
            body: WireJSON.encode(GarbageRequest(graceSeconds: nil, dryRun: nil)))
    }

    /// Records a pending version before any data moves.
    public func announce(container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        try await json(
            DocumentInfo.self, "POST", "/v1/containers/\(container)/announce", body: WireJSON.encode(request))
    }

    /// The ids (of `ids`) the server lacks, asked in batches of the protocol's maximum.
    public func missing(_ ids: [ChunkID]) async throws -> [ChunkID] {
        var missing: [ChunkID] = []
        var start = 0
        while start < ids.count {
            let batch = Array(ids[start..<min(ids.count, start + ProtocolLimits.maximumIDsPerRequest)])
            missing += try await json(
                ChunkIDList.self, "POST", "/v1/chunks/missing", body: WireJSON.encode(ChunkIDList(ids: batch))
            ).parsed()
            start += batch.count
        }
        return missing
    }

    /// Uploads chunks in one framed body.
    public func upload(_ chunks: [EncodedChunk]) async throws -> UploadResult {
        try await upload(frames: ChunkFrames.encode(chunks))
    }

    /// Uploads chunks already framed (``ChunkFrames/encode(_:)``).
    public func upload(frames body: [UInt8]) async throws -> UploadResult {
        guard uploadLimit != nil else {
            let response = try await send("POST", "/v1/chunks", body: body, contentType: "application/octet-stream")
            return try WireJSON.decode(UploadResult.self, from: response.readableBytesView)
        }
        // Paced: the same body as one piece that BodyPieces slices, each slice waiting its turn
        // (its length known, so any server takes it).
        return try await upload(length: Int64(body.count)) {
            let whole = Locked<[UInt8]?>(body)
            return {
                whole.withLock { piece in
                    defer { piece = nil }
                    return piece
                }
            }
        }
    }

    /// Uploads a body made a piece at a time while it is sent (chunked, of unknown length), so
    /// only a piece is held at once: `nextPiece` is called for each until it returns `nil` (the
    /// first piece starts with the body's magic). Only to a server that offers
    /// ``ServerFeature/largeUploads``; an error `nextPiece` throws ends the request and is thrown here.
    public func upload(pieces nextPiece: @escaping @Sendable () throws -> [UInt8]?) async throws -> UploadResult {
        // Its pieces are made as it is sent, once: it is not sent again.
        let body = try await answer(try await execute(try chunkUpload(nextPiece, length: nil), timeout: chunkTimeout)).1
        return try WireJSON.decode(UploadResult.self, from: body.readableBytesView)
    }

    /// Uploads a body made a piece at a time while it is sent, as ``upload(pieces:)``, under
    /// ``retry``: `makePieces` gives a new maker of the whole body for each try (a chunk upload
    /// names its content, so a second try stores nothing twice).
    public func upload(retrying makePieces: () -> @Sendable () throws -> [UInt8]?) async throws -> UploadResult {
        try await upload(length: nil, makePieces)
    }

    /// ``upload(retrying:)`` of a body of `length` bytes when known.
    private func upload(length: Int64?, _ makePieces: () -> @Sendable () throws -> [UInt8]?) async throws
        -> UploadResult
    {
        let response = try await respond("POST", "/v1/chunks", timeout: chunkTimeout) {
            try chunkUpload(makePieces(), length: length)
        }
        return try WireJSON.decode(UploadResult.self, from: try await answer(response).1.readableBytesView)
    }

    /// A `POST /v1/chunks` whose body is the pieces `make` makes, paced by ``uploadLimit``.
    private func chunkUpload(_ make: @escaping @Sendable () throws -> [UInt8]?, length: Int64?) throws
        -> HTTPClientRequest
    {
        var request = try makeRequest("POST", "/v1/chunks")
        request.headers.add(name: "Content-Type", value: "application/octet-stream")
        request.body = .stream(
            BodyPieces(make: make, limit: uploadLimit), length: length.map { .known($0) } ?? .unknown)
        return request
    }

    /// A request body as the pieces a closure makes, one when the client asks for more; under a
    /// ``BandwidthLimit``, cut into slices (``BandwidthLimit/slice``) that each wait their turn,
    /// so the rate holds over any piece's size and no connection waits long between two.
    private struct BodyPieces: AsyncSequence, Sendable {
        typealias Element = ByteBuffer
        let make: @Sendable () throws -> [UInt8]?
        var limit: BandwidthLimit?

        struct AsyncIterator: AsyncIteratorProtocol {
            let make: @Sendable () throws -> [UInt8]?
            let limit: BandwidthLimit?
            var pending: ArraySlice<UInt8> = []

            mutating func next() async throws -> ByteBuffer? {
                try Task.checkCancellation()
                guard let limit else { return try make().map { ByteBuffer(bytes: $0) } }
                while pending.isEmpty {
                    guard let piece = try make() else { return nil }
                    pending = piece[...]
                }
                let slice = pending.prefix(limit.slice)
                pending = pending.dropFirst(slice.count)
                try await limit.take(slice.count)
                return ByteBuffer(bytes: slice)
            }
        }

        func makeAsyncIterator() -> AsyncIterator { AsyncIterator(make: make, limit: limit) }
    }

    /// Commits an announced version.
    public func commit(container: ContainerName, _ request: CommitRequest) async throws -> DocumentInfo {
        try await commit(container: container, body: SpillArray(WireJSON.encode(request)))
    }

    /// Makes an announced version current, from a ``CommitRequest``'s JSON made beforehand
    /// (``CommitRequest/body(delta:)``).
    public func commit(container: ContainerName, body: SpillArray<UInt8>) async throws -> DocumentInfo {
        try await json(DocumentInfo.self, "POST", "/v1/containers/\(container)/commit", body: body)
    }

    /// Commits many documents in one request (their chunks uploaded first); one outcome per
    /// document, in order.
    public func commit(container: ContainerName, batch: BatchCommitRequest) async throws -> [BatchCommitResult.Outcome]
    {
        let answer = try await json(
            BatchCommitResult.self, "POST", "/v1/containers/\(container)/commits", body: WireJSON.encode(batch))
        guard answer.results.count == batch.documents.count else {
            throw XferError(
                .internal,
                "the server answered \(answer.results.count) outcomes for a batch of \(batch.documents.count)")
        }
        return answer.results
    }

    /// The manifests of many documents in one request; one item per document, in order.
    public func manifests(container: ContainerName, _ wanted: [ManifestBatchRequest.Wanted]) async throws
        -> [ManifestBatchResult.Item]
    {
        let answer = try await json(
            ManifestBatchResult.self, "POST", "/v1/containers/\(container)/manifests",
            body: WireJSON.encode(ManifestBatchRequest(documents: wanted)))
        guard answer.manifests.count == wanted.count else {
            throw XferError(
                .internal, "the server answered \(answer.manifests.count) manifests for \(wanted.count) documents")
        }
        return answer.manifests
    }

    /// A document's newest state, or one version of it.
    public func stat(container: ContainerName, path: DocumentPath, version: Int64? = nil) async throws -> DocumentInfo {
        var route = "/v1/containers/\(container)/document?path=\(Self.escape(path.value))"
        if let version { route += "&version=\(version)" }
        return try await json(DocumentInfo.self, "GET", route)
    }

    /// One version of a document as the server keeps it, or `nil` if it keeps no such version
    /// (`not_found`); any other failure is thrown, never taken for an answer.
    public func statIfKept(container: ContainerName, path: DocumentPath, version: Int64) async throws -> DocumentInfo? {
        do {
            return try await stat(container: container, path: path, version: version)
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
    }

    /// Every version the server keeps of a document, newest first.
    public func versions(container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await json(VersionList.self, "GET", "/v1/containers/\(container)/versions?path=\(Self.escape(path.value))")
    }

    /// Settles a document's conflict: `keep` becomes current.
    public func resolve(container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        try await json(DocumentInfo.self, "POST", "/v1/containers/\(container)/resolve", body: WireJSON.encode(request))
    }

    /// Sets (or, with a `nil` value, deletes) a key-value entry; last writer wins.
    public func setValue(container: ContainerName, _ write: KeyValueWrite) async throws -> KeyValueWriteResult {
        try await json(KeyValueWriteResult.self, "PUT", "/v1/containers/\(container)/kv", body: WireJSON.encode(write))
    }

    /// Whether a container is end-to-end encrypted, and its wrapped key.
    public func containerKey(container: ContainerName) async throws -> ContainerKeyInfo {
        try await json(ContainerKeyInfo.self, "GET", "/v1/containers/\(container)/key")
    }

    /// Makes a container end-to-end encrypted, or replaces its wrapped key.
    public func setContainerKey(container: ContainerName, _ write: ContainerKeyWrite) async throws -> ContainerKeyInfo {
        try await json(ContainerKeyInfo.self, "PUT", "/v1/containers/\(container)/key", body: WireJSON.encode(write))
    }

    /// One key-value entry.
    public func value(container: ContainerName, key: String) async throws -> KeyValueEntry {
        try await json(KeyValueEntry.self, "GET", "/v1/containers/\(container)/kv?key=\(Self.escape(key))")
    }

    /// Every live key-value entry.
    public func values(container: ContainerName) async throws -> KeyValueList {
        try await json(KeyValueList.self, "GET", "/v1/containers/\(container)/kv")
    }

    /// Documents under a prefix.
    public func list(container: ContainerName, prefix: String) async throws -> DocumentList {
        var all = try await listPage(container: container, prefix: prefix, page: nil)
        var next = all.next
        while all.more {
            // A server that says "more" must move on: a repeated or missing token is refused,
            // so a listing is either complete or an error, never silently partial.
            guard let token = next else {
                throw XferError(.unavailable, "the server said more documents follow but gave no page token")
            }
            let page = try await listPage(container: container, prefix: prefix, page: token)
            guard
                page.documents.first.map({
                    $0.path.value.utf8.lexicographicallyPrecedes(token.utf8) == false && $0.path.value != token
                }) ?? true,
                !page.more || (page.next.map { $0 != token } ?? false)
            else {
                throw XferError(
                    .unavailable,
                    "the server's listing pages do not advance; the listing is incomplete, so nothing was decided from it"
                )
            }
            all.documents += page.documents
            all.more = page.more
            next = page.next
        }
        all.next = nil
        return all
    }

    /// One page of a listing (``list(container:prefix:)`` reads them all).
    /// - Parameter page: The previous page's `next`, or `nil` for the first.
    public func listPage(container: ContainerName, prefix: String, page: String?) async throws -> DocumentList {
        var route = "/v1/containers/\(container)/documents?prefix=\(Self.escape(prefix))"
        if let page { route += "&page=\(Self.escape(page))" }
        return try await json(DocumentList.self, "GET", route)
    }

    /// One page of a search (``DocumentQuery``), at most `limit` documents (the server may
    /// give fewer, and fewer than asked with `more` set when most of what it read did not match).
    /// - Parameter page: The previous page's `next`, or `nil` for the first.
    public func query(container: ContainerName, _ query: DocumentQuery, page: String?, limit: Int? = nil) async throws
        -> DocumentList
    {
        var items = query.parameters
        if let limit { items.append(("limit", String(limit))) }
        if let page { items.append(("page", page)) }
        let route =
            "/v1/containers/\(container)/query"
            + (items.isEmpty ? "" : "?" + items.map { "\($0.0)=\(Self.escape($0.1))" }.joined(separator: "&"))
        return try await json(DocumentList.self, "GET", route)
    }

    /// Deletes a document. `seal`: an end-to-end encrypted container's deletion seal
    /// (``EndToEndKeys/deletionSeal(of:at:)``), which such a container requires.
    public func delete(container: ContainerName, path: DocumentPath, baseVersion: Int64?, seal: String? = nil)
        async throws -> DocumentInfo
    {
        var route = "/v1/containers/\(container)/document?path=\(Self.escape(path.value))"
        if let baseVersion { route += "&base_version=\(baseVersion)" }
        if let seal { route += "&seal=\(seal)" }
        return try await json(DocumentInfo.self, "DELETE", route)
    }

    /// A manifest: the current version's (or `version`'s), as a delta against `base` when the
    /// server still has that version.
    /// - Returns: The delta bytes, the version they describe, the base they are against (or
    ///   `nil`: against nothing) and the full manifest's digest.
    public func manifest(container: ContainerName, path: DocumentPath, version: Int64?, base: Int64?) async throws
        -> (delta: SpillArray<UInt8>, version: Int64, base: Int64?, digest: ChunkID)
    {
        var route = "/v1/containers/\(container)/manifest?path=\(Self.escape(path.value))&compressed=1"
        if let version { route += "&version=\(version)" }
        if let base { route += "&base=\(base)" }
        let response = try await respond("GET", route) { try makeRequest("GET", route) }
        guard (200..<300).contains(response.status.code) else { throw try await Self.error(from: response) }
        // Read into a spilled array as it comes (a tree's delta is megabytes), at most the
        // largest a manifest may be.
        var body = SpillArray<UInt8>()
        try await reading {
            for try await part in response.body {
                guard body.count + part.readableBytes <= Manifest.maximumEncodedSize else {
                    throw XferError(
                        .tooLarge, "the server's manifest answer is over \(Manifest.maximumEncodedSize) bytes")
                }
                part.withUnsafeReadableBytes { body.append(contentsOf: $0) }
            }
        }
        guard let versionText = response.headers.first(name: XferHeader.version), let number = Int64(versionText),
            let digestText = response.headers.first(name: XferHeader.digest), let digest = ChunkID(hex: digestText)
        else {
            throw XferError(.internal, "the server's manifest answer lacks its version or digest headers")
        }
        let baseUsed = response.headers.first(name: XferHeader.base).flatMap { Int64($0) }
        return (body, number, baseUsed, digest)
    }

    /// Downloads chunks, handing each to `onChunk` as its frame arrives (not yet verified:
    /// the caller verifies).
    /// - Parameter against: Chunks this client holds, by wanted chunk, that the server may send
    ///   it against (``ChunkEncoding/zstdAgainst``); the caller decodes those with them.
    public func download(
        _ ids: [ChunkID], against: [ChunkID: ChunkID] = [:], onChunk: (EncodedChunk) async throws -> Void
    ) async throws {
        let body = WireJSON.encode(ChunkIDList(ids: ids, against: against))
        let response = try await respond("POST", "/v1/chunks/download", timeout: chunkTimeout) {
            var request = try makeRequest("POST", "/v1/chunks/download", body: body)
            request.headers.add(name: "Content-Type", value: "application/json")
            return request
        }
        guard response.status == .ok else { throw try await Self.error(from: response) }
        var decoder = ChunkFrameDecoder(limits: ChunkFrameLimits(maximumFrames: ids.count, maximumBodyLength: Int.max))
        var received = 0
        do {
            for try await buffer in response.body {
                // Under --bwlimit the next piece is read only when this one's turn has come.
                try await downloadLimit?.take(buffer.readableBytes)
                for chunk in try decoder.feed(buffer.readableBytesView) {
                    try await onChunk(chunk)
                    received += 1
                }
            }
        } catch let error as XferError {
            throw error
        } catch is CancellationError {
            throw XferError(.cancelled, "cancelled")
        } catch {
            // The stream broke mid-body (a reset, a truncation): what arrived whole was kept.
            throw XferError(
                .unavailable,
                "the connection to \(server) broke while downloading chunks; run the command again to resume",
                cause: DescribedError(error))
        }
        try decoder.finish()
        guard received == ids.count else {
            throw XferError(.internal, "the server sent \(received) of \(ids.count) chunks")
        }
    }

    /// Changes after a cursor, waiting up to `wait` seconds for one if there is none.
    public func changes(container: ContainerName, after: Int64, wait: Int = 0, limit: Int? = nil) async throws
        -> ChangeList
    {
        try await json(
            ChangeList.self, "GET",
            "/v1/containers/\(container)/changes?after=\(after)&wait=\(wait)\(limit.map { "&limit=\($0)" } ?? "")")
    }

    /// The container's change-feed position now: a feed read from it sees only what is still
    /// to come. 0 from a server that does not say (its feed is then read from the beginning).
    public func head(container: ContainerName) async throws -> Int64 {
        try await changes(container: container, after: 0, limit: 1).head ?? 0
    }

    // MARK: Plumbing

    /// A request's body: JSON made in memory, or bytes held in a ``SpillArray`` (a commit's
    /// manifest delta of many files).
    private typealias RequestBody = any RandomAccessCollection<UInt8> & Sendable

    private func json<T: Decodable>(
        _ type: T.Type, _ method: String, _ route: String, body: RequestBody? = nil,
        authenticated: Bool = true
    ) async throws -> T {
        let response = try await send(
            method, route, body: body, contentType: "application/json", authenticated: authenticated)
        do {
            return try WireJSON.decode(type, from: response.readableBytesView)
        } catch {
            throw XferError(
                .internal,
                "the server's answer to \(method) \(route.prefix(while: { $0 != "?" })) is not what this client expects; is it an xfer server of a compatible version?"
            )
        }
    }

    private func send(
        _ method: String, _ route: String, body: RequestBody? = nil, contentType: String? = nil,
        authenticated: Bool = true
    ) async throws -> ByteBuffer {
        try await sendWithHeaders(method, route, body: body, contentType: contentType, authenticated: authenticated).1
    }

    private func sendWithHeaders(
        _ method: String, _ route: String, body: RequestBody? = nil, contentType: String? = nil,
        authenticated: Bool = true, limit: Int = 64 << 20
    ) async throws -> (HTTPClientResponse, ByteBuffer) {
        let response = try await respond(method, route) {
            var request = try makeRequest(method, route, body: body, authenticated: authenticated)
            if let contentType, body != nil { request.headers.add(name: "Content-Type", value: contentType) }
            return request
        }
        return try await answer(response, limit: limit)
    }

    /// Reads a response's whole answer (at most `limit` bytes); an error status is thrown as its xfer error.
    private func answer(_ response: HTTPClientResponse, limit: Int = 64 << 20) async throws -> (
        HTTPClientResponse, ByteBuffer
    ) {
        guard (200..<300).contains(response.status.code) else { throw try await Self.error(from: response) }
        return (response, try await reading { try await response.body.collect(upTo: limit) })
    }

    /// Sends the request `make` makes (made anew for each try) and returns its answer's head,
    /// sending it again as ``retry`` says: after a 429 or 503 (waiting what `Retry-After`
    /// asks), a server not reached, or, for a request ``isIdempotent(method:route:)``, a broken
    /// connection or another 5xx. The last answer or error is the caller's.
    private func respond(
        _ method: String, _ route: String, timeout: TimeAmount? = nil,
        _ make: () throws -> HTTPClientRequest
    ) async throws -> HTTPClientResponse {
        let idempotent = Self.isIdempotent(method: method, route: route)
        var attempt = 0
        while true {
            var retryAfter: Duration? = nil
            do {
                let response = try await execute(try make(), timeout: timeout)
                let code = Int(response.status.code)
                guard code >= 500 || code == 429, attempt < retry.retries,
                    RetryPolicy.isTransient(status: code, sent: true, idempotent: idempotent)
                else { return response }
                // The error body, read so the connection is used again.
                _ = try? await response.body.collect(upTo: 1 << 20)
                retryAfter = RetryPolicy.retryAfter(response.headers.first(name: "Retry-After"))
            } catch let error as XferError where error.code == .unavailable && !(error.cause is Untrusted) {
                guard attempt < retry.retries,
                    RetryPolicy.isTransient(status: nil, sent: !(error.cause is Unreached), idempotent: idempotent)
                else { throw error }
            }
            attempt += 1
            let wait = retry.delay(attempt: attempt, retryAfter: retryAfter)
            logger.info(
                "sending again",
                metadata: [
                    "request": "\(method) \(route.prefix { $0 != "?" })",
                    "try": "\(attempt + 1) of \(retry.retries + 1)",
                    "after": "\(wait)", "server_asked": "\(retryAfter != nil)"
                ])
            do {
                try await Task.sleep(for: wait)
            } catch {
                throw XferError(.cancelled, "cancelled")
            }
        }
    }

    /// Whether sending the request twice does what sending it once does: every GET, and the
    /// POSTs that read (`chunks/missing`, `chunks/download`, `manifests`) or store chunks by
    /// their content (`chunks`). A commit, a deletion, a resolve or an admin request is not:
    /// the first may have been done.
    static func isIdempotent(method: String, route: String) -> Bool {
        if method == "GET" || method == "HEAD" { return true }
        let path = route.prefix { $0 != "?" }
        guard method == "POST" else { return false }
        return ["/v1/chunks", "/v1/chunks/missing", "/v1/chunks/download"].contains(path)
            || (path.hasPrefix("/v1/containers/") && path.hasSuffix("/manifests"))
    }

    /// The cause of an `unavailable` error for a server whose certificate is not trusted: trying
    /// again changes nothing.
    struct Untrusted: Error, Sendable, CustomStringConvertible {
        var underlying: DescribedError
        var description: String { underlying.description }
    }

    /// The cause of an `unavailable` error when the server was never reached: nothing was sent.
    struct Unreached: Error, Sendable, CustomStringConvertible {
        var underlying: DescribedError
        var description: String { underlying.description }
    }

    /// `body`, reading an answer: a broken connection is `unavailable`; xfer errors pass as they are.
    private func reading<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(
                .unavailable, "the connection to \(server) broke while reading the answer", cause: DescribedError(error)
            )
        }
    }

    private func makeRequest(_ method: String, _ route: String, body: RequestBody? = nil, authenticated: Bool = true)
        throws -> HTTPClientRequest
    {
        var request = HTTPClientRequest(url: server + route)
        request.method = HTTPMethod(rawValue: method)
        if authenticated { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.headers.add(name: "User-Agent", value: "xfer/\(XferVersion.current)")
        // Turned into buffers a few megabytes at a time as it is sent, not copied whole first.
        if let body { request.body = .bytes(body) }
        return request
    }

    /// The HTTP client's own log: its connection events at -vv (trace), capped at debug, since
    /// at trace it prints the bytes of each answer's parts, a new token's among them.
    private var httpLogger: Logger {
        guard logger.logLevel == .trace else { return Self.silent }
        var capped = logger
        capped.logLevel = .debug
        return capped
    }

    /// The deadline of a request carrying chunk data: under a bandwidth limit, the body itself
    /// may take long, so only the server's and the client's idle timeouts bound it.
    private var chunkTimeout: TimeAmount { uploadLimit == nil ? timeout : .hours(24) }

    private func execute(_ request: HTTPClientRequest, timeout: TimeAmount? = nil) async throws -> HTTPClientResponse {
        let timeout = timeout ?? self.timeout
        let started = ContinuousClock.now
        let what = "\(request.method.rawValue) \(request.url.dropFirst(server.count).prefix { $0 != "?" })"
        do {
            let response = try await client.execute(request, timeout: timeout, logger: httpLogger)
            logger.debug(
                "answered",
                metadata: [
                    "request": "\(what)", "status": "\(response.status.code)",
                    "ms": "\(Int((ContinuousClock.now - started).seconds * 1000))"
                ])
            return response
        } catch let error as XferError {
            throw error  // from a body made while it is sent (upload(pieces:))
        } catch let error as HTTPClientError where error == .cancelled {
            throw XferError(.cancelled, "cancelled")
        } catch is CancellationError {
            throw XferError(.cancelled, "cancelled")
        } catch let error where error is NIOSSLError || error is NIOSSLExtraError || "\(error)".contains("certificate")
        {
            throw XferError(
                .unavailable,
                "the TLS certificate of \(server) is not trusted or does not name it; give the CA that signed it with --ca FILE (or XFER_CA)",
                cause: Untrusted(underlying: DescribedError(error)))
        } catch {
            logger.debug(
                "failed",
                metadata: [
                    "request": "\(what)", "error": "\(error)",
                    "ms": "\(Int((ContinuousClock.now - started).seconds * 1000))"
                ])
            throw XferError(
                .unavailable,
                "cannot reach the xfer server at \(server); is `xfer serve` running there, and is --server right?",
                cause: Self.neverSent(error) ? Unreached(underlying: DescribedError(error)) : DescribedError(error))
        }
    }

    /// Whether a transport error came before any byte of the request could leave: the
    /// connection refused, or not made in time.
    static func neverSent(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError, error == .connectTimeout { return true }
        if error is NIOConnectionError { return true }
        if let error = error as? ChannelError, case .connectTimeout = error { return true }
        if let error = error as? IOError, [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH].contains(error.errnoCode) {
            return true
        }
        return false
    }

    private static func error(from response: HTTPClientResponse) async throws -> XferError {
        let body = try? await response.body.collect(upTo: 1 << 20)
        guard let body, let decoded = try? WireJSON.decode(ErrorBody.self, from: body.readableBytesView) else {
            return XferError(
                .internal,
                "the server answered \(response.status.code) \(response.status.reasonPhrase) without an xfer error body"
            )
        }
        return decoded.error.xferError
    }

    private static func escape(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
