import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

/// `xfer account key [show|export|import]`: this account's key pair, which encrypted
/// containers are shared to (docs/SHARING.md, "Encrypted containers").
extension Xfer.Account {
    struct Key: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "key",
            abstract: "This account's key pair, for sharing end-to-end encrypted containers.",
            discussion: """
                An encrypted container's key is wrapped to a member's public key. Compare \
                fingerprints out of band (in person, or on a call) before sharing: `xfer container \
                share` shows the member's and asks.
                """,
            subcommands: [Show.self, Export.self, Import.self], defaultSubcommand: Show.self)

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract: "Print the fingerprint of this account's key, making the key pair if it has none.")

            @Flag(
                help: "Make a new key pair even though the account has one (keys wrapped to the old one stop opening).")
            var replace = false
            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runClientCommand(client, json: json) { client in
                    let keys = AccountKeys(
                        connection: client.remote.connection, stateDirectory: client.remote.stateDirectory)
                    let (key, made) = try await keys.create(replace: replace)
                    let status = try await keys.status()
                    return AccountKeyReport(
                        account: status.account, fingerprint: key.publicKey.fingerprint, made: made,
                        keyFile: status.keyFile)
                } text: { report in
                    print("\(report.account)  \(report.fingerprint)\(report.made ? "  (made now)" : "")")
                }
            }
        }

        struct Export: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "export",
                abstract: "Print this account's private key, to import on its other devices.",
                discussion: "Anyone who has it can open what is shared with the account: carry it privately.")

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: false) {
                    let key = try await withRemote(client) { remote in
                        try await AccountKeys(connection: remote.connection, stateDirectory: remote.stateDirectory)
                            .held().key
                    }
                    print(key.privateText)
                }
            }
        }

        struct Import: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "import",
                abstract: "Keep this account's private key (from `xfer account key export`) on this device.",
                discussion: "The key is read from standard input.")

            @Flag(help: "Replace the account's public key on the server with this one.")
            var replace = false
            @Flag(help: "Print one JSON object instead of text.")
            var json = false
            @OptionGroup var client: ClientOptions

            func run() async throws {
                let text = String(decoding: FileHandle.standardInput.readDataToEndOfFile().prefix(4096), as: UTF8.self)
                try await runClientCommand(client, json: json) { client in
                    let keys = AccountKeys(
                        connection: client.remote.connection, stateDirectory: client.remote.stateDirectory)
                    let key = try await keys.importKey(text, replace: replace)
                    let status = try await keys.status()
                    return AccountKeyReport(
                        account: status.account, fingerprint: key.publicKey.fingerprint, made: false,
                        keyFile: status.keyFile)
                } text: { report in
                    print("kept the key of \(report.account) (\(report.fingerprint)) on this device")
                }
            }
        }
    }
}

/// What `xfer account key` prints.
struct AccountKeyReport: Codable {
    var account: String
    var fingerprint: String
    var made: Bool
    var keyFile: String
}

/// Asks the user to compare `account`'s fingerprint out of band, unless `given` (from the
/// command line) says what it must be.
/// - Throws: `unauthorized` if `given` is another fingerprint; `invalid_configuration` if there
///   is no terminal to ask on.
func confirmFingerprint(of account: AccountName, _ key: AccountPublicKey, given: String?) throws -> Bool {
    let fingerprint = key.fingerprint
    if let given {
        let normal = { (text: String) in text.uppercased().filter { $0.isLetter || $0.isNumber } }
        guard normal(given) == normal(fingerprint) else {
            throw XferError(
                .unauthorized,
                "the server gives \(account) the key \(fingerprint), not \(given): nothing was done. Check with \(account) again"
            )
        }
        return true
    }
    let question = """
        \(account)'s account key has the fingerprint
            \(fingerprint)
        Compare it with what `xfer account key` prints on \(account)'s device (in person, or on a call).
        Is it the same? [y/N] 
        """
    let answer = try terminalLine(
        question, echo: true, asking: "\(account)'s fingerprint",
        otherwise: "give the fingerprint you compared with --fingerprint (or --owner-fingerprint)")
    return answer.lowercased().hasPrefix("y")
}
