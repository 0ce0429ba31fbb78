import ArgumentParser
import Foundation
import Logging
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
                file (--config FILE, or XFER_SERVE_CONFIG; keys named as the flags, as in tools/xfer.yaml); \
                a flag overrides the environment, which overrides the file. --print-config shows the result.
                """)

        @Option(
            help: ArgumentHelp(
                "A YAML file of settings, one key a flag of this command (e.g. 'listen: 0.0.0.0:8750'; see tools/xfer.yaml). Flags override the environment (XFER_LISTEN, XFER_DEFAULT_QUOTA, …), which overrides the file. Also XFER_SERVE_CONFIG.",
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
                "uploads-per-token": uploadsPerToken
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
                let descriptors = DescriptorLimit.raise()
                var policy = StorePolicy()
                policy.keepVersions = settings.keepVersions
                policy.keepDays = settings.keepDays
                policy.keyValueMaximumKeys = settings.kvMaxKeys
                policy.keyValueMaximumBytes = Int(clamping: settings.kvMaxBytes)
                var objectStore: S3Client? = nil
                if let chunks = settings.chunks {
                    let client = S3Client(location: try S3Location(url: chunks, endpoint: settings.s3Endpoint ?? ""))
                    try await client.createBucketIfNeeded()
                    objectStore = client
                }
                var database: PostgresMetadataStore? = nil
                let keys = try SealingKeys.load(
                    files: settings.encryptionKeyFiles,
                    environment: ProcessInfo.processInfo.environment["XFER_ENCRYPTION_KEY"])
                if let metadata = settings.metadata {
                    database = try await PostgresMetadataStore(url: metadata, policy: policy, sealing: keys)
                }
                let data = settings.data
                let store = reportMigration(
                    try await ServerData.open(
                        data, policy: policy, sealing: keys, metadata: database,
                        packs: objectStore.map { S3PackStorage(client: $0) }))
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
                        "wrote a new admin token to \(store.adminTokenPath); create accounts with `xfer account create NAME --data \(data)`"
                    )
                }
                var limits = ServerLimits()
                limits.defaultQuota = settings.defaultQuota
                limits.maximumWait = max(0, min(settings.maxWait, ProtocolLimits.maximumWaitSeconds))
                limits.maximumKeyValueBody = ServerLimits.keyValueBody(storeBytes: policy.keyValueMaximumBytes)
                limits.idleTimeout = .seconds(settings.idleTimeout)
                limits.listPage = settings.listPage
                // Behind a TLS proxy the browser speaks HTTPS: cookies and links say so.
                limits.secureCookies = settings.behindTLSProxy
                limits.features.subtract(settings.withoutFeatures.compactMap(ServerFeature.init(rawValue:)))
                // Behind a proxy every client arrives from the proxy's address: only the total cap means anything.
                limits.maximumConnectionsPerAddress =
                    settings.maxConnectionsPerAddress
                    ?? (settings.behindTLSProxy
                        ? limits.maximumConnections : ServerLimits().maximumConnectionsPerAddress)
                limits.maximumConnections = ConnectionGuard.connectionCap(descriptorLimit: descriptors)
                limits.tokens.requestsPerSecond = settings.rateLimit
                limits.tokens.burst = settings.rateBurst
                limits.tokens.uploadsAtOnce = settings.uploadsPerToken
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
                    try await app.runService()
                } catch {
                    throw XferError(.io, "the server stopped: \(error)")
                }
            }
        }
    }

    struct Account: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "account",
            abstract: "Manage accounts.",
            subcommands: [
                Create.self, List.self, Show.self, SetQuota.self, Delete.self, NewToken.self, Tokens.self,
                RevokeToken.self
            ])

        /// Where an account command works: a server's data directory (`--data`), else the
        /// server at `--server` with the admin token.
        struct Place: ParsableArguments {
            @Option(
                help: ArgumentHelp("A server's data directory, to work without a running server.", valueName: "DIR"))
            var data: String?

            @OptionGroup var client: ClientOptions

            @OptionGroup var sealing: SealingOptions

            /// `local` on the data directory, or `remote` through the admin routes.
            func run<T>(local: (ServerData) async throws -> T, remote: (ServerConnection) async throws -> T)
                async throws -> T
            {
                if let data {
                    restrictFileModes()
                    return try await local(
                        reportMigration(ServerData.open(data, sealing: try sealing.keys(), use: .maintain)))
                }
                return try await withRemote(client) { try await remote($0.connection) }
            }
        }

        /// An account as a line of `account list`, or as the lines of `account show`.
        static func describe(_ account: AccountSummary, wide: Bool) -> [String] {
            let created = Date(timeIntervalSince1970: TimeInterval(account.createdAt)).formatted(
                .iso8601.year().month().day())
            func count(_ number: Int64, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }
            guard wide else {
                return [
                    "\(account.name)\t\(ByteCount(account.charged)) of \(ByteCount(account.quota))\t\(count(account.documents, "document"))\t"
                        + "\(count(account.containers, "container"))\t\(count(account.tokens, "token"))\tcreated \(created)"
                ]
            }
            return [
                "name        \(account.name)",
                "quota       \(ByteCount(account.quota)) (\(account.quota) bytes)",
                "used        \(ByteCount(account.charged)) (\(account.charged) bytes)\(account.charged > account.quota ? ", over its quota: new data is refused" : "")",
                "  chunks    \(ByteCount(account.used))",
                "  versions  \(ByteCount(account.versionBytes ?? 0)) (records and manifests)",
                "documents   \(account.documents)",
                "containers  \(account.containers)",
                "tokens      \(account.tokens)",
                "created     \(created)"
            ]
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "List every account: its use of its quota, documents, containers and tokens.",
                discussion: "Works on --data DIR or asks --server with the admin token.")

            @Flag(help: "Print {\"accounts\": [...]} as JSON.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let accounts = try await place.run(
                        local: { try await $0.metadata.accountSummaries(named: nil) },
                        remote: { try await $0.accounts() })
                    if json {
                        printJSON(AccountList(accounts: accounts))
                        return
                    }
                    if accounts.isEmpty { print("no accounts; create one with `xfer account create NAME`") }
                    for account in accounts { Account.describe(account, wide: false).forEach { print($0) } }
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "Show one account: quota, use, documents, containers, tokens, creation date.",
                discussion:
                    "Works on --data DIR or asks --server with the admin token. Exits 5 if there is no such account.")

            @Argument(help: "Account name.")
            var name: String

            @Flag(help: "Print the account as one JSON object.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let name = try AccountName(self.name)
                    let account = try await place.run(
                        local: { try await $0.metadata.accountSummaries(named: name)[0] },
                        remote: { try await $0.accounts(named: name.value)[0] })
                    if json { printJSON(account) } else { Account.describe(account, wide: true).forEach { print($0) } }
                }
            }
        }

        struct SetQuota: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "set-quota",
                abstract: "Set an account's storage quota.",
                discussion: """
                    A quota below what the account already uses deletes nothing: it refuses new \
                    data until the account is under it again. Works on --data DIR or asks \
                    --server with the admin token.
                    """)

            @Argument(help: "Account name.")
            var name: String

            @Argument(help: ArgumentHelp("The new quota (e.g. 50G).", valueName: "SIZE"))
            var quota: ByteCount

            @Flag(help: "Print the account as one JSON object.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let name = try AccountName(self.name)
                    let account = try await place.run(
                        local: { try await $0.metadata.setQuota(account: name, quota: quota.value) },
                        remote: { try await $0.setQuota(account: name.value, quota: quota.value) })
                    if json { printJSON(account) } else { Account.describe(account, wide: true).forEach { print($0) } }
                }
            }
        }

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "create",
                abstract: "Create an account and print its token alone on stdout.",
                discussion: """
                    With --data, works directly on a server's data directory (the server may be \
                    running). Otherwise it asks the server at --server with the admin token \
                    (--token or XFER_TOKEN).
                    """)

            @Argument(help: "Account name: 1-64 of A-Z a-z 0-9 . _ -")
            var name: String

            @Option(help: ArgumentHelp("Storage quota (e.g. 10G); the server's default if absent.", valueName: "SIZE"))
            var quota: ByteCount?

            @Flag(help: "Print the account as one JSON object (token included).")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let info = try await place.run(
                        local: { try await $0.createAccount(name: name, quota: quota?.value) },
                        remote: { try await $0.createAccount(CreateAccountRequest(name: name, quota: quota?.value)) })
                    if json {
                        printJSON(info)
                    } else {
                        print(info.token ?? "")
                    }
                }
            }
        }

        struct Delete: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "delete",
                abstract: "Delete an account and everything it has, for good.",
                discussion: """
                    Removes, in one transaction, the account's containers with every document and \
                    version (Recently Deleted included), key-value pairs, container keys, WebDAV \
                    properties and locks, its share links, web sessions and tokens. Its chunks that \
                    no other account holds are removed by the next `xfer gc`. Nothing is removed \
                    without --yes; --dry-run says what would go. Works on --data DIR or asks \
                    --server with the admin token.
                    """)

            @Argument(help: "Account name.")
            var name: String

            @Flag(help: "Delete it: without this flag nothing is removed.")
            var yes = false

            @Flag(help: "Say what would be removed, and remove nothing.")
            var dryRun = false

            @Flag(help: "Print what was (or would be) removed as one JSON object.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let name = try AccountName(self.name)
                    let preview = !yes || dryRun
                    let report = try await place.run(
                        local: { try await $0.metadata.deleteAccount(name, dryRun: preview) },
                        remote: { try await $0.deleteAccount(name.value, dryRun: preview) })
                    let what =
                        "\(report.documents) document\(report.documents == 1 ? "" : "s") (\(report.versions) version\(report.versions == 1 ? "" : "s") in all) "
                        + "in \(report.containers) container\(report.containers == 1 ? "" : "s"), \(report.tokens) token\(report.tokens == 1 ? "" : "s"), "
                        + "\(ByteCount(report.used)) of chunks"
                    if !yes && !dryRun {
                        throw XferError(
                            .badRequest,
                            "deleting account \(name) removes \(what) for good; nothing was removed: run again with --yes (or --dry-run to only see this)"
                        )
                    }
                    if json {
                        printJSON(report)
                        return
                    }
                    if dryRun {
                        print("would delete account \(name): \(what); nothing was removed")
                    } else {
                        print(
                            "deleted account \(name): \(what); its chunks no other account holds go at the next `xfer gc`"
                        )
                    }
                }
            }
        }

        struct NewToken: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "new-token",
                abstract: "Issue another token for an account and print it alone on stdout.",
                discussion: """
                    Use it to replace a token before revoking the old one, or to give a device, a \
                    script or a WebDAV client its own: --device names it (recorded as the writer of \
                    what it commits), --read-only, --for-container and --expires narrow it. Works on \
                    --data DIR or asks --server with the admin token.
                    """)

            @Argument(help: "Account name.")
            var name: String

            @OptionGroup var terms: TokenTermsOptions

            @Flag(help: "Print the token with its id and terms as one JSON object.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let terms = try terms.terms()
                    let info = try await place.run(
                        local: { try await $0.metadata.issueToken(account: name, terms: terms) },
                        remote: { try await $0.newToken(account: name, terms: terms) })
                    if json { printJSON(info) } else { print(info.token) }
                }
            }
        }

        struct Tokens: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "tokens",
                abstract: "List an account's tokens: id, device, scope, creation and expiry.",
                discussion: """
                    Never shows a token, only its public id (what `revoke-token --id` takes). \
                    Works on --data DIR or asks --server with the admin token. Exits 5 if there is \
                    no such account.
                    """)

            @Argument(help: "Account name.")
            var name: String

            @Flag(help: "Print {\"tokens\": [...]} as JSON.")
            var json = false

            @OptionGroup var place: Place

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let account = try AccountName(name)
                    let tokens = try await place.run(
                        local: { try await $0.metadata.tokens(account: account) },
                        remote: { try await $0.tokens(account: account.value) })
                    if json { printJSON(TokenList(tokens: tokens)) } else { TokenText.list(tokens) }
                }
            }
        }

        struct RevokeToken: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke-token",
                abstract:
                    "Revoke a token (itself, or --id from `account tokens`), or every token of an account (--account).",
                discussion: """
                    A revoked token is refused from the next request on, and its web sessions end. \
                    Works on --data DIR or asks --server with the admin token. Exits 5 if the token \
                    was not known.
                    """)

            @Argument(help: ArgumentHelp("The token to revoke.", valueName: "TOKEN"))
            var revoked: String?

            @Option(
                help: ArgumentHelp(
                    "Revoke the token with this id (16 hex digits, as `xfer account tokens NAME` shows it) instead.",
                    valueName: "ID"))
            var id: String?

            @Option(help: ArgumentHelp("Revoke every token of this account instead.", valueName: "NAME"))
            var account: String?

            @Flag(help: "Print {\"revoked\": N} as JSON.")
            var json = false

            @OptionGroup var place: Place

            func validate() throws {
                guard [revoked != nil, id != nil, account != nil].filter({ $0 }).count == 1 else {
                    throw ValidationError("give one of TOKEN, --id ID or --account NAME")
                }
            }

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let request = RevokeTokenRequest(token: revoked, account: account, id: id)
                    let result = try await place.run(
                        local: { try await $0.metadata.revoke(request) },
                        remote: { try await $0.revokeToken(request) })
                    guard result.revoked > 0 || account != nil else {
                        throw XferError(.notFound, "no such token on this server")
                    }
                    if json {
                        printJSON(result)
                    } else {
                        print("revoked \(result.revoked) token\(result.revoked == 1 ? "" : "s")")
                    }
                }
            }
        }
    }
}

/// Files a data-directory command creates are the server user's alone (umask 077): the
/// metadata, chunks and tokens are nobody else's business.
func restrictFileModes() {
    umask(0o077)
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

/// The keys that seal a server's data at rest, for `serve` and every command that opens a
/// data directory (`--data`): they all need the same keys.
struct SealingOptions: ParsableArguments {
    @Option(
        name: .customLong("encryption-key"),
        help: ArgumentHelp(
            """
            Seal chunks and manifests at rest with the keys in FILE (64 hex digits a line, mode 0600; make one with \
            `xfer server-key new FILE`). Repeatable: the first key seals new data, every key opens what it sealed. \
            The keys in XFER_ENCRYPTION_KEY come after those of the files. A data directory with sealed data refuses to \
            open without its keys.
            """, valueName: "FILE"))
    var encryptionKeys: [String] = []

    /// The keys of the files, then of XFER_ENCRYPTION_KEY; `nil` if none.
    func keys() throws -> SealingKeys? {
        try SealingKeys.load(
            files: encryptionKeys, environment: ProcessInfo.processInfo.environment["XFER_ENCRYPTION_KEY"])
    }
}

extension Xfer {
    struct ServerKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "server-key",
            abstract: "Make and inspect the keys that seal a server's data at rest (xfer serve --encryption-key).",
            discussion: """
                A server given keys seals every chunk and manifest it stores from then on with AES-256-GCM, on disk and \
                in S3 alike; data stored before stays readable as it is. To rotate, make a new key and start the server \
                with the new key first and the old ones after: new data is sealed with the new key, and the old keys \
                still open what they sealed. Keep a copy of every key: sealed data cannot be read without its key. \
                See docs/SECURITY.md.
                """,
            subcommands: [New.self, Show.self])

        struct New: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "new",
                abstract: "Write a new random key to a new file (mode 0600) and print its id.",
                discussion: "Never overwrites a file: an overwritten key file is data lost.")

            @Argument(help: "The key file to create.")
            var file: String

            @Flag(help: "Print {\"file\", \"id\"} as JSON.")
            var json = false

            func run() async throws {
                try await runReportingErrors(json: json) {
                    restrictFileModes()
                    let key = try SealingKeys.createKeyFile(at: file)
                    if json {
                        printJSON(["file": file, "id": key.id.description])
                    } else {
                        print(
                            "wrote key \(key.id) to \(file); keep a copy elsewhere: data sealed with it cannot be read without it"
                        )
                    }
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract:
                    "Print the ids of the keys given (--encryption-key, XFER_ENCRYPTION_KEY), the current one first.",
                discussion: "Compare them with the ids the server names when it refuses to start for a missing key.")

            @OptionGroup var sealing: SealingOptions

            @Flag(help: "Print {\"current\", \"keys\"} as JSON.")
            var json = false

            func run() async throws {
                try await runReportingErrors(json: json) {
                    guard let keys = try sealing.keys() else {
                        throw XferError(
                            .invalidConfiguration, "no key given: pass --encryption-key FILE or set XFER_ENCRYPTION_KEY"
                        )
                    }
                    let others = keys.ids.filter { $0 != keys.current.id }.map(\.description)
                    if json {
                        printJSON(
                            ShownKeys(
                                current: keys.current.id.description, keys: [keys.current.id.description] + others))
                    } else {
                        print("\(keys.current.id) (current)")
                        for id in others { print(id) }
                    }
                }
            }
        }
    }
}

private struct ShownKeys: Encodable {
    var current: String
    var keys: [String]
}
