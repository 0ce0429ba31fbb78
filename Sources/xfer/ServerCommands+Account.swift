import ArgumentParser
import Foundation
import Logging
import XferClient
import XferCore
import XferProtocol
import XferServer

extension Xfer {
    struct Account: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "account",
            abstract: "Manage accounts.",
            subcommands: [
                Create.self, List.self, Show.self, SetQuota.self, Delete.self, NewToken.self, Tokens.self,
                RevokeToken.self, Key.self
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
