import ArgumentParser
import Configuration
import Foundation
import Logging
import SystemPackage
import XferCore
import XferProtocol
import XferServer
import Yams

/// Where each `xfer serve` setting comes from: its flag, else the environment (`XFER_` and the
/// flag's name, upper case, `_` for `-`: `XFER_DEFAULT_QUOTA`), else the config file (`--config
/// FILE` or `XFER_SERVE_CONFIG`: YAML, one key a flag, named as the flag), else its default.
/// Every value, wherever it came from, is read by the flag's own parser, and an error names
/// where the value came from.
struct ServeSettingSources {
    /// A setting of the config file and the environment.
    struct Key: Sendable {
        var name: String
        /// Whether the value is a list (a YAML sequence; in the environment, comma-separated).
        var list = false
        /// Whether the environment may give it (the sealing keys' files may not:
        /// `XFER_ENCRYPTION_KEY` holds keys themselves, not files).
        var fromEnvironment = true
    }

    /// Every key the config file may hold: the flags of `xfer serve`.
    static let keys: [Key] = [
        Key(name: "data"), Key(name: "listen"), Key(name: "log-level"), Key(name: "default-quota"),
        Key(name: "keep-versions"), Key(name: "keep-days"), Key(name: "kv-max-keys"), Key(name: "kv-max-bytes"),
        Key(name: "metadata"), Key(name: "chunks"), Key(name: "s3-endpoint"), Key(name: "max-wait"),
        Key(name: "list-page"), Key(name: "tls-cert"), Key(name: "tls-key"), Key(name: "behind-tls-proxy"),
        Key(name: "idle-timeout"), Key(name: "max-connections-per-address"), Key(name: "rate-limit"),
        Key(name: "rate-burst"),
        Key(name: "uploads-per-token"), Key(name: "webhooks"),
        Key(name: "without-feature", list: true), Key(name: "encryption-key", list: true, fromEnvironment: false)
    ]

    /// The values given as flags, by key.
    var flags: [String: [String]]
    let environment: ConfigReader
    let file: ConfigReader?
    let filePath: String?

    /// - Parameters:
    ///   - flags: The values given on the command line, by key (a key absent: not given).
    ///   - configFile: `--config`, else `XFER_SERVE_CONFIG`; `nil` for none.
    ///   - environment: The process's environment.
    /// - Throws: `invalid_configuration` if the file cannot be read, is not a YAML mapping, or
    ///   holds a key that is no setting or a value of the wrong shape.
    static func load(
        flags: [String: [String]], configFile: String?,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async throws -> ServeSettingSources {
        let filePath = configFile ?? environment["XFER_SERVE_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        var file: ConfigReader? = nil
        if let filePath, try check(configFile: filePath) {
            do {
                file = ConfigReader(provider: try await FileProvider<YAMLSnapshot>(filePath: FilePath(filePath)))
            } catch {
                throw XferError(.invalidConfiguration, "cannot read the config file \(filePath): \(error)")
            }
        }
        let prefixed = EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: "xfer")
        return ServeSettingSources(
            flags: flags, environment: ConfigReader(provider: prefixed), file: file, filePath: filePath)
    }

    /// Refuses a config file that is not a YAML mapping of known keys to a scalar each (a
    /// sequence of scalars for a list): a misspelt key would otherwise be ignored in silence.
    /// - Returns: Whether it holds any setting (an empty or comments-only file holds none).
    @discardableResult
    static func check(configFile path: String) throws -> Bool {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw XferError(.invalidConfiguration, "cannot read the config file \(path): no such file, or not readable")
        }
        let node: Node?
        do {
            node = try Yams.compose(yaml: String(decoding: data, as: UTF8.self))
        } catch {
            throw XferError(.invalidConfiguration, "the config file \(path) is not valid YAML: \(error)")
        }
        guard let node else { return false }  // empty: no settings
        guard let mapping = node.mapping else {
            throw XferError(
                .invalidConfiguration,
                "the config file \(path) must be a mapping of settings (key: value), one per line")
        }
        let known = Dictionary(keys.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (keyNode, value) in mapping {
            let name = keyNode.string ?? "\(keyNode)"
            guard let key = known[name] else {
                throw XferError(
                    .invalidConfiguration,
                    """
                    the config file \(path) has '\(name)', which is no setting of xfer serve; the settings are \
                    \(keys.map(\.name).joined(separator: ", "))
                    """)
            }
            let scalars =
                key.list
                ? (value.sequence.map { Array($0) } ?? (value.scalar != nil ? [value] : nil))
                : (value.scalar != nil ? [value] : nil)
            guard let scalars, scalars.allSatisfy({ $0.scalar != nil }) else {
                throw XferError(
                    .invalidConfiguration,
                    "the config file \(path): '\(name)' must be \(key.list ? "a value or a list of values" : "one value")"
                )
            }
        }
        return !mapping.keys.isEmpty
    }

    /// Key `name`'s values and where they came from (the flag, the variable or the file's key).
    func values(_ name: String) -> (values: [String], origin: String)? {
        let key = Self.keys.first { $0.name == name } ?? Key(name: name)
        if let given = flags[name], !given.isEmpty { return (given, "--\(name)") }
        let variable = "XFER_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
        if key.fromEnvironment {
            if key.list,
                let list = environment.stringArray(forKey: ConfigKey(name))?.map({
                    $0.trimmingCharacters(in: .whitespaces)
                })
                .filter({ !$0.isEmpty }), !list.isEmpty
            {
                return (list, variable)
            }
            if !key.list, let value = environment.string(forKey: ConfigKey(name)), !value.isEmpty {
                return ([value], variable)
            }
        }
        if let file, let filePath {
            if key.list, let list = file.stringArray(forKey: ConfigKey(name)) {
                return (list, "'\(name)' in \(filePath)")
            }
            if let value = file.string(forKey: ConfigKey(name)), !value.isEmpty {
                return ([value], "'\(name)' in \(filePath)")
            }
        }
        return nil
    }

    /// Key `name`'s one value, read by `parse`; `nil` if no source gives it.
    /// - Throws: `invalid_configuration`, naming where the value came from, if `parse` refuses it.
    func value<T>(_ name: String, as parse: (String) -> T?, expected: String) throws -> T? {
        guard let (values, origin) = values(name), let text = values.last else { return nil }
        guard let parsed = parse(text) else {
            throw XferError(.invalidConfiguration, "\(origin): '\(text)' is not \(expected)")
        }
        return parsed
    }
}

/// Everything `xfer serve` runs with, resolved from its sources (``ServeSettingSources``) and
/// checked.
struct ServeSettings: Encodable {
    var data: String
    var listen: String
    var logLevel: String
    var defaultQuota: Int64
    var keepVersions: Int
    var keepDays: Int
    var kvMaxKeys: Int
    var kvMaxBytes: Int64
    var metadata: String?
    var chunks: String?
    var s3Endpoint: String?
    var maxWait: Int
    var listPage: Int
    var tlsCert: String?
    var tlsKey: String?
    var behindTLSProxy: Bool
    var idleTimeout: Int
    var maxConnectionsPerAddress: Int?
    var rateLimit: Double
    var rateBurst: Double
    var uploadsPerToken: Int
    var withoutFeatures: [String]
    var webhooks: WebhookDestinations
    var encryptionKeyFiles: [String]
    var configFile: String?

    /// The settings as `--print-config` shows them: a password in the PostgreSQL URL hidden.
    var printable: ServeSettings {
        var copy = self
        if let url = metadata, let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@"),
            let colon = url[scheme.upperBound..<at].firstIndex(of: ":")
        {
            copy.metadata = String(url[..<url.index(after: colon)]) + "***" + String(url[at...])
        }
        return copy
    }

    enum CodingKeys: String, CodingKey {
        case data, listen
        case logLevel = "log-level"
        case defaultQuota = "default-quota"
        case keepVersions = "keep-versions"
        case
            keepDays = "keep-days"
        case kvMaxKeys = "kv-max-keys"
        case kvMaxBytes = "kv-max-bytes"
        case metadata, chunks
        case
            s3Endpoint = "s3-endpoint"
        case maxWait = "max-wait"
        case listPage = "list-page"
        case tlsCert = "tls-cert"
        case
            tlsKey = "tls-key"
        case behindTLSProxy = "behind-tls-proxy"
        case idleTimeout = "idle-timeout"
        case
            maxConnectionsPerAddress = "max-connections-per-address"
        case rateLimit = "rate-limit"
        case rateBurst = "rate-burst"
        case
            uploadsPerToken = "uploads-per-token"
        case withoutFeatures = "without-feature"
        case webhooks
        case
            encryptionKeyFiles = "encryption-key"
        case configFile = "config"
    }

    /// The defaults of the settings that have one.
    static let defaultListen = "127.0.0.1:8750"
    static let defaultQuotaBytes = Int64(5) << 30

    /// Resolves and checks every setting.
    /// - Throws: `invalid_configuration`, naming the flag, variable or file key at fault.
    init(_ sources: ServeSettingSources) throws {
        let (number, size, text, count) = (Parse.number, Parse.size, Parse.text, Parse.count)
        let (span, positive, rate) = (Parse.span, Parse.positive, Parse.rate)
        guard let data = try sources.value("data", as: text, expected: "a directory") else {
            throw XferError(
                .invalidConfiguration,
                "no data directory: give --data DIR, XFER_DATA, or 'data:' in the config file (--config FILE)")
        }
        self.data = data
        listen = try sources.value("listen", as: text, expected: "HOST:PORT") ?? Self.defaultListen
        logLevel =
            try sources.value(
                "log-level", as: { Logger.Level(rawValue: $0) != nil ? $0 : nil },
                expected: "a log level (trace, debug, info, notice, warning, error, critical)") ?? "info"
        defaultQuota =
            try sources.value("default-quota", as: size, expected: "a size (e.g. 5G)") ?? Self.defaultQuotaBytes
        let policy = StorePolicy()
        keepVersions =
            try sources.value("keep-versions", as: count, expected: "a number of versions (0 or more)")
            ?? policy.keepVersions
        keepDays =
            try sources.value("keep-days", as: count, expected: "a number of days (0 or more)") ?? policy.keepDays
        kvMaxKeys =
            try sources.value("kv-max-keys", as: count, expected: "a number of keys (0 or more)")
            ?? policy.keyValueMaximumKeys
        kvMaxBytes =
            try sources.value("kv-max-bytes", as: size, expected: "a size (e.g. 1M)")
            ?? Int64(policy.keyValueMaximumBytes)
        metadata = try sources.value("metadata", as: text, expected: "a postgres:// URL")
        chunks = try sources.value("chunks", as: text, expected: "an s3:// location")
        s3Endpoint = try sources.value("s3-endpoint", as: text, expected: "a URL")
        maxWait =
            try sources.value("max-wait", as: span, expected: "a span of time (60, 60s, 1m)")
            ?? ProtocolLimits.maximumWaitSeconds
        listPage =
            try sources.value(
                "list-page",
                as: { number($0).flatMap { (1...ProtocolLimits.maximumListCount).contains($0) ? $0 : nil } },
                expected: "a number 1...\(ProtocolLimits.maximumListCount)") ?? ProtocolLimits.maximumListCount
        tlsCert = try sources.value("tls-cert", as: text, expected: "a file")
        tlsKey = try sources.value("tls-key", as: text, expected: "a file")
        behindTLSProxy =
            try sources.value(
                "behind-tls-proxy", as: Parse.bool, expected: "true or false") ?? false
        idleTimeout =
            try sources.value(
                "idle-timeout", as: { span($0).flatMap { $0 >= 1 ? $0 : nil } },
                expected: "a span of time of 1 second or more (45, 45s, 2m)")
            ?? Int(ServerLimits().idleTimeout.components.seconds)
        maxConnectionsPerAddress = try sources.value(
            "max-connections-per-address", as: positive, expected: "a number (1 or more)")
        let tokens = TokenLimits()
        rateLimit =
            try sources.value("rate-limit", as: rate, expected: "requests a second (0 for no limit)")
            ?? tokens.requestsPerSecond
        rateBurst =
            try sources.value(
                "rate-burst", as: { rate($0).flatMap { $0 >= 1 ? $0 : nil } },
                expected: "a number of requests (1 or more)")
            ?? tokens.burst
        uploadsPerToken =
            try sources.value("uploads-per-token", as: count, expected: "a number of uploads (0 for no limit)")
            ?? tokens.uploadsAtOnce
        withoutFeatures = try Self.withoutFeatures(sources)
        webhooks =
            try sources.value(
                "webhooks", as: { WebhookDestinations(rawValue: $0) }, expected: "off, public or any") ?? .public
        encryptionKeyFiles = sources.values("encryption-key")?.values ?? []
        configFile = sources.filePath
        try checkTogether()
    }

    /// The features `without-feature` names, each one the server has.
    static func withoutFeatures(_ sources: ServeSettingSources) throws -> [String] {
        guard let (names, origin) = sources.values("without-feature") else { return [] }
        for name in names where ServerFeature(rawValue: name) == nil {
            throw XferError(
                .invalidConfiguration,
                "\(origin): no feature '\(name)'; the features are \(ServerFeature.allCases.map(\.rawValue).joined(separator: ", "))"
            )
        }
        return names
    }

    /// The settings that go together do: a certificate with its key, S3 with its endpoint, and the
    /// listen address is HOST:PORT.
    func checkTogether() throws {
        guard (tlsCert == nil) == (tlsKey == nil) else {
            throw XferError(
                .invalidConfiguration,
                "--tls-cert and --tls-key go together (as XFER_TLS_CERT and XFER_TLS_KEY, or tls-cert and tls-key in the config file)"
            )
        }
        guard chunks == nil || s3Endpoint != nil else {
            throw XferError(
                .invalidConfiguration,
                "--chunks s3://… needs --s3-endpoint URL (or XFER_S3_ENDPOINT, or s3-endpoint in the config file)")
        }
        _ = try hostAndPort()
    }

    /// The host and port of `listen`.
    /// - Throws: `invalid_configuration` unless it is HOST:PORT.
    func hostAndPort() throws -> (String, Int) {
        guard let colon = listen.lastIndex(of: ":"), let port = Int(listen[listen.index(after: colon)...]),
            (0...65535).contains(port)
        else {
            throw XferError(
                .invalidConfiguration, "the listen address '\(listen)' must be HOST:PORT, e.g. 127.0.0.1:8750")
        }
        return (String(listen[..<colon]), port)
    }
}

/// How each setting's text is read: `nil` for text that is no such value.
private enum Parse {
    static func number(_ text: String) -> Int? { Int(text.trimmingCharacters(in: .whitespaces)) }
    static func size(_ text: String) -> Int64? { ByteCount(argument: text.trimmingCharacters(in: .whitespaces))?.value }
    static func text(_ text: String) -> String? { text }
    static func count(_ text: String) -> Int? { number(text).flatMap { $0 >= 0 ? $0 : nil } }
    static func positive(_ text: String) -> Int? { number(text).flatMap { $0 >= 1 ? $0 : nil } }
    static func span(_ text: String) -> Int? {
        Span(argument: text.trimmingCharacters(in: .whitespaces)).flatMap { Int(exactly: $0.seconds) }
    }
    static func rate(_ text: String) -> Double? {
        Double(text.trimmingCharacters(in: .whitespaces)).flatMap { $0 >= 0 && $0.isFinite ? $0 : nil }
    }
    static func bool(_ text: String) -> Bool? {
        ["true": true, "yes": true, "1": true, "false": false, "no": false, "0": false][text.lowercased()]
    }
}
