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
        v1.put("containers/:container/key", use: scoped(.write, setContainerKey))
    }

    typealias Handler = @Sendable (Request, XferRequestContext) async throws -> Response

    /// `handler` for an account's token whose scope allows `access` to the container the path
    /// names (or to the account's chunks, for a path that names none).
    func scoped(_ access: Principal.Access, _ handler: @escaping Handler) -> Handler {
        { request, context in
            let principal = try context.requireAccount()
            let container = try context.parameters.get("container").map { try ContainerName($0) }
            try principal.check(access, container: container)
            return try await handler(request, context)
        }
    }

    // MARK: Metrics

    /// `GET /metrics`: the Prometheus text format (``ServerMetrics``), for the admin token only
    /// (Prometheus sends it with `authorization: credentials_file: DIR/admin-token`).
    @Sendable func metrics(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard let principal = try await Credentials.principal(request.headers[.authorization], metadata),
            principal.isAdmin
        else {
            throw XferError(
                .unauthorized, "metrics need the admin token (DIR/admin-token): send Authorization: Bearer TOKEN")
        }
        let text = try await ServerMetrics.process.scrape(metadata)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }

    // MARK: Accounts

    @Sendable func createAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "creating accounts")
        let body = try await Self.decode(CreateAccountRequest.self, request)
        let quota = body.quota ?? limits.defaultQuota
        guard quota >= 0 else { throw XferError(.badRequest, "quota must not be negative") }
        let token = TokenHash.generate()
        var info = try await metadata.createAccount(
            name: try AccountName(body.name), quota: quota, tokenHash: TokenHash.hash(token))
        info.token = token
        return Self.json(info, status: .created)
    }

    @Sendable func listAccounts(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "listing accounts")
        return Self.json(AccountList(accounts: try await metadata.accountSummaries(named: nil)))
    }

    @Sendable func showAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "showing accounts")
        let name = try AccountName(context.parameters.get("name") ?? "")
        return Self.json(try await metadata.accountSummaries(named: name)[0])
    }

    @Sendable func setQuota(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "setting quotas")
        let name = try AccountName(context.parameters.get("name") ?? "")
        let body = try await Self.decode(SetQuotaRequest.self, request)
        return Self.json(try await metadata.setQuota(account: name, quota: body.quota))
    }

    /// `DELETE /v1/admin/accounts/NAME[?dry_run=1]`.
    @Sendable func deleteAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "deleting accounts")
        let name = try AccountName(context.parameters.get("name") ?? "")
        let dryRun = ["1", "true"].contains(request.uri.queryParameters.get("dry_run").map { String($0) } ?? "")
        return Self.json(try await metadata.deleteAccount(name, dryRun: dryRun))
    }

    @Sendable func newToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "issuing tokens")
        let body = try await Self.decode(NewTokenRequest.self, request)
        return Self.json(try await metadata.issueToken(account: body.account, terms: body.terms), status: .created)
    }

    /// `GET /v1/admin/accounts/NAME/tokens`.
    @Sendable func accountTokens(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "listing tokens")
        let name = try AccountName(context.parameters.get("name") ?? "")
        return Self.json(TokenList(tokens: try await metadata.tokens(account: name)))
    }

    // MARK: An account's own tokens

    /// Managing an account's tokens (issuing, listing, revoking another) takes a token of full
    /// scope: a narrower one could otherwise widen itself.
    private static func requireFullScope(_ principal: Principal, _ what: String) throws {
        guard principal.scope.isFull else {
            throw XferError(.forbidden, "\(what) needs a token of full scope; this one is \(principal.scope)")
        }
    }

    /// `GET /v1/tokens`: the account's tokens, the asking one marked `current`.
    @Sendable func ownTokens(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        try Self.requireFullScope(principal, "listing the account's tokens")
        let current = context.tokenKey.map(TokenHash.publicID(ofHash:))
        let tokens = try await metadata.tokens(account: try AccountName(principal.name)).map { token -> TokenSummary in
            var token = token
            token.current = token.id == current
            return token
        }
        return Self.json(TokenList(tokens: tokens))
    }

    /// `POST /v1/tokens`: another token of the asking account (a device's, `xfer login`).
    @Sendable func issueOwnToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        try Self.requireFullScope(principal, "issuing tokens")
        let terms = try await Self.decode(TokenTerms.self, request)
        // No later than the asking token's own expiry (the store clamps it in its transaction).
        return Self.json(
            try await metadata.issueToken(account: principal.name, terms: terms, notAfter: principal.expiresAt),
            status: .created)
    }

    /// `POST /v1/tokens/revoke`: one of the account's tokens, by the token itself (any token may
    /// revoke itself: `xfer logout`) or by its id (with a token of full scope).
    @Sendable func revokeOwnToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        let body = try await Self.decode(RevokeTokenRequest.self, request)
        let account = try AccountName(principal.name)
        switch (body.token, body.id, body.account) {
        case (let token?, nil, nil):
            let hash = TokenHash.hash(token)
            if let key = context.tokenKey, TokenHash.equal(key, hash) {
                return Self.json(RevokeTokenResult(revoked: try await metadata.revokeToken(hash: hash) ? 1 : 0))
            }
            try Self.requireFullScope(principal, "revoking another token")
            guard let owner = try await metadata.principal(tokenHash: hash), !owner.isAdmin,
                owner.accountID == principal.accountID
            else {
                return Self.json(RevokeTokenResult(revoked: 0))
            }
            return Self.json(RevokeTokenResult(revoked: try await metadata.revokeToken(hash: hash) ? 1 : 0))
        case (nil, let id?, nil):
            try Self.requireFullScope(principal, "revoking another token")
            return Self.json(
                RevokeTokenResult(
                    revoked: try await metadata.revokeToken(id: try TokenHash.publicID(id), account: account) ? 1 : 0))
        default:
            throw XferError(.badRequest, "give one of \"token\" (a token of this account) or \"id\" (one by its id)")
        }
    }

    @Sendable func revokeToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "revoking tokens")
        return Self.json(try await metadata.revoke(try await Self.decode(RevokeTokenRequest.self, request)))
    }

    @Sendable func collectGarbage(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "garbage collection")
        let body = try await Self.decode(GarbageRequest.self, request)
        let grace = body.graceSeconds ?? Maintenance.defaultGrace
        guard grace >= 0 else { throw XferError(.badRequest, "grace_seconds must not be negative") }
        let report = try await Maintenance(metadata: metadata, chunks: chunks).collectGarbage(
            grace: grace, dryRun: body.dryRun ?? false)
        if !(body.dryRun ?? false) {
            ServerMetrics.process.gcRuns.increment()
            ServerMetrics.process.gcChunksRemoved.increment(by: Int64(report.chunksRemoved))
            ServerMetrics.process.gcBytesFreed.increment(by: report.packBytesFreed)
        }
        return Self.json(report)
    }

    @Sendable func verify(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "verification")
        let report = try await Maintenance(metadata: metadata, chunks: chunks).verify()
        ServerMetrics.process.verifyRuns.increment()
        ServerMetrics.process.verifyDamaged.set(Int64(report.problemCount))
        return Self.json(report)
    }

    private static func requireAdmin(_ context: XferRequestContext, _ what: String) throws {
        guard try context.requirePrincipal().isAdmin else {
            throw XferError(.forbidden, "\(what) needs the admin token (DIR/admin-token on the server)")
        }
    }

    @Sendable func account(_ request: Request, context: XferRequestContext) async throws -> Response {
        Self.json(try await metadata.account(try context.requireAccount().accountID))
    }

    // MARK: Chunks

    @Sendable func missing(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let ids = try await Self.decode(ChunkIDList.self, request).parsed()
        try Self.checkCount(ids.count)
        return Self.json(ChunkIDList(ids: try await metadata.missingChunks(account: account.accountID, ids: ids)))
    }

    /// `POST /v1/chunks`: one of the token's uploads at once (``TokenLimiter``).
    @Sendable func upload(_ request: Request, context: XferRequestContext) async throws -> Response {
        try await limiter.upload(context.tokenKey) { try await storeChunks(request, context: context) }
    }

    func storeChunks(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        // The store's time when the request was authenticated, before anything was stored: a
        // chunk deleted by gc after this is not recorded.
        let startedAt = account.authenticatedAt
        var decoder = ChunkFrameDecoder(limits: limits.uploadFrames)
        var received = 0
        var stored = 0
        var storedBytes: Int64 = 0
        var pending: [EncodedChunk] = []
        var pendingBytes = 0
        var unresolved: [ChunkID] = []
        let against = ChunksAgainst(metadata: metadata, chunks: chunks, maximumLength: limits.frames.maximumChunkLength)
        let intake = ChunkIntake(metadata: metadata, chunks: chunks, quota: quota)
        func flush() async throws {
            guard !pending.isEmpty else { return }
            // Chunks sent against a reference are rebuilt into their stored form first.
            let (batch, left) = try await against.rebuild(pending, account: account.accountID)
            unresolved += left
            pending = []
            pendingBytes = 0
            let added = try await intake.store(batch, account: account.accountID, startedAt: startedAt)
            stored += added.count
            storedBytes += added.bytes
        }
        for try await buffer in request.body {
            ServerMetrics.process.bytesIn.increment(by: Int64(buffer.readableBytes))
            let frames = try decoder.feed(buffer.readableBytesView)
            received += frames.count
            ServerMetrics.process.chunksReceived.increment(by: Int64(frames.count))
            for frame in frames {
                if frame.encoding == .zstdAgainst && !limits.features.contains(.chunksAgainst) {
                    throw XferError(
                        .badRequest,
                        "chunk \(frame.id) is sent against another chunk (encoding 2), which this server does not offer; send it whole"
                    )
                }
                if frame.encoding == .sealed && !limits.features.contains(.sealedChunks) {
                    throw XferError(
                        .badRequest,
                        "chunk \(frame.id) is sealed end to end (encoding 3), which this server does not offer")
                }
                pending.append(frame)
                pendingBytes += frame.payload.count
            }
            if pendingBytes >= 8 << 20 { try await flush() }
        }
        try decoder.finish()
        try await flush()
        return Self.json(
            UploadResult(received: received, stored: stored, storedBytes: storedBytes, unresolved: unresolved))
    }

    @Sendable func download(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let list = try await Self.decode(ChunkIDList.self, request)
        let ids = try list.parsed()
        try Self.checkCount(ids.count)
        let absent = try await metadata.missingChunks(account: account.accountID, ids: ids)
        guard absent.isEmpty else {
            throw XferError(
                .notFound,
                "\(absent.count) of the requested chunks are not stored for this account (first: \(absent[0]))")
        }
        let chunks = chunks
        let against = ChunksAgainst(metadata: metadata, chunks: chunks, maximumLength: limits.frames.maximumChunkLength)
        // Offers are ignored (every chunk goes as stored) when this server does not offer the feature.
        let references =
            limits.features.contains(.chunksAgainst)
            ? try await against.usable(list.parsedAgainst(ids: ids), account: account.accountID) : [:]
        return Response(
            status: .ok, headers: [.contentType: "application/octet-stream"],
            body: ResponseBody { writer in
                try await writer.write(ByteBuffer(bytes: ChunkFrames.magic))
                // Batches of loads run ahead of the writer (an object store answers each request in
                // a round trip), and frames go out in the order asked; at most readAhead × readBatch
                // chunks wait in memory.
                let size = max(1, chunks.readBatch)
                let batches = stride(from: 0, to: ids.count, by: size).map {
                    Array(ids[$0..<min($0 + size, ids.count)])
                }
                let window = max(1, chunks.readAhead)
                try await withThrowingTaskGroup(of: (Int, [EncodedChunk]).self) { group in
                    var started = 0
                    var written = 0
                    var ready: [Int: [EncodedChunk]] = [:]
                    func start() {
                        let index = started
                        group.addTask { (index, try await chunks.load(batches[index])) }
                        started += 1
                    }
                    while started < min(window, batches.count) { start() }
                    while written < batches.count, let (index, loaded) = try await group.next() {
                        ready[index] = loaded
                        while let next = ready.removeValue(forKey: written) {
                            var sent: [EncodedChunk] = []
                            sent.reserveCapacity(next.count)
                            for chunk in next {
                                sent.append(try await against.forDownload(chunk, against: references[chunk.id]))
                            }
                            // Each frame written once, into a buffer of the batch's size.
                            var frames = ByteBufferAllocator().buffer(
                                capacity: sent.reduce(0) { $0 + ChunkFrames.frameHeaderSize + $1.payload.count })
                            for chunk in sent {
                                ChunkFrames.withHeader(of: chunk) { frames.writeBytes($0) }
                                frames.writeBytes(chunk.payload)
                            }
                            ServerMetrics.process.bytesOut.increment(by: Int64(frames.readableBytes))
                            try await writer.write(frames)
                            written += 1
                            if started < batches.count { start() }
                        }
                    }
                }
                try await writer.finish(nil)
            })
    }

    // MARK: Documents

    @Sendable func announce(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        var body = try await Self.decode(AnnounceRequest.self, request)
        body.device = account.device(claimed: body.device)
        let info = try await metadata.announce(account: account.accountID, container: container, body)
        changes.notify(account: account.accountID, container: container)
        return Self.json(info, status: .created)
    }

    @Sendable func commit(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(CommitRequest.self, request)
        guard let digest = ChunkID(hex: body.manifestDigest) else {
            throw XferError(.badRequest, "manifest_digest is not 64 hex digits")
        }
        var base: Manifest? = nil
        if let deltaBase = body.deltaBase {
            let stored = try await metadata.manifest(
                account: account.accountID, container: container, path: body.path, version: deltaBase)
            base = try Manifest(decoding: stored.manifest)
        }
        let delta = try Base64.decode(body.manifestDelta)
        if Manifest.isCompressedDelta(delta) && !limits.features.contains(.compressedManifests) {
            throw XferError(
                .invalidManifest,
                "the manifest delta is compressed (XFDZ), which this server does not offer; send it plain")
        }
        let manifest = try Manifest(applying: delta, to: base)
        let encoded = manifest.encoded()
        guard ChunkID.of(encoded) == digest else {
            throw XferError(
                .invalidManifest, "the manifest rebuilt from the delta has digest \(ChunkID.of(encoded)), not \(digest)"
            )
        }
        let info = try await metadata.commit(
            account: account.accountID, container: container, path: body.path,
            version: body.version, baseVersion: body.baseVersion, manifest: manifest, encoded: encoded)
        ServerMetrics.process.counted(info)
        changes.notify(account: account.accountID, container: container)
        return Self.json(info)
    }

    @Sendable func commitBatch(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(BatchCommitRequest.self, request)
        // Each document is checked on its own: one bad manifest fails that document only.
        var outcomes = [BatchCommitResult.Outcome?](repeating: nil, count: body.documents.count)
        var valid: [(index: Int, commit: DirectCommitItem)] = []
        for (index, document) in body.documents.enumerated() {
            do {
                guard let digest = ChunkID(hex: document.manifestDigest) else {
                    throw XferError(.badRequest, "\(document.path): manifest_digest is not 64 hex digits")
                }
                let manifest = try Manifest(decoding: try Base64.decode(document.manifest))
                let encoded = manifest.encoded()
                guard ChunkID.of(encoded) == digest else {
                    throw XferError(
                        .invalidManifest,
                        "\(document.path): the manifest has digest \(ChunkID.of(encoded)), not \(digest)")
                }
                guard DocumentKind(manifest.kind) == document.kind else {
                    throw XferError(
                        .invalidManifest,
                        "\(document.path): a \(document.kind.rawValue) document with a \(manifest.kind) manifest")
                }
                var announce = document.announcement
                announce.device = account.device(claimed: announce.device)
                valid.append(
                    (
                        index,
                        DirectCommitItem(
                            announce: announce, manifest: manifest, encoded: encoded, version: document.version)
                    ))
            } catch {
                outcomes[index] = BatchCommitResult.Outcome(error: ErrorMiddleware.body(for: error).error)
            }
        }
        if !valid.isEmpty {
            let results = try await metadata.commitDirect(
                account: account.accountID, container: container, valid.map(\.commit))
            for (item, result) in zip(valid, results) {
                switch result {
                case .success(let info):
                    ServerMetrics.process.counted(info)
                    outcomes[item.index] = BatchCommitResult.Outcome(document: info)
                case .failure(let error):
                    outcomes[item.index] = BatchCommitResult.Outcome(error: ErrorMiddleware.body(for: error).error)
                }
            }
            changes.notify(account: account.accountID, container: container)
        }
        return Self.json(BatchCommitResult(results: outcomes.map { $0! }))
    }

    @Sendable func manifestBatch(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(ManifestBatchRequest.self, request)
        // The answer is bounded: past the budget every later document answers `too_large`
        // unread, so one request loads at most one manifest it does not send. All are read in
        // one transaction (on PostgreSQL, 500 transactions of their own took 1.9 s).
        let reads = try await metadata.manifests(
            account: account.accountID, container: container,
            body.documents.map { ($0.path, $0.version) }, budget: ProtocolLimits.maximumBatchBody)
        let items = zip(body.documents, reads).map { wanted, read -> ManifestBatchResult.Item in
            switch read {
            case .manifest(let info, let manifest):
                ManifestBatchResult.Item(document: info, manifest: Base64.encode(manifest))
            case .failed(let error): ManifestBatchResult.Item(error: ErrorMiddleware.body(for: error).error)
            case .overBudget:
                ManifestBatchResult.Item(error: ErrorMiddleware.body(for: Self.overBudget(wanted.path)).error)
            }
        }
        return Self.json(ManifestBatchResult(manifests: items))
    }

    private static func overBudget(_ path: DocumentPath) -> XferError {
        XferError(
            .tooLarge,
            "\(path): the answer is full (\(ByteCount(Int64(ProtocolLimits.maximumBatchBody))) of manifests); ask for it alone"
        )
    }

    @Sendable func list(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let prefix = request.uri.queryParameters.get("prefix").map { String($0) } ?? ""
        guard prefix.utf8.count <= DocumentPathRules.maximumPathBytes, !prefix.utf8.contains(0) else {
            throw XferError(.invalidPath, "prefix is too long or contains NUL")
        }
        let limit = try Self.intParameter(
            request, "limit", default: ProtocolLimits.maximumListCount, range: 1...ProtocolLimits.maximumListCount)
        let page = request.uri.queryParameters.get("page").map { String($0) }
        guard (page?.utf8.count ?? 0) <= DocumentPathRules.maximumPathBytes else {
            throw XferError(.badRequest, "page is not a token this server gave")
        }
        var list = try await metadata.list(
            account: account.accountID, container: try Self.container(context),
            prefix: prefix.precomposedStringWithCanonicalMapping, after: page,
            limit: min(limit, limits.listPage))
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    /// `GET /v1/containers/{c}/query`: one page of a search (``DocumentQuery``'s parameters,
    /// `limit`, `page`).
    @Sendable func query(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        guard limits.features.contains(.documentQuery) else {
            throw XferError(
                .notFound,
                "this server answers no queries (started with --without-feature \(ServerFeature.documentQuery.rawValue))"
            )
        }
        let container = try Self.container(context)
        let parameters = request.uri.queryParameters
        let query = try DocumentQuery(parameter: { key in parameters.get(key).map { String($0) } })
        if query.name != nil || query.sort == .name,
            try await metadata.containerKey(account: account.accountID, container: container) != nil
        {
            throw XferError(
                .badRequest,
                "container \(container) is end-to-end encrypted: the server holds only sealed names, so names are matched on a device that holds the key (xfer find does this)"
            )
        }
        let limit = try Self.intParameter(
            request, "limit", default: ProtocolLimits.maximumListCount, range: 1...ProtocolLimits.maximumListCount)
        let page = parameters.get("page").map { String($0) }
        var list = try await metadata.query(
            account: account.accountID, container: container, query, after: page,
            limit: min(limit, limits.listPage))
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    @Sendable func stat(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        return Self.json(
            try await metadata.document(
                account: account.accountID, container: try Self.container(context),
                path: try Self.path(request), version: try Self.optionalInt(request, "version")))
    }

    @Sendable func delete(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let base = try Self.optionalInt(request, "base_version")
        let seal = request.uri.queryParameters.get("seal")
        // End to end, a device removes its copy only for a deletion another device sealed: one
        // without a seal would stay on every device, so none is taken.
        if try await metadata.containerKey(account: account.accountID, container: container) != nil {
            guard let seal, seal.utf8.count == 64,
                seal.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }), base != nil
            else {
                throw XferError(
                    .encryptedContainer,
                    "a deletion in an end-to-end encrypted container names its base version and carries its seal (64 hex digits); update xfer"
                )
            }
        }
        let info = try await metadata.delete(
            account: account.accountID, container: container, path: try Self.path(request), baseVersion: base,
            seal: seal)
        changes.notify(account: account.accountID, container: container)
        return Self.json(info)
    }

    @Sendable func manifest(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let path = try Self.path(request)
        let stored = try await metadata.manifest(
            account: account.accountID, container: container, path: path,
            version: try Self.optionalInt(request, "version"))
        var headers: HTTPFields = [.contentType: "application/octet-stream"]
        headers[HTTPField.Name(XferHeader.version)!] = String(stored.info.version)
        headers[HTTPField.Name(XferHeader.digest)!] = stored.info.manifestDigest
        let manifest = try Manifest(decoding: stored.manifest)
        var base: Manifest? = nil
        if let baseVersion = try Self.optionalInt(request, "base"),
            let known = try? await metadata.manifest(
                account: account.accountID, container: container, path: path, version: baseVersion)
        {
            base = try Manifest(decoding: known.manifest)
            headers[HTTPField.Name(XferHeader.base)!] = String(baseVersion)
        }
        // A client that reads compressed deltas says so (`compressed=1`); others get the plain form.
        let delta =
            request.uri.queryParameters.get("compressed") == "1" && limits.features.contains(.compressedManifests)
            ? manifest.compressedDelta(against: base) : SpillArray(manifest.delta(against: base))
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: delta)))
    }

    @Sendable func changeList(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let after = try Self.optionalInt(request, "after") ?? 0
        let limit = try Self.intParameter(request, "limit", default: 1000, range: 1...ProtocolLimits.maximumListCount)
        let wait = min(
            limits.maximumWait,
            try Self.intParameter(request, "wait", default: 0, range: 0...ProtocolLimits.maximumWaitSeconds))
        var list = try await metadata.changes(
            account: account.accountID, container: container, after: after, limit: limit)
        if list.changes.isEmpty && list.keys.isEmpty && wait > 0 {
            // Long poll: wake on the next change to this container, or give up after `wait` seconds.
            // An account may park only so many (clients back off on `unavailable` and retry).
            let cap = limits.maximumWaitingPollsPerAccount
            guard changes.polls.enter(account.accountID, limit: cap) else {
                throw XferError(
                    .unavailable,
                    "this account already has \(cap) change-feed requests waiting, the server's limit; retry later or ask without wait"
                )
            }
            defer { changes.polls.leave(account.accountID) }
            // A server told to stop answers its waiting polls at once (what changed so far, so
            // the client resumes from there), rather than draining them for up to `wait` seconds;
            // a client that has gone stops the wait, and its slot is given back, at once.
            let presence = await context.presence()
            let present = await ClientPresence.run(until: presence) {
                await withGracefulShutdownHandler {
                    await changes.wait(account: account.accountID, container: container, seconds: wait) {
                        guard
                            let page = try? await metadata.changes(
                                account: account.accountID, container: container, after: after, limit: 1)
                        else {
                            return false
                        }
                        return !page.changes.isEmpty || !page.keys.isEmpty
                    }
                } onGracefulShutdown: { [changes] in
                    changes.drain()
                }
            }
            if present {
                list = try await metadata.changes(
                    account: account.accountID, container: container, after: after, limit: limit)
            }
        }
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    @Sendable func versions(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        return Self.json(
            try await metadata.versions(
                account: account.accountID, container: try Self.container(context),
                path: try Self.path(request)))
    }

    @Sendable func resolve(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(ResolveRequest.self, request)
        let info = try await metadata.resolve(account: account.accountID, container: container, body)
        changes.notify(account: account.accountID, container: container)
        return Self.json(info)
    }

    // MARK: Key-value store

    @Sendable func keyValues(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        if let key = request.uri.queryParameters.get("key") {
            return Self.json(
                try await metadata.value(account: account.accountID, container: container, key: String(key)))
        }
        return Self.json(try await metadata.values(account: account.accountID, container: container))
    }

    @Sendable func setKeyValue(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        // The body's device stays as sent: in an end-to-end encrypted container it is sealed
        // inside the value too, and a reader checks that the two agree.
        let body = try await Self.decode(KeyValueWrite.self, request, limit: limits.maximumKeyValueBody)
        let result = try await metadata.setValue(account: account.accountID, container: container, body)
        if result.applied { changes.notify(account: account.accountID, container: container) }
        return Self.json(result)
    }

    // MARK: End-to-end encrypted containers

    @Sendable func containerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        return Self.json(
            Self.keyInfo(
                try await metadata.containerKey(account: account.accountID, container: try Self.container(context))))
    }

    static func keyInfo(_ kept: (wrapped: [UInt8], keyID: String)?) -> ContainerKeyInfo {
        ContainerKeyInfo(
            encrypted: kept != nil, wrapped: kept.map { Data($0.wrapped).base64EncodedString() }, keyID: kept?.keyID)
    }

    @Sendable func setContainerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(ContainerKeyWrite.self, request)
        try await metadata.setContainerKey(
            account: account.accountID, container: container, wrapped: try body.wrappedBytes(),
            previous: try body.previousBytes(), keyID: body.keyID)
        return Self.json(
            Self.keyInfo(try await metadata.containerKey(account: account.accountID, container: container)))
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

    static func container(_ context: XferRequestContext) throws -> ContainerName {
        try ContainerName(context.parameters.get("container") ?? "")
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

/// Remembers a store's deployment identity after the first read.
final class DeploymentCache: Sendable {
    private let cached = Mutex<String?>(nil)

    /// The identity, read from `store` the first time.
    func value(from store: any MetadataStore) async throws -> String {
        if let known = cached.withLock({ $0 }) { return known }
        let read = try await store.deploymentID()
        cached.withLock { $0 = read }
        return read
    }
}
