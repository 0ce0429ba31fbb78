import ArgumentParser
import Foundation
import Logging
import XferClient
import XferCore
import XferProtocol

/// Where the server is and who we are: flags, then XFER_* variables, then the config file.
struct ClientOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Server URL (default: XFER_SERVER, the config file, else http://127.0.0.1:8750).", valueName: "URL"))
    var server: String?

    @Option(help: ArgumentHelp("Access token (default: XFER_TOKEN or the config file).", valueName: "TOKEN"))
    var token: String?

    @Option(
        help: ArgumentHelp("Container (default: XFER_CONTAINER, the config file, else \"default\").", valueName: "NAME")
    )
    var container: String?

    @Option(
        help: ArgumentHelp(
            "PEM file of certificate authorities to trust for an https:// server instead of the system's (default: XFER_CA).",
            valueName: "FILE"))
    var ca: String?

    @Option(
        help: ArgumentHelp(
            "Client state directory (default: XFER_STATE_DIR, else ~/.local/state/xfer).", valueName: "DIR"))
    var stateDir: String?

    @Option(
        help: ArgumentHelp(
            "File that holds this device's key of an end-to-end encrypted container, instead of one in the state directory (default: XFER_KEY_FILE). Mode 0600; refused if others can read it.",
            valueName: "FILE"))
    var keyFile: String?

    @Option(
        help: ArgumentHelp(
            "Times a request is sent again after the server could not be reached, was busy (503) or asked to slow down (429, waiting what it asks), with exponential backoff and jitter; reads and chunk uploads also after a broken connection (default: XFER_RETRIES, else 4; 0: never).",
            valueName: "N"))
    var retries: Int?

    @Option(
        help: ArgumentHelp(
            "Most chunk data a second each way, sent and received: 512K, 2M, 1.5G; 16K or more (default: XFER_BWLIMIT, else no limit).",
            valueName: "RATE"))
    var bwlimit: ByteCount?

    @Flag(
        name: .shortAndLong,
        help:
            "Log to stderr each request to the server with its status and time, and each one sent again; twice (-vv): the HTTP client's own connection events too (default: XFER_LOG_LEVEL, else nothing)."
    )
    var verbose: Int

    /// The client's log: to stderr at the level -v/-vv or XFER_LOG_LEVEL asks; silent otherwise.
    func logger(_ environment: [String: String]) throws -> Logger {
        let level: Logger.Level?
        switch verbose {
        case 0:
            guard let text = environment["XFER_LOG_LEVEL"], !text.isEmpty else { return ServerConnection.silent }
            guard let named = Logger.Level(rawValue: text.lowercased()) else {
                throw XferError(
                    .invalidConfiguration,
                    "XFER_LOG_LEVEL is '\(text)'; it is one of trace, debug, info, notice, warning, error, critical")
            }
            level = named
        case 1: level = .debug
        default: level = .trace
        }
        var logger = Logger(label: "xfer.client") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = level ?? .info
        return logger
    }

    /// The key file the flag or XFER_KEY_FILE names, if any.
    func chosenKeyFile(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        Self.pick(keyFile, "XFER_KEY_FILE", nil, environment).map { ClientState.absolute($0) }
    }

    /// The server when no flag, variable or config file names one.
    static let defaultServer = "http://127.0.0.1:8750"

    /// The config file: `$XFER_CONFIG`, else `$XDG_CONFIG_HOME/xfer/config.json`, else `~/.config/xfer/config.json`.
    static func configPath(_ environment: [String: String]) -> String {
        if let explicit = environment["XFER_CONFIG"], !explicit.isEmpty { return explicit }
        if let xdg = environment["XDG_CONFIG_HOME"], !xdg.isEmpty { return xdg + "/xfer/config.json" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.config/xfer/config.json"
    }

    struct ConfigFile: Decodable {
        var server: String?
        var token: String?
        var container: String?
        /// The device the stored token was issued to (`xfer login`): the name this client writes as.
        var device: String?
    }

    /// The remote for a synced directory: its binding's server and container unless the flags
    /// name others, with the token from the usual places.
    func remote(boundTo state: SyncState) throws -> Remote {
        var options = self
        if options.server == nil { options.server = try state.meta("server") }
        if options.container == nil { options.container = try state.meta("container") }
        return try options.remote()
    }

    /// Where this device keeps `container`'s key on the server these options name: no token or
    /// server needed, so a key can be shown or forgotten offline.
    func containerKeyFile() throws -> ContainerKeyFile {
        let environment = ProcessInfo.processInfo.environment
        let file = try configFile(environment)
        let server = Self.pick(self.server, "XFER_SERVER", file.server, environment) ?? Self.defaultServer
        let container = try ContainerName(
            Self.pick(self.container, "XFER_CONTAINER", file.container, environment) ?? ContainerName.default.value)
        return ContainerKeyFile(
            stateDirectory: stateDir ?? ClientState.defaultDirectory(environment: environment), server: server,
            container: container,
            keyFile: chosenKeyFile(environment))
    }

    private static func pick(_ flag: String?, _ variable: String, _ fromFile: String?, _ environment: [String: String])
        -> String?
    {
        if let flag, !flag.isEmpty { return flag }
        if let value = environment[variable], !value.isEmpty { return value }
        return fromFile
    }

    private func configFile(_ environment: [String: String]) throws -> ConfigFile {
        let path = Self.configPath(environment)
        guard let data = FileManager.default.contents(atPath: path) else { return ConfigFile() }
        do {
            return try JSONDecoder().decode(ConfigFile.self, from: data)
        } catch {
            throw XferError(
                .invalidConfiguration,
                "the config file \(path) is not valid JSON of the form {\"server\": …, \"token\": …, \"container\": …}")
        }
    }

    func remote() throws -> Remote {
        let environment = ProcessInfo.processInfo.environment
        let path = Self.configPath(environment)
        let file = try configFile(environment)
        func pick(_ flag: String?, _ variable: String, _ fromFile: String?) -> String? {
            Self.pick(flag, variable, fromFile, environment)
        }
        let server = pick(self.server, "XFER_SERVER", file.server) ?? Self.defaultServer
        guard let token = pick(self.token, "XFER_TOKEN", file.token) else {
            throw XferError(
                .unauthorized,
                "no token: pass --token, set XFER_TOKEN, or put \"token\" in \(path) (or run `xfer login` once; an admin creates an account's first token with `xfer account create NAME`)"
            )
        }
        let container = try ContainerName(
            pick(self.container, "XFER_CONTAINER", file.container) ?? ContainerName.default.value)
        let ca = pick(self.ca, "XFER_CA", nil)
        if let ca, !FileManager.default.isReadableFile(atPath: ca) {
            throw XferError(.invalidConfiguration, "cannot read the CA file \(ca) given by --ca or XFER_CA")
        }
        let stateDirectory = stateDir ?? ClientState.defaultDirectory(environment: environment)
        // A transfer's arrays that grow with its number of files go to unnamed files there once large.
        Spill.use(directory: stateDirectory)
        var retry = RetryPolicy()
        if let retries = try self.retries
            ?? environment["XFER_RETRIES"].map({ text in
                guard let number = Int(text) else {
                    throw XferError(.invalidConfiguration, "XFER_RETRIES is '\(text)'; it is a number, 0 or more")
                }
                return number
            })
        {
            guard retries >= 0 else {
                throw XferError(.invalidConfiguration, "--retries (or XFER_RETRIES) is a number, 0 or more")
            }
            retry.retries = retries
        }
        let bandwidth =
            try self.bwlimit
            ?? environment["XFER_BWLIMIT"].flatMap { $0.isEmpty ? nil : $0 }.map { text in
                guard let rate = ByteCount(parsing: text) else {
                    throw XferError(
                        .invalidConfiguration,
                        "XFER_BWLIMIT is '\(text)'; it is a rate such as 512K or 2M (bytes a second)")
                }
                return rate
            }
        if let bandwidth, bandwidth.value < BandwidthLimit.minimumBytesPerSecond {
            throw XferError(
                .invalidConfiguration,
                "--bwlimit (or XFER_BWLIMIT) is \(bandwidth.value) bytes a second; give 16K or more (slower, the server ends an upload as stalled)"
            )
        }
        var remote = Remote(
            connection: ServerConnection(
                server: server, token: token, trustRoots: ca, retry: retry, bandwidth: bandwidth?.value,
                logger: try logger(environment)),
            container: container, stateDirectory: stateDirectory, keyFile: chosenKeyFile(environment))
        // The device the token was issued to, when the token is the config file's: the server
        // records that name for its versions, and a sealed key-value entry must carry the same.
        if let device = pick(nil, "XFER_DEVICE", token == file.token ? file.device : nil) { remote.device = device }
        return remote
    }
}

/// Output flags shared by the transfer commands.
struct OutputOptions: ParsableArguments {
    @Flag(help: "Print one JSON object at the end instead of text.")
    var json = false

    @Flag(name: .shortAndLong, help: "No progress bar and no summary line.")
    var quiet = false
}

/// How a push compresses what it sends (`xfer push` and `xfer sync`).
struct CompressionOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "zstd level for the chunks a push sends: 1 to 19, or -1 to -7 for zstd's fast levels (faster, larger). The server stores what is sent.",
            valueName: "N"))
    var compressionLevel: Int32 = CompressionPolicy.default.level

    func validate() throws {
        guard CompressionPolicy.accepts(compressionLevel) else {
            throw ValidationError("--compression-level must be 1 to 19, or -1 to -7 for zstd's fast levels")
        }
    }

    /// The policy a push uses.
    var policy: CompressionPolicy {
        var policy = CompressionPolicy.default
        policy.level = compressionLevel
        return policy
    }
}

/// Exit codes (docs/CLI.md): stable per error code, so scripts can tell failures apart.
enum ExitCodes {
    static func code(for error: XferError) -> Int32 {
        switch error.code {
        case .unavailable, .rateLimited: return 3
        case .unauthorized, .forbidden: return 4
        case .notFound: return 5
        case .invalidPath, .badRequest, .invalidConfiguration: return 6
        case .conflict, .alreadyExists, .encryptedContainer: return 7
        case .quotaExceeded: return 8
        case .corruptChunk, .invalidManifest, .missingChunks: return 9
        case .io, .storageFull: return 10
        case .folderMissing: return 11
        case .rolledBack: return 12
        default: return 1
        }
    }
}

/// Runs a command body, turning an ``XferError`` into its message on stderr (JSON with
/// --json) and its exit code.
func runReportingErrors(json: Bool = false, _ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let error as XferError {
        if json {
            printJSON(ErrorBody(code: error.code.name, message: error.message))
        } else {
            printError("\(error.message)")
        }
        throw ExitCode(ExitCodes.code(for: error))
    }
}

/// Runs `body` with the remote these options name, closing its connection afterwards
/// whether `body` succeeds or throws.
/// - Parameter unlocking: The remote holds the container's key when it is end-to-end encrypted
///   (``Remote/unlocked()``): a push or pull then seals and opens what it sends and gets.
func withRemote<T>(
    _ options: ClientOptions, boundTo state: SyncState? = nil, unlocking: Bool = false,
    _ body: (Remote) async throws -> T
) async throws -> T {
    let remote = try state.map { try options.remote(boundTo: $0) } ?? options.remote()
    do {
        let result = try await body(unlocking ? try await remote.unlocked() : remote)
        await remote.connection.shutdown()
        return result
    } catch {
        await remote.connection.shutdown()
        throw error
    }
}

/// The shape of most client commands: one request through a ``DocumentClient``, then its
/// answer as one JSON object (`--json`) or as `text` prints it; errors as
/// ``runReportingErrors(json:_:)`` reports them.
func runClientCommand<T: Encodable>(
    _ options: ClientOptions, json: Bool, _ body: (DocumentClient) async throws -> T,
    text: (T) -> Void
) async throws {
    try await runReportingErrors(json: json) {
        let result = try await withRemote(options) { remote in try await body(DocumentClient(remote: remote)) }
        if json { printJSON(result) } else { text(result) }
    }
}

/// Prints a wire message as one line of JSON.
func printJSON(_ value: some Encodable) {
    print(String(decoding: WireJSON.encode(value), as: UTF8.self))
}
