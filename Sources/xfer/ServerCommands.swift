import ArgumentParser
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import XferClient
import XferCore
import XferProtocol
import XferServer

extension Xfer {
    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "serve",
            abstract: "Run an xfer server on a data directory.",
            discussion: """
                Metadata goes to DIR/metadata.sqlite and chunks to packs in DIR/packs; nothing else is \
                needed. With --metadata (PostgreSQL) and --chunks (S3) several servers share one \
                deployment; --tls-cert/--tls-key serve HTTPS. On first start an admin token is written to DIR/admin-token (mode 0600). \
                Listening on an address other than loopback needs TLS: --tls-cert/--tls-key, or \
                --behind-tls-proxy when a TLS-terminating proxy is in front (docs/SECURITY.md). \
                SIGINT or SIGTERM stops the server gracefully. Every setting may also come from the \
                environment (XFER_ and the flag's name: XFER_LISTEN, XFER_DEFAULT_QUOTA, …) or from a YAML \
                file (--config FILE, or XFER_SERVE_CONFIG; keys named as the flags, as in tools/ops/xfer.yaml); \
                a flag overrides the environment, which overrides the file. --print-config shows the result.
                """)

        @Option(
            help: ArgumentHelp(
                "A YAML file of settings, one key a flag of this command (e.g. 'listen: 0.0.0.0:8750'; see tools/ops/xfer.yaml). Flags override the environment (XFER_LISTEN, XFER_DEFAULT_QUOTA, …), which overrides the file. Also XFER_SERVE_CONFIG.",
                valueName: "FILE"))
        var config: String?

        @Flag(help: "Print the settings the server would run with, and where the config file is, as JSON, and exit.")
        var printConfig = false

        @Option(help: ArgumentHelp("Data directory (created if absent).", valueName: "DIR"))
        var data: String?

        @Option(
            help: ArgumentHelp(
                "Address to listen on. (default: \(ServeSettings.defaultListen))", valueName: "HOST:PORT"))
        var listen: String?

        @Option(
            help: ArgumentHelp(
                "Log level: trace, debug, info, notice, warning, error, critical. (default: info)", valueName: "LEVEL"))
        var logLevel: String?

        @Option(help: ArgumentHelp("Quota of accounts created without --quota. (default: 5 GiB)", valueName: "SIZE"))
        var defaultQuota: String?

        @Option(
            help: ArgumentHelp(
                "Superseded versions kept per document whatever their age. (default: \(StorePolicy().keepVersions))",
                valueName: "N"))
        var keepVersions: String?

        @Option(
            help: ArgumentHelp(
                "Superseded versions younger than this are kept whatever their number. (default: \(StorePolicy().keepDays))",
                valueName: "DAYS"))
        var keepDays: String?

        @Option(
            help: ArgumentHelp(
                "Keys per container in the key-value store. (default: \(StorePolicy().keyValueMaximumKeys))",
                valueName: "N"))
        var kvMaxKeys: String?

        @Option(
            help: ArgumentHelp(
                "Bytes (keys plus JSON values) per container in the key-value store. (default: \(ByteCount(Int64(StorePolicy().keyValueMaximumBytes))))",
                valueName: "SIZE"))
        var kvMaxBytes: String?

        @Option(
            help: ArgumentHelp(
                "Keep metadata in PostgreSQL instead of DIR/metadata.sqlite; several servers may share it.",
                valueName: "postgres://USER@HOST:PORT/DB"))
        var metadata: String?

        @Option(
            help: ArgumentHelp(
                "Keep chunks in S3-compatible storage instead of DIR/packs (credentials from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION).",
                valueName: "s3://BUCKET/PREFIX"))
        var chunks: String?

        @Option(
            help: ArgumentHelp(
                "The S3 endpoint for --chunks (e.g. http://127.0.0.1:7480 for Ceph RGW).", valueName: "URL"))
        var s3Endpoint: String?

        @Option(
            help: ArgumentHelp(
                "Longest change-feed long poll a client may ask for: 60, 60s, 1m. (default: \(ProtocolLimits.maximumWaitSeconds)s)",
                valueName: "SPAN"))
        var maxWait: String?

        @Option(
            help: ArgumentHelp(
                "Most documents in one page of a listing; clients read every page. (default: \(ProtocolLimits.maximumListCount))",
                valueName: "N"))
        var listPage: String?

        @Option(help: ArgumentHelp("Serve HTTPS with this PEM certificate chain (needs --tls-key).", valueName: "FILE"))
        var tlsCert: String?

        @Option(help: ArgumentHelp("The PEM private key of --tls-cert.", valueName: "FILE"))
        var tlsKey: String?

        @OptionGroup var sealing: SealingOptions

        @Flag(
            name: .customLong("behind-tls-proxy"),
            help:
                "Serve plain HTTP on a non-loopback --listen address because a TLS-terminating proxy is in front (tokens cross the network only inside TLS)."
        )
        var behindTLSProxy = false

        @Option(
            help: ArgumentHelp(
                "Close a connection after this long without a complete request head, or idle between requests: 45, 45s, 2m. (default: \(Int(ServerLimits().idleTimeout.components.seconds))s)",
                valueName: "SPAN"))
        var idleTimeout: String?

        @Option(
            help: ArgumentHelp(
                "Open connections from one client address (default 256; with --behind-tls-proxy, the total cap).",
                valueName: "N"))
        var maxConnectionsPerAddress: String?

        @Option(
            help: ArgumentHelp(
                "Requests a second one token may make, sustained; more are answered 429 with Retry-After, which xfer's client waits out (0: no limit). (default: \(Int(TokenLimits().requestsPerSecond)))",
                valueName: "N"))
        var rateLimit: String?

        @Option(
            help: ArgumentHelp(
                "Requests one token may make at once after a quiet time, above --rate-limit. (default: \(Int(TokenLimits().burst)))",
                valueName: "N"))
        var rateBurst: String?

        @Option(
            help: ArgumentHelp(
                "Uploads (chunk uploads, WebDAV PUTs) one token may have running at once; xfer's client runs 4 (0: no limit). (default: \(TokenLimits().uploadsAtOnce))",
                valueName: "N"))
        var uploadsPerToken: String?

        @Option(
            help: ArgumentHelp(
                "Where record subscriptions' webhooks may be delivered: off, public (not loopback, private or link-local addresses), any. (default: public)",
                valueName: "WHERE"))
        var webhooks: String?

        @Option(
            name: .customLong("without-feature"),
            help: ArgumentHelp(
                "Do not offer this optional protocol feature to clients (\(ServerFeature.allCases.map(\.rawValue).joined(separator: ", "))), while an older server shares this store; repeatable.",
                valueName: "NAME"))
        var withoutFeatures: [String] = []

        /// The values given as flags, by the config file's key.
        var givenFlags: [String: [String]] {
            let single: [String: String?] = [
                "data": data, "listen": listen, "log-level": logLevel, "default-quota": defaultQuota,
                "keep-versions": keepVersions,
                "keep-days": keepDays, "kv-max-keys": kvMaxKeys, "kv-max-bytes": kvMaxBytes, "metadata": metadata,
                "chunks": chunks,
                "s3-endpoint": s3Endpoint, "max-wait": maxWait, "list-page": listPage, "tls-cert": tlsCert,
                "tls-key": tlsKey,
                "behind-tls-proxy": behindTLSProxy ? "true" : nil, "idle-timeout": idleTimeout,
                "max-connections-per-address": maxConnectionsPerAddress, "rate-limit": rateLimit,
                "rate-burst": rateBurst,
                "uploads-per-token": uploadsPerToken, "webhooks": webhooks
            ]
            var flags = single.compactMapValues { $0 }.mapValues { [$0] }
            flags["without-feature"] = withoutFeatures
            flags["encryption-key"] = sealing.encryptionKeys
            return flags
        }

        /// Refuses plain HTTP on an address other machines can reach: tokens would cross the
        /// network in the clear.
        func checkTransport(host: String, _ settings: ServeSettings) throws {
            guard settings.tlsCert == nil, !settings.behindTLSProxy, !ListenAddress.isLoopback(host) else { return }
            throw XferError(
                .invalidConfiguration,
                """
                refusing to serve plain HTTP on \(host), which is not a loopback address: tokens and data would cross \
                the network unencrypted. Give --tls-cert FILE --tls-key FILE to serve HTTPS, or, if a TLS-terminating \
                proxy is in front of this server, --behind-tls-proxy (see docs/SECURITY.md); or listen on 127.0.0.1.
                """)
        }

        func run() async throws {
            try await runReportingErrors {
                let settings = try ServeSettings(await ServeSettingSources.load(flags: givenFlags, configFile: config))
                let (host, port) = try settings.hostAndPort()
                try checkTransport(host: host, settings)
                if printConfig {
                    printJSON(settings.printable)
                    return
                }
                restrictFileModes()
                var logger = Logger(label: "xfer.serve")
                logger.logLevel = Logger.Level(rawValue: settings.logLevel) ?? .info
                if settings.behindTLSProxy && settings.tlsCert == nil && !ListenAddress.isLoopback(host) {
                    FileHandle.standardError.write(
                        Data(
                            "xfer: warning: serving plain HTTP on \(host) because of --behind-tls-proxy; make sure only the TLS proxy can reach this port\n"
                                .utf8))
                }
                let keys = try settings.sealingKeys()
                let postgres = try settings.postgresStore(policy: settings.storePolicy, keys: keys)
                let environment = ProcessInfo.processInfo.environment
                let poolSizeGiven = environment["NIO_SINGLETON_BLOCKING_POOL_THREAD_COUNT"] != nil
                if postgres != nil && !poolSizeGiven {
                    // PostgreSQL transactions run on the process's blocking pool: a thread for each
                    // connection, and the cores' worth for file work beside them. Set before anything
                    // uses the pool (NIO allows it only then, once).
                    NIOSingletons.blockingPoolThreadCountSuggestion =
                        PostgresMetadataStore.maximumConnections + System.coreCount
                }
                let server = ServeService { [settings, logger] in
                    try await Self.serve(
                        settings, host: host, port: port, keys: keys, postgres: postgres, logger: logger)
                }
                try await server.group(beside: postgres, logger: logger).run()
            }
        }

        /// Opens the stores (migrating PostgreSQL's, whose service runs beside this one) and
        /// serves until the service group shuts down.
        private static func serve(
            _ settings: ServeSettings, host: String, port: Int, keys: SealingKeys?, postgres: PostgresMetadataStore?,
            logger: Logger
        ) async throws {
            let descriptors = DescriptorLimit.raise()
            let policy = settings.storePolicy
            // SIGTERM or SIGINT while the stores open (a migration, a database not answering) stops at once.
            let opened = try await cancelWhenGracefulShutdown {
                try await settings.openStores(policy: policy, keys: keys, postgres: postgres)
            }
            let store = reportMigration(opened)
            if let keys {
                logger.info(
                    "sealing data at rest", metadata: ["key": "\(keys.current.id)", "keys": "\(keys.ids.count)"])
            }
            if let file = settings.configFile {
                logger.info("settings from the config file", metadata: ["file": "\(file)"])
            }
            if store.createdAdminToken {
                logger.notice("created an admin token", metadata: ["file": "\(store.adminTokenPath)"])
                printError(
                    "wrote a new admin token to \(store.adminTokenPath); create accounts with `xfer account create NAME --data \(settings.data)`"
                )
            }
            let limits = settings.serverLimits(policy: policy, descriptorLimit: descriptors)
            logger.info(
                "open-file limit",
                metadata: ["RLIMIT_NOFILE": "\(descriptors)", "max_connections": "\(limits.maximumConnections)"])
            let tls = try settings.tlsCert.map {
                try XferServer.tlsConfiguration(certificate: $0, key: settings.tlsKey ?? "")
            }
            let scheme = tls == nil ? "http" : "https"
            let app = try XferServer.application(
                data: store, host: host, port: port, limits: limits, tls: tls, logger: logger
            ) { bound in
                printError("serving \(store.directory) on \(scheme)://\(host):\(bound)")
            }
            do {
                try await app.run()
            } catch {
                throw XferError(.io, "the server stopped: \(error)")
            }
        }
    }

}

/// `xfer serve` as a service: the stores opened and the HTTP server run, under one service
/// group with PostgreSQL's client (when the metadata is there). SIGINT or SIGTERM shuts the
/// group down gracefully, the server first, then the client; the server ending ends the group.
struct ServeService: Service {
    let body: @Sendable () async throws -> Void

    func run() async throws {
        try await body()
    }

    func group(beside postgres: PostgresMetadataStore?, logger: Logger) -> ServiceGroup {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = postgres.map { [.init(service: $0)] } ?? []
        services.append(.init(service: self, successTerminationBehavior: .gracefullyShutdownGroup))
        return ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
    }
}

/// What `--listen` may bind without TLS.
enum ListenAddress {
    /// Whether `host` is a loopback address: 127.0.0.0/8, ::1 or localhost.
    static func isLoopback(_ host: String) -> Bool {
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if host.lowercased() == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { UInt8($0) != nil }
    }
}
