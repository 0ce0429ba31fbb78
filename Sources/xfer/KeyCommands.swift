import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    struct Container: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "container",
            abstract: "List containers, share them with other accounts, make an encrypted one.",
            discussion: """
                A plain container needs no creating: its first push makes it. `share` gives \
                another account a reader's or a writer's access to one (docs/SHARING.md); that \
                account names it OWNER/NAME. An end-to-end encrypted one is made with `create`, \
                empty, under a new random key that only devices holding it can use; the server \
                keeps the key wrapped by your passphrase (docs/SECURITY.md, "End-to-end \
                encryption") and refuses plain documents and values there.
                """,
            subcommands: [
                List.self, Share.self, Unshare.self, Members.self, Leave.self, Create.self, Show.self
            ])

        struct Create: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "create",
                abstract: "Make a new end-to-end encrypted container and print its recovery key.",
                discussion: """
                    Asks for a passphrase twice (or reads --passphrase-file / XFER_PASSPHRASE), \
                    keeps the key on this device (mode 0600 under the state directory), and prints \
                    the recovery key once: write it down; without it and the passphrase the data \
                    cannot be read by anyone. Refused for a container that already holds data.
                    """)

            @Argument(help: "The container's name.")
            var name: String

            @Flag(help: "End-to-end encrypted (required: a plain container is made by its first push).")
            var encrypted = false

            @OptionGroup var passphrase: PassphraseOptions

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func validate() throws {
                guard encrypted else {
                    throw ValidationError(
                        "only --encrypted containers are made here; a plain container is made by its first push")
                }
            }

            func run() async throws {
                var client = client
                client.container = name
                try await runReportingErrors(json: json) {
                    let secret = try passphrase.new(prompt: "Passphrase for container \(name)", orCurrent: true)
                    let key = try await withRemote(client) { remote in
                        try await EncryptedContainers(remote: remote).create(passphrase: secret)
                    }
                    if json {
                        printJSON(["container": name, "key_id": key.id, "recovery_key": key.recoveryText])
                    } else {
                        print("made end-to-end encrypted container \(name) (key \(key.id))")
                        print("recovery key: \(key.recoveryText)")
                        printError(
                            "write the recovery key down and keep it apart from this device: with neither it nor the passphrase, nobody can read the container"
                        )
                    }
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "Show whether a container is encrypted and whether this device holds its key.")

            @Argument(help: "The container's name (default: --container, XFER_CONTAINER, …).")
            var name: String?

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                var client = client
                if let name { client.container = name }
                try await runReportingErrors(json: json) {
                    let (container, status) = try await withRemote(client) { remote in
                        (remote.container, try await EncryptedContainers(remote: remote).status())
                    }
                    if json {
                        printJSON(status)
                        return
                    }
                    guard status.encrypted, let keyID = status.keyID else {
                        print("\(container): not encrypted")
                        return
                    }
                    print(
                        "\(container): end-to-end encrypted, key \(keyID), \(status.unlocked ? "unlocked on this device" : "locked on this device (xfer key unlock)")"
                    )
                }
            }
        }
    }

    struct Key: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "key",
            abstract: "The key of an end-to-end encrypted container on this device.",
            discussion: """
                The container is --container (or XFER_CONTAINER, …). Passphrases are asked for on \
                the terminal, or read from --passphrase-file / XFER_PASSPHRASE and \
                --new-passphrase-file / XFER_NEW_PASSPHRASE.
                """,
            subcommands: [Unlock.self, Change.self, Rotate.self, ExportRecovery.self, Recover.self, Forget.self])

        struct Unlock: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "unlock",
                abstract:
                    "Unlock the container on this device with its passphrase, or as a member with the account's key.",
                discussion: """
                    A container another account shares with you (OWNER/NAME) opens with the key its \
                    owner wrapped to your account's key (`xfer account key`): the first time, compare \
                    the owner's fingerprint.
                    """)

            @OptionGroup var passphrase: PassphraseOptions
            @Option(
                help: ArgumentHelp(
                    "The owner's fingerprint, as compared with them (else asked).", valueName: "FINGERPRINT"))
            var ownerFingerprint: String?
            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runKeyCommand(
                    client, json: json,
                    { containers in
                        let remote = containers.remote
                        guard remote.container.owner != nil else {
                            return try await containers.unlock(
                                passphrase: try passphrase.current(
                                    prompt: "Passphrase for container \(remote.container)"))
                        }
                        let accounts = AccountKeys(connection: remote.connection, stateDirectory: remote.stateDirectory)
                        return try await containers.unlockAsMember(
                            confirm: { try confirmFingerprint(of: $0, $1, given: ownerFingerprint) }, accounts: accounts
                        ).current
                    }
                ) { container, key in "unlocked \(container) (key \(key.id))" }
            }
        }

        struct Change: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "change",
                abstract: "Change the container's passphrase (the key and the data stay).",
                discussion: "Needs the key on this device (unlocked) or, with --ask-current, the current passphrase.")

            @OptionGroup var passphrase: PassphraseOptions
            @Flag(help: "Ask for the current passphrase even if this device holds the key.")
            var askCurrent = false
            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let container = try await withRemote(client) { remote in
                        let containers = EncryptedContainers(remote: remote)
                        let held = try? await containers.status()
                        let current =
                            askCurrent || held?.unlocked != true
                            ? try passphrase.current(prompt: "Current passphrase for container \(remote.container)")
                            : nil
                        let new = try passphrase.new(prompt: "New passphrase for container \(remote.container)")
                        try await containers.changePassphrase(to: new, currentPassphrase: current)
                        return remote.container
                    }
                    if json {
                        printJSON(["container": container.value, "changed": "passphrase"])
                    } else {
                        print("changed the passphrase of \(container)")
                    }
                }
            }
        }

        struct ExportRecovery: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "export-recovery",
                abstract: "Print the recovery key of the container's key this device holds (no server needed).")

            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let file = try client.containerKeyFile()
                    guard let key = try file.read()?.current else {
                        throw XferError(
                            .unauthorized,
                            "this device does not hold the key of that container: run `xfer key unlock` first")
                    }
                    if json {
                        printJSON(["key_id": key.id, "recovery_key": key.recoveryText, "key_file": file.path])
                    } else {
                        print(key.recoveryText)
                    }
                }
            }
        }

        struct Recover: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "recover",
                abstract: "Restore the key from its recovery key and set a new passphrase.",
                discussion: "For a forgotten passphrase. The recovery key is read from --recovery-file, else asked for."
            )

            @Option(help: ArgumentHelp("A file holding the recovery key.", valueName: "FILE"), completion: .file())
            var recoveryFile: String?
            @OptionGroup var passphrase: PassphraseOptions
            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let text: String
                    if let recoveryFile {
                        guard let data = FileManager.default.contents(atPath: recoveryFile) else {
                            throw XferError(.invalidConfiguration, "cannot read the recovery key file \(recoveryFile)")
                        }
                        text = String(decoding: data.prefix(4096), as: UTF8.self)
                    } else {
                        text = try PassphraseOptions.ask("Recovery key")
                    }
                    try await runKeyCommand(
                        client, json: json,
                        { containers in
                            let new = try passphrase.new(
                                prompt: "New passphrase for container \(containers.remote.container)")
                            return try await containers.recover(recoveryText: text, newPassphrase: new)
                        }
                    ) { container, key in "recovered \(container) (key \(key.id)) and set a new passphrase" }
                }
            }
        }

        struct Forget: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "forget",
                abstract: "Remove the container's key from this device (unlock again to use it; no server needed).")

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors {
                    let removed = try client.containerKeyFile().remove()
                    print(
                        removed
                            ? "forgot the container's key on this device" : "this device held no key of that container")
                }
            }
        }
    }
}

/// Runs a key command: `body` with the container's key management, then its key as JSON
/// (`container`, `key_id` and `fields`) or as `text`.
func runKeyCommand(
    _ client: ClientOptions, json: Bool, _ body: (EncryptedContainers) async throws -> ContainerKey,
    fields: (ContainerKey) -> [String: String] = { _ in [:] }, text: (ContainerName, ContainerKey) -> String
) async throws {
    try await runReportingErrors(json: json) {
        let (container, key) = try await withRemote(client) { remote in
            (remote.container, try await body(EncryptedContainers(remote: remote)))
        }
        if json {
            printJSON(["container": container.value, "key_id": key.id].merging(fields(key)) { $1 })
        } else {
            print(text(container, key))
        }
    }
}

/// Where passphrases come from: a file, the environment, else the terminal (never echoed).
struct PassphraseOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A file whose first line is the (current) passphrase (default: XFER_PASSPHRASE, else asked).",
            valueName: "FILE"),
        completion: .file())
    var passphraseFile: String?

    @Option(
        help: ArgumentHelp(
            "A file whose first line is the new passphrase (default: XFER_NEW_PASSPHRASE, else asked twice).",
            valueName: "FILE"),
        completion: .file())
    var newPassphraseFile: String?

    /// The current passphrase.
    func current(prompt: String) throws -> String {
        try Self.given(passphraseFile, "XFER_PASSPHRASE") ?? Self.ask(prompt)
    }

    /// A new passphrase: from --new-passphrase-file or XFER_NEW_PASSPHRASE (or, where there is
    /// no current one, `orCurrent`, from --passphrase-file or XFER_PASSPHRASE), else asked twice.
    func new(prompt: String, orCurrent: Bool = false) throws -> String {
        if let given = try Self.given(newPassphraseFile, "XFER_NEW_PASSPHRASE") { return given }
        if orCurrent, let given = try Self.given(passphraseFile, "XFER_PASSPHRASE") { return given }
        let first = try Self.ask(prompt)
        guard try Self.ask("Again") == first else {
            throw XferError(.invalidConfiguration, "the two passphrases differ; nothing was changed")
        }
        return first
    }

    static func given(_ file: String?, _ variable: String) throws -> String? {
        if let file {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw XferError(.invalidConfiguration, "cannot read the passphrase file \(file)")
            }
            let line =
                String(decoding: data.prefix(4096), as: UTF8.self).split(
                    separator: "\n", omittingEmptySubsequences: false
                ).first ?? ""
            let passphrase = line.hasSuffix("\r") ? String(line.dropLast()) : String(line)
            guard !passphrase.isEmpty else {
                throw XferError(.invalidConfiguration, "the passphrase file \(file) starts with an empty line")
            }
            return passphrase
        }
        if let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty { return value }
        return nil
    }

    /// Asks on the terminal with echo off.
    /// - Parameter otherwise: How to give it without a terminal, for the error when there is none.
    static func ask(
        _ prompt: String,
        otherwise: String = "give it with --passphrase-file FILE or XFER_PASSPHRASE (XFER_NEW_PASSPHRASE for a new one)"
    ) throws -> String {
        let answer = try terminalLine("\(prompt): ", echo: false, asking: prompt.lowercased(), otherwise: otherwise)
        guard !answer.isEmpty else { throw XferError(.invalidConfiguration, "nothing was typed; nothing was changed") }
        return answer
    }
}

/// A line typed on the terminal after `prompt`, at most 4,096 bytes, echoed or not.
/// - Parameters:
///   - asking: What is asked for, for the error when there is no terminal.
///   - otherwise: How to give it without a terminal, for that error.
/// - Throws: `invalid_configuration` when there is no terminal.
func terminalLine(_ prompt: String, echo: Bool, asking: String, otherwise: String) throws -> String {
    let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
    guard fd >= 0 else {
        throw XferError(.invalidConfiguration, "no terminal to ask for \(asking) on: \(otherwise)")
    }
    defer { close(fd) }
    var saved = termios()
    let quiet = !echo && tcgetattr(fd, &saved) == 0
    if quiet {
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        _ = tcsetattr(fd, TCSAFLUSH, &silent)
    }
    defer { if quiet { _ = tcsetattr(fd, TCSAFLUSH, &saved) } }
    let text = Array(prompt.utf8)
    _ = write(fd, text, text.count)
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n"), line.count < 4096 { line.append(byte) }
    if quiet { _ = write(fd, [UInt8(ascii: "\n")], 1) }
    return String(decoding: line, as: UTF8.self)
}
