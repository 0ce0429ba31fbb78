import ArgumentParser
import Foundation
import Logging
import XferClient
import XferCore
import XferProtocol
import XferServer

extension Xfer {
    struct ServerKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "server-key",
            abstract: "Make and inspect the keys that seal a server's data at rest (xfer serve --encryption-key).",
            discussion: """
                A server given keys seals every chunk and manifest it stores from then on with AES-256-GCM, on disk and \
                in S3 alike; data stored before stays readable as it is. To rotate, make a new key and start the server \
                with the new key first and the old ones after: new data is sealed with the new key, and the old keys \
                still open what they sealed. Keep a copy of every key: sealed data cannot be read without its key. \
                See docs/SECURITY.md.
                """,
            subcommands: [New.self, Show.self])

        struct New: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "new",
                abstract: "Write a new random key to a new file (mode 0600) and print its id.",
                discussion: "Never overwrites a file: an overwritten key file is data lost.")

            @Argument(help: "The key file to create.")
            var file: String

            @Flag(help: "Print {\"file\", \"id\"} as JSON.")
            var json = false

            func run() async throws {
                try await runReportingErrors(json: json) {
                    restrictFileModes()
                    let key = try SealingKeys.createKeyFile(at: file)
                    if json {
                        printJSON(["file": file, "id": key.id.description])
                    } else {
                        print(
                            "wrote key \(key.id) to \(file); keep a copy elsewhere: data sealed with it cannot be read without it"
                        )
                    }
                }
            }
        }

        struct Show: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "show",
                abstract:
                    "Print the ids of the keys given (--encryption-key, XFER_ENCRYPTION_KEY), the current one first.",
                discussion: "Compare them with the ids the server names when it refuses to start for a missing key.")

            @OptionGroup var sealing: SealingOptions

            @Flag(help: "Print {\"current\", \"keys\"} as JSON.")
            var json = false

            func run() async throws {
                try await runReportingErrors(json: json) {
                    guard let keys = try sealing.keys() else {
                        throw XferError(
                            .invalidConfiguration, "no key given: pass --encryption-key FILE or set XFER_ENCRYPTION_KEY"
                        )
                    }
                    let others = keys.ids.filter { $0 != keys.current.id }.map(\.description)
                    if json {
                        printJSON(
                            ShownKeys(
                                current: keys.current.id.description, keys: [keys.current.id.description] + others))
                    } else {
                        print("\(keys.current.id) (current)")
                        for id in others { print(id) }
                    }
                }
            }
        }
    }
}

private struct ShownKeys: Encodable {
    var current: String
    var keys: [String]
}
