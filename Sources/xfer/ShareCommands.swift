import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    struct Share: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Make, list and revoke read-only links to a document.",
            discussion: """
                A share link opens one document, read only, for anyone who has it: its page and \
                its download at the server's /s/…, no account needed. It is what the web view's \
                Share a link makes, with the same rules (docs/WEB.md): the link is shown once \
                (the server keeps only its hash), lasts a week unless --expires says otherwise \
                (never longer than the token that made it), and ends when it is revoked or the \
                document is deleted. End-to-end encrypted containers have no share links.
                """,
            subcommands: [Create.self, List.self, Revoke.self])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "create", abstract: "Make a link to a document and print it (shown this once).")

            @Argument(help: "The document's path in the container.")
            var name: String

            @Option(
                help: ArgumentHelp("Show this version only (default: whatever is current when opened).", valueName: "N")
            )
            var version: Int64?

            @Option(
                help: ArgumentHelp(
                    "How long it lasts: 12h, 7d, 365d at most; 0 until revoked (default: 7d).", valueName: "SPAN"))
            var expires: Span?

            @Flag(
                help: """
                    Ask for a password the link will ask for (or read XFER_SHARE_PASSWORD); \
                    a browser that gives it may open the link.
                    """)
            var password = false

            @Flag(help: "Print the link as one JSON object.")
            var json = false

            @OptionGroup var client: ClientOptions

            func validate() throws {
                if let expires, expires.seconds > ShareCreateRequest.maximumSeconds {
                    throw ValidationError("--expires is at most 365d (0: until revoked)")
                }
            }

            func run() async throws {
                let secret = try password ? Self.password() : nil
                try await runClientCommand(client, json: json) { client in
                    let request = ShareCreateRequest(
                        path: try DocumentPath(name), version: version, expiresIn: expires?.seconds, password: secret)
                    return try await client.remote.connection.createShare(
                        container: client.remote.container, request)
                } text: { link in
                    print(link.url ?? "")
                    let until = link.expiresAt.map { "expires \(formatTime($0))" } ?? "lasts until revoked"
                    FileHandle.standardError.write(
                        Data(
                            "share link \(link.id) to \(link.path) (\(link.version.map { "version \($0)" } ?? "current version"), \(until)\(link.hasPassword ? ", password" : ""))\n"
                                .utf8))
                }
            }

            static func password() throws -> String {
                if let given = try PassphraseOptions.given(nil, "XFER_SHARE_PASSWORD") { return given }
                return try PassphraseOptions.ask(
                    "Password for the link", otherwise: "give it in XFER_SHARE_PASSWORD")
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list", abstract: "List this account's links in the container, newest first.")

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runClientCommand(client, json: json) { client in
                    ShareList(shares: try await client.remote.connection.shares(container: client.remote.container))
                } text: { list in
                    for link in list.shares {
                        let state =
                            link.expired
                            ? "expired" : link.expiresAt.map { "until \(formatTime($0))" } ?? "until revoked"
                        print(
                            "\(link.id)".padding(toLength: 6, withPad: " ", startingAt: 0)
                                + "\(link.path)  \(link.version.map { "v\($0)" } ?? "current")  \(state)"
                                + (link.hasPassword ? "  password" : ""))
                    }
                    if list.shares.isEmpty { print("no share links in this container") }
                }
            }
        }

        struct Revoke: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "revoke", abstract: "End a link at once (its id from `xfer share list`).")

            @Argument(help: "The link's id.")
            var id: Int64

            @Flag(help: "Print the result as JSON.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runClientCommand(client, json: json) { client in
                    try await client.remote.connection.revokeShare(container: client.remote.container, id: id)
                    return ["revoked": id]
                } text: { _ in
                    print("share link \(id) revoked")
                }
            }
        }
    }
}
