import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import ServiceLifecycle
import XferCore
import XferProtocol

/// Limits the server enforces.
public struct ServerLimits: Sendable, Hashable {
    /// Frames of one upload body.
    public var frames = ChunkFrameLimits()
    /// Quota of a new account when none is given: 5 GiB.
    public var defaultQuota: Int64 = 5 << 30
    /// Longest long poll of the change feed, in seconds (a request asking more waits this long).
    public var maximumWait = ProtocolLimits.maximumWaitSeconds
    /// Most documents in one page of a listing (clients page on to the end).
    public var listPage = ProtocolLimits.maximumListCount
    /// Long polls one account may have waiting at once; one more is answered 503 `unavailable`
    /// at once (clients back off and retry).
    public var maximumWaitingPollsPerAccount = 32
    /// How often an idle web view event stream gets a comment, so proxies keep it open.
    public var eventStreamKeepAlive: Duration = .seconds(20)
    /// Bytes of a key-value write's JSON body (``keyValueBody(storeBytes:)`` of the store's limit).
    public var maximumKeyValueBody = ServerLimits.keyValueBody(storeBytes: StorePolicy().keyValueMaximumBytes)

    /// A connection is closed after this long without a complete request head or, between
    /// requests, without a new one (a half-sent header, an idle keep-alive socket, a TLS
    /// handshake that never ends). A response being written is never cut. Longer than the
    /// 30 s xfer's client keeps an idle pooled connection, so the server never closes one
    /// just as the client reuses it.
    public var idleTimeout: Duration = .seconds(45)
    /// The minimum rate of a request body: at least this many bytes ...
    public var minimumBodyBytes = 4096
    /// ... in this much time spent waiting on the client (``BodyRate``); a slower upload is closed.
    public var bodyRateWindow: Duration = .seconds(20)
    /// Open connections from one client address; more are closed at once. (One device uses a
    /// handful; an office behind one NAT address, many.)
    public var maximumConnectionsPerAddress = 256
    /// Open connections in all (``ConnectionGuard/connectionCap(descriptorLimit:)`` of the
    /// descriptor limit; `xfer serve` sets it from `RLIMIT_NOFILE`).
    public var maximumConnections = ConnectionGuard.connectionCap(descriptorLimit: 1024)
    /// What one token may ask: requests a second and uploads at once (``TokenLimiter``).
    public var tokens = TokenLimits()

    /// The optional protocol parts the health check names (``ServerFeature``); clients use
    /// only those. Every one by default. When several servers share a store behind one
    /// address, a newer one leaves out what the older ones lack until all are upgraded, so no
    /// client sends one of them what it cannot read (`xfer serve --without-feature NAME`).
    public var features = Set(ServerFeature.allCases)

    /// Where subscription webhooks may be delivered (``WebhookDestinations``): public addresses by default.
    public var webhooks = WebhookDestinations.public

    /// How long a web view session lasts after signing in.
    public var webSessionLifetime: Duration = .seconds(12 * 3600)
    /// Session cookies are marked `Secure` (sent over HTTPS only): set when the server serves TLS.
    public var secureCookies = false

    /// The frame limits of an upload body: ``frames``, with ``ChunkFrameLimits/largeUploadFrames``
    /// where ``ServerFeature/largeUploads`` is offered and the frame count was left at its
    /// default; the plain bytes a body may declare stay what the default frames could.
    var uploadFrames: ChunkFrameLimits {
        var limits = frames
        if features.contains(.largeUploads) && limits.maximumFrames == ChunkFrameLimits().maximumFrames {
            limits.maximumFrames = ChunkFrameLimits.largeUploadFrames
        }
        return limits
    }

    /// Default limits.
    public init() {}

    /// The body limit of key-value writes for a store that keeps `storeBytes` per container:
    /// room for one value that large written with escapes, and never under 4 MiB.
    public static func keyValueBody(storeBytes: Int) -> Int {
        max(ProtocolLimits.maximumSmallJSONBody, min(storeBytes, Int.max / 8) * 4 + (64 << 10))
    }
}

/// A server's data directory: `metadata.sqlite`, `packs/`, `admin-token`.
///
/// Opening it creates what is missing; on first use it writes a new admin token to
/// `admin-token` (mode 0600). `metadata.sqlite` is made mode 0600 too, whatever the umask.
public struct ServerData: Sendable {
    /// The directory.
    public let directory: String
    /// The metadata store.
    public let metadata: any MetadataStore
    /// The chunk store.
    public let chunks: any ChunkStore
    /// Set when this open created the admin token (so the caller can say where it is).
    public let createdAdminToken: Bool
    /// How many chunk files of an older data directory (`chunks/`, one file per chunk) this
    /// open moved into the chunk store.
    public var migratedChunkFiles = 0
    /// The damaged chunk files that open left in `chunks/`.
    public var damagedChunkFiles: [String] = []

    /// The admin token's file.
    public var adminTokenPath: String { directory + "/admin-token" }

    /// Opens or initializes a data directory with the embedded stores.
    /// - Parameter directory: The directory (created if absent, mode 0700).
    /// - Throws: `io` if it cannot be created or opened; `invalid_configuration` if other
    ///   users may write to it or it is not this user's.
    /// - Parameter policy: Version retention and key-value limits.
    /// - Parameter sealing: Keys that seal chunks, manifests and key-value values at rest, the
    ///   first for what is written from now on. The store records each key as its first sealed
    ///   value is stored, and open refuses (`invalid_configuration`) keys that leave a recorded
    ///   one out, or no keys for a store that has sealed data.
    /// - Parameter use: `.maintain` for a command that works on the directory beside its server
    ///   (`--data`): it seals what it rewrites only with a key the store already uses (the
    ///   latest recorded of those given), never one the running server may not have; with none
    ///   recorded it seals nothing.
    /// - Parameter metadata: Where metadata goes instead of `DIR/metadata.sqlite` (a
    ///   ``PostgresMetadataStore``, made with the same `sealing`).
    /// - Parameter packs: Where packs go instead of `DIR/packs` (``S3PackStorage``).
    ///   Chunk files an older version kept in `DIR/chunks` are moved into the store first.
    public static func open(
        _ directory: String, policy: StorePolicy = StorePolicy(), sealing: SealingKeys? = nil, use: Use = .serve,
        metadata: (any MetadataStore)? = nil, packs: (any PackStorage)? = nil
    ) async throws -> ServerData {
        let directory = directory.hasSuffix("/") && directory.count > 1 ? String(directory.dropLast()) : directory
        if !FileManager.default.fileExists(atPath: directory) {
            guard
                (try? FileManager.default.createDirectory(
                    atPath: directory, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])) != nil
            else {
                throw XferError(.io, "cannot create the data directory \(directory)")
            }
            _ = chmod(directory, 0o700)
        }
        try PrivateFiles.checkDirectory(directory)
        if metadata == nil {
            let file = directory + "/metadata.sqlite"
            try PrivateFiles.makePrivate(file, companions: [file + "-wal", file + "-shm"])
        }
        if let given = metadata as? any SQLMetadataStore,
            given.sealing?.ids != sealing?.ids || given.sealing?.current.id != sealing?.current.id
        {
            throw XferError(
                .invalidConfiguration,
                "the metadata store was opened with other encryption keys than the data directory")
        }
        var sealing = sealing
        if use == .maintain, metadata == nil {
            let recorded = try await SQLiteMetadataStore(path: directory + "/metadata.sqlite", policy: policy)
                .sealingKeys()
            try checkSealing(sealing, recorded: recorded, directory: directory)
            sealing = try sealing.flatMap { keys in
                try recorded.last { keys.byID[$0] != nil }.map { try keys.makingCurrent($0) }
            }
        }
        try StoreLayout(metadataElsewhere: metadata != nil, chunksElsewhere: packs != nil).record(in: directory)
        let metadata =
            try metadata ?? SQLiteMetadataStore(path: directory + "/metadata.sqlite", policy: policy, sealing: sealing)
        try checkSealing(sealing, recorded: try await metadata.sealingKeys(), directory: directory)
        var store = try PackedChunkStore(storage: packs ?? FilePackStorage(root: directory + "/packs"), index: metadata)
        store.sealing = sealing
        let migration = try await LegacyChunkFiles.migrate(directory + "/chunks", into: store)
        var created = false
        if try await !metadata.hasAdminToken() {
            let token = TokenHash.generate()
            try PrivateFiles.writeSecret(token + "\n", to: directory + "/admin-token")
            try await metadata.addAdminToken(hash: TokenHash.hash(token))
            created = true
        }
        var data = ServerData(directory: directory, metadata: metadata, chunks: store, createdAdminToken: created)
        data.migratedChunkFiles = migration.chunks
        data.damagedChunkFiles = migration.damaged
        return data
    }

    /// Who opens a data directory: its server, or a command beside it (``open(_:policy:sealing:use:metadata:packs:)``).
    public enum Use: Sendable { case serve, maintain }

    /// Refuses keys that cannot open everything the store holds: each key id the store recorded
    /// must be among them, and a store with sealed data needs keys.
    static func checkSealing(_ sealing: SealingKeys?, recorded: [SealingKeyID], directory: String) throws {
        let given = Set(sealing?.ids ?? [])
        let missing = recorded.filter { !given.contains($0) }
        guard !missing.isEmpty else { return }
        let names = missing.map(\.description).joined(separator: ", ")
        guard sealing != nil else {
            throw XferError(
                .invalidConfiguration,
                """
                the data of \(directory) is sealed with encryption key \(names), and no key was given; nothing was changed. \
                Give it with --encryption-key FILE or XFER_ENCRYPTION_KEY
                """)
        }
        throw XferError(
            .invalidConfiguration,
            """
            the data of \(directory) is also sealed with encryption key \(names), which was not given; nothing was changed. \
            Give every key still in use (--encryption-key FILE, repeatable, or several lines of one file), the current one first
            """)
    }

    /// Creates an account directly in the data directory (no server needed).
    /// - Returns: The account, with its token.
    public func createAccount(name: String, quota: Int64?, limits: ServerLimits = ServerLimits()) async throws
        -> AccountInfo
    {
        let token = TokenHash.generate()
        var info = try await metadata.createAccount(
            name: try AccountName(name), quota: quota ?? limits.defaultQuota,
            tokenHash: TokenHash.hash(token))
        info.token = token
        return info
    }
}

/// Builds the HTTP application: routes over a data directory's stores.
public enum XferServer {
    /// The router with every /v1 route, for tests (`app.test(.router)`) and ``application(data:host:port:limits:logger:)``.
    public static func router(data: ServerData, limits: ServerLimits = ServerLimits()) -> Router<XferRequestContext> {
        router(data: data, limits: limits, changes: ChangeNotifier())
    }

    /// The router over a given notifier (tests watch its parked waiters).
    static func router(data: ServerData, limits: ServerLimits, changes: ChangeNotifier) -> Router<XferRequestContext> {
        let router = Router(context: XferRequestContext.self)
        // Requests by route and status, with latencies, into the process's registry (made,
        // and swift-metrics bootstrapped, before the middleware makes its first metric).
        _ = ServerMetrics.process
        router.add(middleware: MetricsMiddleware())
        data.metadata.watchRemoteChanges { changes.notifyAll() }
        let quota = QuotaGate()
        let limiter = TokenLimiter(limits.tokens)
        let passwords = PasswordGate()
        Routes(
            metadata: data.metadata, chunks: data.chunks, limits: limits, changes: changes, quota: quota,
            limiter: limiter, passwords: passwords
        ).register(on: router)
        if limits.features.contains(.web) {
            WebRoutes(
                metadata: data.metadata, chunks: data.chunks, limits: limits, changes: changes, quota: quota,
                limiter: limiter, passwords: passwords
            ).register(on: router)
        }
        if limits.features.contains(.webdav) {
            DavRoutes(
                metadata: data.metadata, chunks: data.chunks, limits: limits, changes: changes, quota: quota,
                limiter: limiter
            ).register(on: router)
        }
        return router
    }

    /// The application listening on `host:port`.
    /// - Parameters:
    ///   - data: The opened data directory.
    ///   - host: Address to bind (127.0.0.1 by default in the CLI).
    ///   - port: Port (0 picks a free one; `onServerRunning` sees it).
    ///   - limits: Request limits.
    ///   - tls: Serve HTTPS with this configuration (``tlsConfiguration(certificate:key:)``); plain HTTP if `nil`.
    ///   - logger: Where requests are logged.
    ///   - onServerRunning: Called with the bound port once listening.
    public static func application(
        data: ServerData, host: String, port: Int, limits: ServerLimits = ServerLimits(),
        tls: TLSConfiguration? = nil, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws
        -> some ApplicationProtocol
    {
        let connections = ConnectionGuard(
            maximumConnections: limits.maximumConnections,
            maximumPerAddress: limits.maximumConnectionsPerAddress)
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [
                ConnectionGuardHandler(connections),
                BodyRateHandler(minimumBytes: limits.minimumBodyBytes, window: limits.bodyRateWindow),
                ClientPresenceHandler()
            ],
            idleTimeout: TimeAmount(limits.idleTimeout))
        var limits = limits
        if tls != nil { limits.secureCookies = true }
        let server: HTTPServerBuilder =
            try tls.map { try .tls(.http1(configuration: http), tlsConfiguration: $0) } ?? .http1(configuration: http)
        // Hummingbird's service group ends when a service returns: with webhooks off there is none.
        let webhooks: [any Service] =
            limits.webhooks == .off
            ? [] : [WebhookDeliverer(metadata: data.metadata, destinations: limits.webhooks, logger: logger)]
        return Application(
            router: router(data: data, limits: limits),
            server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "xfer/\(XferVersion.current)"),
            services: webhooks,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }

    /// A TLS server configuration from PEM files: the certificate chain (server certificate
    /// first) and its private key. TLS 1.2 is the minimum.
    /// - Throws: `invalid_configuration` naming the file that cannot be read.
    public static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let privateKey: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificate)
        } catch {
            throw XferError(
                .invalidConfiguration, "cannot read a PEM certificate chain from \(certificate)",
                cause: DescribedError(error))
        }
        do {
            privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
        } catch {
            throw XferError(
                .invalidConfiguration, "cannot read a PEM private key from \(key)", cause: DescribedError(error))
        }
        guard !chain.isEmpty else { throw XferError(.invalidConfiguration, "\(certificate) holds no certificate") }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }
}

/// Where a data directory's server keeps its metadata and chunks: in the directory itself (the
/// embedded default) or elsewhere (`xfer serve --metadata postgres://…`, `--chunks s3://…`).
/// Recorded in `DIR/stores` each time the server opens it, so that work on the directory alone
/// (`xfer gc --data`, `xfer verify --data`) can tell that its files are not the whole story: a
/// garbage collection that read a stale `metadata.sqlite` beside packs indexed in PostgreSQL
/// would take every newer pack for an orphan and delete it.
public struct StoreLayout: Sendable, Hashable, Codable {
    /// Metadata is in PostgreSQL, not `DIR/metadata.sqlite`.
    public var metadataElsewhere: Bool
    /// Chunks are in S3, not `DIR/packs`.
    public var chunksElsewhere: Bool

    /// Describes a layout.
    public init(metadataElsewhere: Bool, chunksElsewhere: Bool) {
        self.metadataElsewhere = metadataElsewhere
        self.chunksElsewhere = chunksElsewhere
    }

    /// Everything in the directory: the default, and what no record means.
    public static let embedded = StoreLayout(metadataElsewhere: false, chunksElsewhere: false)

    /// Whether everything is in the directory.
    public var isEmbedded: Bool { self == .embedded }

    /// What the directory's server last recorded (embedded when nothing is recorded).
    /// - Throws: `invalid_configuration` if the record cannot be read.
    public static func recorded(in directory: String) throws -> StoreLayout {
        let path = directory + "/stores"
        guard let data = FileManager.default.contents(atPath: path) else { return .embedded }
        guard let layout = try? JSONDecoder().decode(StoreLayout.self, from: data) else {
            throw XferError(.invalidConfiguration, "\(path) is not a record xfer wrote; nothing was changed")
        }
        return layout
    }

    /// Records a layout with a store elsewhere. An embedded open (an account command on the
    /// directory, say) never clears the record: only the operator knows the server has moved
    /// back, and says so by removing the file.
    func record(in directory: String) throws {
        let path = directory + "/stores"
        guard !isEmbedded else { return }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try FileSystem.writeAtomically(Array(try encoder.encode(self)) + [0x0a], to: path)
    }
}
