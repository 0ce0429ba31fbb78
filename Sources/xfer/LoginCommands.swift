import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol
import XferServer

/// The terms of a new token as flags, one set for `xfer login`, `xfer token new` and
/// `xfer account new-token`.
struct TokenTermsOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A name for the device that will hold the token: recorded as the writer of every version it commits, and shown in token lists.",
            valueName: "NAME"))
    var device: String?

    @Flag(
        help:
            "The token only reads (pull, ls, versions, changes, fetch): no push, no commit, no deletion, no key-value or key writes."
    )
    var readOnly = false

    @Option(
        name: .customLong("for-container"),
        help: ArgumentHelp("The token may use this one container only.", valueName: "NAME"))
    var forContainer: String?

    @Option(
        help: ArgumentHelp(
            "The token expires after this long: 90d, 12h, 30m (never by default; at most ten years).", valueName: "SPAN"
        ))
    var expires: Span?

    func validate() throws {
        if let expires, expires.seconds < 1 {
            throw ValidationError("--expires is a span of a second or more, e.g. 30d")
        }
    }

    /// The terms, with `device` when no --device is given.
    func terms(device fallback: String? = nil) throws -> TokenTerms {
        let terms = TokenTerms(
            device: device ?? fallback, readOnly: readOnly ? true : nil, container: forContainer,
            expiresInSeconds: expires?.seconds)
        try terms.validate()
        return terms
    }
}

/// How tokens read in text.
enum TokenText {
    static func date(_ seconds: Int64, time: Bool = false) -> String {
        let date = Date(timeIntervalSince1970: TimeInterval(seconds))
        return time ? date.formatted(.iso8601) : date.formatted(.iso8601.year().month().day())
    }

    /// "full access, no expiry", "read-only, container notes, expires 2027-01-01T00:00:00Z".
    static func terms(_ scope: TokenScope, expiresAt: Int64?) -> String {
        let access = scope.isFull ? "full access" : scope.description
        return access + ", " + (expiresAt.map { "expires \(date($0, time: true))" } ?? "no expiry")
    }

    /// One line of a token list.
    static func line(_ token: TokenSummary) -> String {
        var fields = [
            token.id, token.device ?? (token.admin ? "(admin)" : "(no device)"),
            token.admin ? "admin" : (token.scope.isFull ? "full" : token.scope.description),
            "created \(date(token.createdAt))", token.expiresAt.map { "expires \(date($0, time: true))" } ?? "no expiry"
        ]
        if token.expired { fields.append("EXPIRED") }
        if token.current == true { fields.append("(this token)") }
        return fields.joined(separator: "\t")
    }

    static func list(_ tokens: [TokenSummary]) {
        if tokens.isEmpty { print("no tokens") }
        tokens.forEach { print(line($0)) }
    }
}

/// The client config file (`ClientOptions.configPath`) as one JSON object, written as well as
/// read: fields this client does not know are kept; the file and its directory are the user's
/// alone (0600 and 0700), and a write replaces the file whole (a crash leaves the old one).
struct ClientConfigFile {
    let path: String
    private(set) var fields: [String: Any]

    static func load(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ClientConfigFile {
        let path = ClientOptions.configPath(environment)
        guard FileManager.default.fileExists(atPath: path) else { return ClientConfigFile(path: path, fields: [:]) }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw XferError(.invalidConfiguration, "cannot read the config file \(path); nothing was changed")
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw XferError(
                .invalidConfiguration,
                "the config file \(path) is not one JSON object; fix or remove it first (nothing was changed)")
        }
        return ClientConfigFile(path: path, fields: object)
    }

    subscript(key: String) -> String? {
        get { fields[key] as? String }
        set { fields[key] = newValue }
    }

    /// Writes the file whole (``FileSystem/writeAtomically(_:to:durable:mode:)``: a new file of
    /// mode 0600 beside it, made durable, renamed over it, the directory synced). A config file
    /// that is a symbolic link (dotfiles kept elsewhere) is written where it points.
    func save() throws {
        let target = (path as NSString).resolvingSymlinksInPath
        // A directory made here holds a token: the user's alone. One that was there is left as it is.
        try FileManager.default.createDirectory(
            atPath: (target as NSString).deletingLastPathComponent,
            withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let data = try JSONSerialization.data(
            withJSONObject: fields, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        try FileSystem.writeAtomically(Array(data) + [UInt8(ascii: "\n")], to: target, mode: 0o600)
    }
}

extension Xfer {
    struct Login: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "login",
            abstract: "Give this device its own token and keep it in the client config file.",
            discussion: """
                Asks for an account token (the one `xfer account create` printed, or one an admin \
                issued with `xfer account new-token`) on the terminal with echo off, or reads it \
                from standard input when that is not a terminal (or from --token or XFER_TOKEN). \
                With it, asks the server for a new token named for this device (--device, else \
                this host's name), and stores only that one, with the server's URL, in the config \
                file (mode 0600; $XFER_CONFIG, else ~/.config/xfer/config.json). Later commands \
                need no --token, so tokens stay out of shell history and `ps`; versions this \
                device commits record its name; `xfer logout`, or `xfer token revoke ID` from \
                another device, ends this device's access alone. The account token is not stored.
                """)

        @OptionGroup var client: ClientOptions

        @OptionGroup var terms: TokenTermsOptions

        @Flag(help: "Print the stored token's terms as one JSON object (never the token).")
        var json = false

        func run() async throws {
            try await runReportingErrors(json: json) {
                let environment = ProcessInfo.processInfo.environment
                var config = try ClientConfigFile.load(environment)
                if let stored = config["token"] {
                    guard config[Self.marker] == TokenHash.publicID(ofHash: TokenHash.hash(stored)) else {
                        throw XferError(
                            .alreadyExists,
                            "\(config.path) already holds a token that `xfer login` did not store, and login will not drop it: "
                                + "keep a copy, remove \"token\" from the file, then log in (nothing was changed)")
                    }
                    let device = config["device"].map { " (device \($0))" } ?? ""
                    throw XferError(
                        .alreadyExists,
                        "already logged in: \(config.path) holds this device's token\(device); run `xfer logout` first (nothing was changed)"
                    )
                }
                var options = client
                options.server =
                    client.server ?? environment["XFER_SERVER"].flatMap { $0.isEmpty ? nil : $0 } ?? config["server"]
                    ?? ClientOptions.defaultServer
                options.token =
                    try client.token ?? environment["XFER_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
                    ?? Self.readAccountToken(server: options.server!)
                let newTerms = try terms.terms(device: ProcessInfo.processInfo.hostName)
                let info = try await withRemote(options) { try await $0.connection.issueOwnToken(newTerms) }
                config["server"] = options.server
                config["token"] = info.token
                config["device"] = info.device
                config[Self.marker] = info.id
                // A token of one container works in that one: make it the default.
                if let container = client.container ?? info.container { config["container"] = container }
                do {
                    try config.save()
                } catch {
                    // Nobody would hold the new token: take it back before saying so.
                    _ = try? await withRemote(options) {
                        try await $0.connection.revokeOwnToken(RevokeTokenRequest(token: info.token, account: nil))
                    }
                    throw error
                }
                if json {
                    printJSON(
                        LoginResult(
                            server: options.server!, account: info.account, id: info.id, device: info.device,
                            readOnly: info.readOnly ?? false,
                            container: info.container, expiresAt: info.expiresAt, config: config.path))
                    return
                }
                let scope = TokenScope(readOnly: info.readOnly ?? false, container: info.container)
                print(
                    "logged in to \(options.server!) as \(info.account) on device \(info.device ?? "?") "
                        + "(token \(info.id ?? "?"): \(TokenText.terms(scope, expiresAt: info.expiresAt)))")
                print("the token is in \(config.path) (mode 0600); `xfer logout` revokes it")
            }
        }

        /// The config file's key that says `xfer login` stored its token (the token's public
        /// id): `xfer logout` revokes only such a token.
        static let marker = "token_id"

        /// The account token, from the terminal with echo off or as the first line of a standard
        /// input that is not one.
        static func readAccountToken(server: String) throws -> String {
            if isatty(STDIN_FILENO) == 1 {
                return try PassphraseOptions.ask(
                    "Account token for \(server)",
                    otherwise: "pipe it on standard input, or set XFER_TOKEN")
            }
            var line: [UInt8] = []
            var byte: UInt8 = 0
            while read(STDIN_FILENO, &byte, 1) == 1, byte != UInt8(ascii: "\n"), line.count < 4096 { line.append(byte) }
            let token = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !token.isEmpty else {
                throw XferError(
                    .invalidConfiguration,
                    "no account token on standard input; pipe one, set XFER_TOKEN or run on a terminal (nothing was changed)"
                )
            }
            return token
        }
    }

    struct Logout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "logout",
            abstract: "Revoke this device's token on the server and remove it from the config file.",
            discussion: """
                The token `xfer login` stored is revoked on the server first, then removed from the \
                config file (the server's URL and other settings stay). It is not revoked when it is \
                the account's only token of full access (the account could then be reached only \
                through the admin) unless --yes. A token the server no longer takes (revoked or \
                expired) is removed at once. When the server cannot be reached the token is kept, \
                unless --forget: it then stays valid on the server until revoked from another \
                device (`xfer token revoke ID`). A token login did not store is never revoked: \
                --forget removes it from the file only.
                """)

        @OptionGroup var client: ClientOptions

        @Flag(
            help:
                "Remove the token from the config file even when the server cannot be told, or when login did not store it (it is then not revoked)."
        )
        var forget = false

        @Flag(help: "Revoke it even when it is the account's only token of full access.")
        var yes = false

        @Flag(help: "Print {\"revoked\": N, \"removed\": true} as JSON.")
        var json = false

        func run() async throws {
            try await runReportingErrors(json: json) {
                var config = try ClientConfigFile.load()
                guard let token = config["token"] else {
                    throw XferError(.notFound, "not logged in: \(config.path) holds no token")
                }
                var revoked = 0
                var note: String?
                // Only the token login stored, by the id it recorded beside it.
                if config[Login.marker] != TokenHash.publicID(ofHash: TokenHash.hash(token)) {
                    guard forget else {
                        throw XferError(
                            .badRequest,
                            "the token in \(config.path) was not stored by `xfer login`, so logout does not revoke it; "
                                + "--forget removes it from the file only (nothing was changed)")
                    }
                    note = "it was not revoked (login did not store it)"
                } else {
                    var options = client
                    options.token = token
                    options.server = client.server ?? config["server"]
                    let sameServer = options.server == nil || options.server == config["server"]
                    do {
                        revoked = try await withRemote(options) { remote in
                            if !yes { try await Self.refuseLockingOut(remote.connection) }
                            return try await remote.connection.revokeOwnToken(
                                RevokeTokenRequest(token: token, account: nil)
                            ).revoked
                        }
                    } catch let error as XferError where error.code == .unauthorized && sameServer {
                        note = "the server no longer took it (\(error.message))"
                    } catch let error as XferError where forget && error.code != .forbidden {
                        note =
                            "the server was not told (\(error.message)); it stays valid there until revoked from another device"
                    }
                }
                config["token"] = nil
                config["device"] = nil
                config[Login.marker] = nil
                try config.save()
                if json {
                    printJSON(LogoutResult(revoked: revoked, removed: true))
                    return
                }
                if let note {
                    print("removed the token from \(config.path); \(note)")
                } else {
                    print(
                        "logged out: the token was revoked on \(config["server"] ?? "the server") and removed from \(config.path)"
                    )
                }
            }
        }

        /// Throws `forbidden` when the connection's token is the account's only one of full
        /// access that has not expired (a narrower token cannot list, and is never the only way in).
        static func refuseLockingOut(_ connection: ServerConnection) async throws {
            let tokens: [TokenSummary]
            do {
                tokens = try await connection.ownTokens()
            } catch let error as XferError where error.code == .forbidden {
                return
            }
            let others = tokens.filter { $0.current != true && $0.scope.isFull && !$0.expired && !$0.admin }
            if others.isEmpty {
                throw XferError(
                    .forbidden,
                    "this device's token is the account's only one with full access: revoking it would leave the account "
                        + "reachable only through the server's admin; issue another first (xfer token new) or pass --yes (nothing was changed)"
                )
            }
        }
    }

    struct TokenCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "token",
            abstract: "List, issue and revoke your account's tokens (with a token of full access).",
            subcommands: [List.self, New.self, Revoke.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list",
                abstract: "List the account's tokens: id, device, scope, creation and expiry; this one marked.",
                discussion: "Never shows a token, only its public id (what `xfer token revoke` takes).")

            @OptionGroup var client: ClientOptions

            @Flag(help: "Print {\"tokens\": [...]} as JSON.")
            var json = false

            func run() async throws {
                try await runClientCommand(
                    client, json: json, { TokenList(tokens: try await $0.remote.connection.ownTokens()) },
                    text: { TokenText.list($0.tokens) })
            }
        }

        struct New: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "new",
                abstract: "Issue another token of the account and print it alone on stdout.",
                discussion: """
                    For another device, a script or a WebDAV client: narrow it with --read-only, \
                    --for-container and --expires. It never outlives the token that asks. For this \
                    device, `xfer login` stores one instead of printing it.
                    """)

            @OptionGroup var client: ClientOptions

            @OptionGroup var terms: TokenTermsOptions

            @Flag(help: "Print the token with its terms as one JSON object.")
            var json = false

            func run() async throws {
                let terms = try terms.terms()
                try await runClientCommand(
                    client, json: json, { try await $0.remote.connection.issueOwnToken(terms) },
                    text: { print($0.token) })
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke",
                abstract: "Revoke one of the account's tokens by its id (from `xfer token list`).",
                discussion:
                    "A revoked token is refused from its next request on, and its web sessions end. Exits 5 if the account has no token with that id."
            )

            @Argument(help: ArgumentHelp("The token's id: 16 hex digits.", valueName: "ID"))
            var id: String

            @OptionGroup var client: ClientOptions

            @Flag(help: "Print {\"revoked\": N} as JSON.")
            var json = false

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let result = try await withRemote(client) {
                        try await $0.connection.revokeOwnToken(RevokeTokenRequest(token: nil, account: nil, id: id))
                    }
                    guard result.revoked > 0 else {
                        throw XferError(.notFound, "the account has no token with id \(id)")
                    }
                    if json { printJSON(result) } else { print("revoked token \(id)") }
                }
            }
        }
    }
}

/// What `xfer login --json` prints: the stored token's terms, never the token.
struct LoginResult: Encodable {
    var server: String
    var account: String
    var id: String?
    var device: String?
    var readOnly: Bool
    var container: String?
    var expiresAt: Int64?
    var config: String
}

/// What `xfer logout --json` prints.
struct LogoutResult: Encodable {
    var revoked: Int
    var removed: Bool
}
