import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    struct TrashCommand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "trash",
            abstract: "List, restore or empty what sync deleted or replaced in a synced directory.",
            discussion: """
                Every file or package that `xfer sync` deletes here (because it was deleted on \
                the server) or replaces (with a newer version) goes first to DIR/.xfer-trash, \
                kept --trash-days days (30 by default). Nothing here needs the server.
                """,
            subcommands: [List.self, Restore.self, Empty.self])

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "list", abstract: "List the trash, oldest first.")

            @Argument(help: "The synced directory, or a path inside it (default: here).", completion: .directory)
            var directory: String = "."

            @Flag(help: "Print one JSON array instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let entries = try trash(directory, client).entries()
                    if json {
                        printJSON(entries)
                        return
                    }
                    for entry in entries {
                        let when = Date(timeIntervalSince1970: Double(entry.trashedNs) / 1e9)
                        print(
                            "\(ISO8601DateFormatter().string(from: when))  \(entry.id)  \(entry.path)  (\(entry.reason))"
                        )
                    }
                    if entries.isEmpty { print("the trash is empty") }
                }
            }
        }

        struct Restore: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "restore",
                abstract: "Put a trashed document back (the newest entry of that path, or the entry ID).",
                discussion: "Refused if something is at that path now. The next sync pushes it as a change.")

            @Argument(help: "The document's path in the directory, or an entry ID from `xfer trash list`.")
            var item: String

            @Option(
                name: .customLong("as"),
                help: ArgumentHelp("Restore it under this document path instead.", valueName: "PATH"))
            var destination: String?

            @Option(
                help: ArgumentHelp(
                    "The synced directory (default: the one holding the current directory).", valueName: "DIR"))
            var directory: String = "."

            @Flag(help: "Print the restored entry as JSON.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let trash = try trash(directory, client)
                    guard let entry = try trash.entries().last(where: { $0.id == item || $0.path == item }) else {
                        throw XferError(.notFound, "nothing named \(item) is in the trash; see `xfer trash list`")
                    }
                    try trash.restore(entry, as: try destination.map { try DocumentPath($0) })
                    if json {
                        printJSON(entry)
                    } else {
                        print("restored \(destination ?? entry.path) (\(entry.reason))")
                    }
                }
            }
        }

        struct Empty: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "empty", abstract: "Remove trashed documents for good.")

            @Option(help: ArgumentHelp("Only those trashed more than this many days ago.", valueName: "DAYS"))
            var olderThan: Int?

            @Flag(help: "Say what would be removed, and remove nothing.")
            var dryRun = false

            @Option(
                help: ArgumentHelp(
                    "The synced directory (default: the one holding the current directory).", valueName: "DIR"))
            var directory: String = "."

            @Flag(help: "Print {\"removed\": N} (or the entries, with --dry-run) as JSON.")
            var json = false

            @OptionGroup var client: ClientOptions

            func validate() throws {
                if let olderThan, olderThan < 0 { throw ValidationError("--older-than must not be negative") }
            }

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let trash = try trash(directory, client)
                    let cutoff = olderThan.map { Int64((Date().timeIntervalSince1970 - Double($0) * 86_400) * 1e9) }
                    if dryRun {
                        let doomed = try trash.entries().filter { entry in cutoff.map { entry.trashedNs < $0 } ?? true }
                        if json {
                            printJSON(doomed)
                        } else {
                            for entry in doomed { print("would remove \(entry.id)  \(entry.path)") }
                            print("\(doomed.count) entries would be removed; nothing was")
                        }
                        return
                    }
                    let removed = try trash.empty(trashedBefore: cutoff)
                    if json { printJSON(["removed": removed]) } else { print("removed \(removed) entries") }
                }
            }
        }
    }
}

/// The trash of the synced directory holding `path` (local only: no server is asked).
private func trash(_ path: String, _ client: ClientOptions) throws -> Trash {
    let stateDirectory = client.stateDir ?? ClientState.defaultDirectory()
    guard let directory = SyncState.directory(containing: path, stateDirectory: stateDirectory) else {
        throw XferError(.notFound, "\(path) is not in a synced directory; start one with `xfer sync DIR`")
    }
    return Trash(root: try ConfinedDirectory(opening: directory))
}
