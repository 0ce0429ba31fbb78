import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

/// `xfer container list|share|unshare|members|leave`: containers shared between accounts
/// (docs/SHARING.md).
extension Xfer.Container {
    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List this account's containers, then those other accounts share with it.",
            discussion: """
                A container shared with you is named OWNER/NAME: give that to --container (or in \
                the web view, WebDAV and xfer sync) to reach it, as its role allows.
                """)

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                ContainerList(containers: try await client.remote.connection.containers())
            } text: { list in
                for entry in list.containers {
                    var notes = [entry.role == .owner ? "yours" : entry.role.rawValue]
                    if entry.members > 0 { notes.append("shared with \(entry.members)") }
                    if entry.encrypted { notes.append("end-to-end encrypted") }
                    print("\(entry.container)  (\(notes.joined(separator: ", ")))")
                }
                if list.containers.isEmpty { print("no containers yet: the first push makes one") }
            }
        }
    }

    struct Share: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "share",
            abstract: "Share one of your containers with another account, or change its role.",
            discussion: """
                A reader sees every document and version and changes nothing; a writer also \
                pushes, deletes, resolves conflicts and writes values. The account names the \
                container YOUR-ACCOUNT/CONTAINER. What a member stores counts against your quota. \
                A container that does not exist yet is made, empty.
                """)

        @Argument(help: "Your container's name.")
        var container: String

        @Argument(help: "The account to share it with.")
        var account: String

        @Option(help: "reader or writer.")
        var role: ContainerRole = .reader

        @Flag(help: "Print the member as one JSON object.")
        var json = false

        @OptionGroup var client: ClientOptions

        func validate() throws {
            guard role != .owner else { throw ValidationError("--role is reader or writer") }
        }

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                try await client.remote.connection.setMember(
                    container: try ContainerName(container), account: try AccountName(account), role: role)
            } text: { member in
                print("\(container) is shared with \(member.account) as \(member.role.rawValue)")
            }
        }
    }

    struct Unshare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unshare",
            abstract: "End another account's access to one of your containers, at once.",
            discussion: """
                Its next request is refused, and a change feed it has waiting is answered. What \
                its devices already downloaded stays on them; nothing in the container is \
                deleted.
                """)

        @Argument(help: "Your container's name.")
        var container: String

        @Argument(help: "The member's account.")
        var account: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                try await client.remote.connection.removeMember(
                    container: try ContainerName(container), account: try AccountName(account))
                return ["container": container, "unshared": account]
            } text: { _ in
                print("\(container) is no longer shared with \(account)")
            }
        }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "leave",
            abstract: "Stop being a member of a container another account shares with you.",
            discussion: "Nothing in the container is deleted; its owner may share it with you again.")

        @Argument(help: "The container, as OWNER/NAME.")
        var container: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                let name = try ContainerName(container)
                guard name.owner != nil else {
                    throw XferError(
                        .badRequest,
                        "name the container as OWNER/NAME; to stop sharing your own, use xfer container unshare")
                }
                let me = try await client.remote.connection.account().name
                try await client.remote.connection.removeMember(container: name, account: try AccountName(me))
                return ["left": container]
            } text: { _ in
                print("you are no longer a member of \(container)")
            }
        }
    }

    struct Members: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "members", abstract: "List the accounts a container is shared with, and their roles.")

        @Argument(help: "The container: yours, or OWNER/NAME for one shared with you.")
        var container: String

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                MemberList(members: try await client.remote.connection.members(container: try ContainerName(container)))
            } text: { list in
                for member in list.members {
                    print("\(member.account)  \(member.role.rawValue)  since \(formatTime(member.addedAt))")
                }
                if list.members.isEmpty { print("\(container) is shared with no one") }
            }
        }
    }
}

extension ContainerRole: ExpressibleByArgument {}
