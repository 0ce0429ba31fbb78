import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer.Key {
    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Give the container a new key for what is written from now on.",
            discussion: """
                `xfer container unshare` does this for an encrypted container. Everything written \
                before stays readable; the new key is wrapped by the passphrase (asked for) and to \
                each member whose account key this device checked. Other devices of yours unlock \
                again with the passphrase; members' devices take the new key by themselves.
                """)

        @OptionGroup var passphrase: PassphraseOptions
        @Flag(help: "Print one JSON object instead of text.")
        var json = false
        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runReportingErrors(json: json) {
                let rotation = try await withRemote(client) { remote in
                    try await EncryptedContainers(remote: remote).rotate(
                        passphrase: try passphrase.current(prompt: "Passphrase for container \(remote.container)"),
                        accounts: AccountKeys(connection: remote.connection, stateDirectory: remote.stateDirectory))
                }
                if json { printJSON(rotation) } else { printRotation(rotation) }
            }
        }
    }
}

/// A rotation as text: the new key, and the members still waiting for it.
func printRotation(_ rotation: EncryptedContainers.Rotation) {
    print("new data is sealed under key \(rotation.keyID) (the container's key number \(rotation.generation))")
    print(
        "its recovery key, which replaces the one you kept (an older one cannot recover what is written from now on):")
    print("  \(rotation.recoveryKey)")
    if !rotation.rewrapped.isEmpty { print("wrapped to: \(rotation.rewrapped.joined(separator: ", "))") }
    for (account, why) in rotation.waiting.sorted(by: { $0.key < $1.key }) {
        print("not wrapped to \(account): \(why); run `xfer container share` for it again")
    }
}
