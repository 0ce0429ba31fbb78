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
                A container that does not exist yet is made, empty. An end-to-end encrypted \
                container's key is wrapped to the account's key: its fingerprint is shown to compare \
                out of band first (or give --fingerprint); an account with no key yet is added, and \
                gets the key when this is run again after it made one (`xfer account key`).
                """)

        @Argument(help: "Your container's name.")
        var container: String

        @Argument(help: "The account to share it with.")
        var account: String

        @Option(help: "reader or writer.")
        var role: ContainerRole = .reader

        @Option(
            help: ArgumentHelp(
                "The account key's fingerprint, as compared with its owner (else asked).", valueName: "FINGERPRINT"))
        var fingerprint: String?

        @Flag(help: "Print the member as one JSON object.")
        var json = false

        @OptionGroup var client: ClientOptions

        func validate() throws {
            guard role != .owner else { throw ValidationError("--role is reader or writer") }
        }

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                try await share(
                    Remote(
                        connection: client.remote.connection, container: try ContainerName(container),
                        stateDirectory: client.remote.stateDirectory),
                    with: try AccountName(account))
            } text: { shared in
                print("\(container) is shared with \(shared.member.account) as \(shared.member.role.rawValue)")
                if let note = shared.note { print(note) }
            }
        }

        /// Adds the member and, in an encrypted container, wraps the key to its checked account key.
        private func share(_ remote: Remote, with member: AccountName) async throws -> ShareOutcome {
            guard try await remote.connection.containerKey(container: remote.container).encrypted else {
                let info = try await remote.connection.setMember(
                    container: remote.container, account: member, role: role)
                return ShareOutcome(member: info)
            }
            let containers = EncryptedContainers(remote: remote)
            let accounts = AccountKeys(connection: remote.connection, stateDirectory: remote.stateDirectory)
            let found = try await containers.memberKey(member, accounts: accounts)
            guard let key = found.key else {
                let info = try await remote.connection.setMember(
                    container: remote.container, account: member, role: role)
                return ShareOutcome(
                    member: info,
                    note: """
                        \(member) has no account key yet, so it cannot open the container: once it ran `xfer account key`, \
                        run this command again to give it the key
                        """)
            }
            guard try await containers.status().unlocked else {
                throw XferError(
                    .unauthorized,
                    "this device does not hold the current key of \(remote.container): run `xfer key unlock` first; nothing was shared"
                )
            }
            if !found.checked {
                guard try confirmFingerprint(of: member, key, given: fingerprint) else {
                    throw XferError(.unauthorized, "\(member)'s fingerprint was not confirmed; nothing was shared")
                }
            }
            _ = try await remote.connection.setMember(container: remote.container, account: member, role: role)
            let members = try await containers.wrap(for: member, key: key, accounts: accounts)
            guard let info = members.first(where: { $0.account == member.value }) else {
                throw XferError(.internal, "the server's member list after wrapping the key leaves \(member) out")
            }
            return ShareOutcome(
                member: info, fingerprint: key.fingerprint,
                note: "the container's key \(info.keyID ?? "") is wrapped to \(member)'s key \(key.fingerprint)")
        }
    }

    struct Unshare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unshare",
            abstract: "End another account's access to one of your containers, at once.",
            discussion: """
                Its next request is refused, and a change feed it has waiting is answered. What \
                its devices already downloaded stays on them; nothing in the container is \
                deleted. An end-to-end encrypted container's key is rotated: what is written from \
                now on is sealed under a new key, wrapped by the passphrase (asked for first) and to \
                the remaining members whose keys this device checked.
                """)

        @Argument(help: "Your container's name.")
        var container: String

        @Argument(help: "The member's account.")
        var account: String

        @Flag(help: "Print the result as JSON.")
        var json = false

        @OptionGroup var passphrase: PassphraseOptions

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json) { client in
                let remote = Remote(
                    connection: client.remote.connection, container: try ContainerName(container),
                    stateDirectory: client.remote.stateDirectory)
                let member = try AccountName(account)
                guard try await remote.connection.containerKey(container: remote.container).encrypted else {
                    // A server that says plain what this device holds a key of would skip the rotation.
                    if let held = try remote.containerKeyFile.read() {
                        throw XferError(
                            .encryptedContainer,
                            """
                            this device holds key \(held.current.id) of \(container), but the server says it is not encrypted; \
                            nothing was done (removing a member of an encrypted container rotates its key)
                            """)
                    }
                    try await remote.connection.removeMember(container: remote.container, account: member)
                    return UnshareOutcome(container: container, unshared: account)
                }
                // The passphrase first: a wrong one stops the command before the member is removed.
                let containers = EncryptedContainers(remote: remote)
                let given = try passphrase.current(prompt: "Passphrase for container \(container)")
                try await containers.checkPassphrase(given)
                try await remote.connection.removeMember(container: remote.container, account: member)
                return UnshareOutcome(
                    container: container, unshared: account, rotation: try await rotateAfterRemoving(containers, given))
            } text: { outcome in
                print("\(container) is no longer shared with \(account)")
                if let rotation = outcome.rotation { printRotation(rotation) }
            }
        }

        private func rotateAfterRemoving(_ containers: EncryptedContainers, _ passphrase: String) async throws
            -> EncryptedContainers.Rotation
        {
            do {
                return try await containers.rotate(
                    passphrase: passphrase,
                    accounts: AccountKeys(
                        connection: containers.remote.connection, stateDirectory: containers.remote.stateDirectory))
            } catch let error as XferError {
                throw XferError(
                    error.code,
                    "\(account) was removed, but the key was not rotated (\(error.message)); run `xfer key rotate --container \(container)`"
                )
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

/// What `xfer container share` did: the member (as `xfer container members` lists it), and in
/// an encrypted container the fingerprint of the account key its key was wrapped to.
struct ShareOutcome: Encodable {
    var member: MemberInfo
    var fingerprint: String?
    var note: String?

    func encode(to encoder: any Encoder) throws {
        try member.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(fingerprint, forKey: .fingerprint)
        try container.encodeIfPresent(note, forKey: .note)
    }

    enum Keys: String, CodingKey { case fingerprint, note }
}

/// What `xfer container unshare` did.
struct UnshareOutcome: Encodable {
    var container: String
    var unshared: String
    /// The new key of an encrypted container, and who it was wrapped to.
    var rotation: EncryptedContainers.Rotation?
}
