import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Scope: ExpressibleByArgument {}

/// `2026-11-21 10:04:05` (UTC) for a nanosecond timestamp.
func formatTime(_ nanoseconds: Int64) -> String {
    let formatter = DateFormatter()
    formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
    formatter.timeZone = TimeZone(identifier: "UTC")
    return formatter.string(from: Date(timeIntervalSince1970: Double(nanoseconds) / 1e9))
}

extension Xfer {
    struct Versions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "versions",
            abstract: "List a document's versions: current, unresolved conflicts, history.",
            discussion: """
                Conflict versions are edits made from a stale version that lost to a later one \
                (by modification time); they stay until `xfer resolve`. Pull any listed version \
                with `xfer pull NAME --version N`.
                """)

        @Argument(help: "The document's path in the container.")
        var name: String

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json, { VersionList(versions: try await $0.versions(name)) }) {
                list in
                for version in list.versions {
                    let mark = version.state == .conflict ? "  <- unresolved conflict" : ""
                    let size = ByteCount(version.size).description
                    print(
                        "v\(version.version)".padding(toLength: 7, withPad: " ", startingAt: 0)
                            + version.state.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)
                            + size.padding(toLength: max(10, size.count), withPad: " ", startingAt: 0)
                            + "  \(formatTime(version.mtimeNs))  \(version.device ?? "-")\(mark)")
                }
            }
        }
    }

    struct Resolve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "resolve",
            abstract: "Settle a document's conflict by choosing the version to keep.",
            discussion: """
                VERSION becomes current. The other contenders (the previous current version and \
                the other conflict versions) are removed and their space given back to the \
                quota, or kept in history with --keep-all.
                """)

        @Argument(help: "The document's path in the container.")
        var name: String

        @Option(help: ArgumentHelp("The version to make current.", valueName: "VERSION"))
        var keep: Int64

        @Flag(help: "Keep the other versions in history instead of removing them.")
        var keepAll = false

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json, { try await $0.resolve(name, keep: keep, keepAll: keepAll) })
            { info in
                print(
                    "\(info.path): v\(info.version) is current\(keepAll ? "; the others are kept in history" : "; the other versions were removed")"
                )
            }
        }
    }

    struct Changes: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "changes",
            abstract: "Show the container's changes after a cursor, optionally waiting for the next.",
            discussion: """
                Each change is a document version (uploading as soon as a push announces it, then \
                current or conflict when it commits, deleted, superseded) or a key-value write. \
                Prints the new cursor last; pass it as --since to read on. With --wait the \
                request is held open and answers the moment a change arrives. With --follow it \
                keeps reading (one JSON object per change with --json) until interrupted.
                """)

        @Option(
            help: ArgumentHelp(
                "Only changes after this cursor (default: with --follow or --wait, from now, so only changes still to come; else from the beginning). --since 0 reads the whole history.",
                valueName: "CURSOR"))
        var since: Int64?

        @Option(
            help: ArgumentHelp(
                "If there is none yet, wait up to this long for a change: 30, 30s, 1m (at most \(ProtocolLimits.maximumWaitSeconds)s).",
                valueName: "SPAN"))
        var wait = Span(argument: "0")!

        @Flag(help: "Keep waiting for changes until interrupted.")
        var follow = false

        @Flag(help: "Print JSON instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func validate() throws {
            guard (0...Int64(ProtocolLimits.maximumWaitSeconds)).contains(wait.seconds) else {
                throw ValidationError("--wait must be 0 to \(ProtocolLimits.maximumWaitSeconds) seconds")
            }
        }

        func run() async throws {
            try await runReportingErrors(json: json) {
                try await withRemote(client, unlocking: true) { remote in
                    var since = self.since ?? 0
                    if self.since == nil, follow || wait.seconds > 0 {
                        since = try await remote.connection.head(container: remote.container)
                    }
                    if follow {
                        for try await change in ChangeFeed(
                            remote: remote, start: since, wait: ProtocolLimits.maximumWaitSeconds)
                        {
                            switch change {
                            case .document(let info): json ? printJSON(info) : print(Self.line(info))
                            case .key(let entry): json ? printJSON(entry) : print(Self.line(entry))
                            }
                            fflush(nil)
                        }
                        return
                    }
                    var list = try await remote.connection.changes(
                        container: remote.container, after: since, wait: Int(wait.seconds))
                    // Names, keys and values opened in an end-to-end encrypted container.
                    if let keys = remote.endToEnd { list = keys.opened(list) }
                    if json {
                        printJSON(list)
                        return
                    }
                    for line in list.changes.map({ ($0.sequence, Self.line($0)) })
                        + list.keys.map({ ($0.sequence, Self.line($0)) })
                        .sorted(by: { $0.0 < $1.0 })
                    {
                        print(line.1)
                    }
                    print("cursor \(list.cursor)\(list.more ? " (more)" : "")")
                }
            }
        }

        static func line(_ info: DocumentInfo) -> String {
            "#\(info.sequence)  \(info.path)  v\(info.version) \(info.state.rawValue)  \(ByteCount(info.size))  \(formatTime(info.mtimeNs))"
        }

        static func line(_ entry: KeyValueEntry) -> String {
            "#\(entry.sequence)  kv \(entry.key) = \(entry.value?.jsonText ?? "(deleted)")"
        }
    }

    struct KeyValue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "kv",
            abstract: "The container's key-value store (small JSON values, last writer wins).",
            discussion: """
                Keys are 1-64 bytes of UTF-8; a container holds at most 1024 keys and 1 MiB \
                (keys plus JSON values) unless the server says otherwise. Writes carry this \
                device's clock: the later timestamp wins, ties go to the greater device name.
                """,
            subcommands: [Set.self, Get.self, Remove.self, List.self])

        struct Set: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "set", abstract: "Set a key.")

            @Argument(help: "The key.")
            var key: String

            @Argument(
                help:
                    "The value: JSON (42, true, \"text\", {\"a\": 1}); anything that is not JSON is taken as a string; - reads it from standard input (for values past the 128 KiB an argument may hold)."
            )
            var value: String

            @Flag(help: "Take VALUE as a string even if it is JSON.")
            var string = false

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                var value = value
                if value == "-" {
                    // At most the largest key-value store and a little: a bigger input is refused, not read whole.
                    let limit = 16 << 20
                    let data = FileHandle.standardInput.readData(ofLength: limit + 1)
                    guard data.count <= limit else {
                        throw ValidationError(
                            "standard input holds more than \(limit) bytes; a value is at most the container's key-value limit"
                        )
                    }
                    guard let text = String(data: data, encoding: .utf8) else {
                        throw ValidationError("standard input is not UTF-8 text")
                    }
                    value = text.hasSuffix("\n") ? String(text.dropLast()) : text
                }
                let parsed = string ? .string(value) : ((try? JSONValue(parsing: value)) ?? .string(value))
                try await runClientCommand(
                    client, json: json,
                    { client in
                        guard parsed != .null else {
                            throw XferError(.badRequest, "null is not a value; remove the key with `xfer kv rm \(key)`")
                        }
                        return try await client.setValue(parsed, forKey: key)
                    }
                ) { result in
                    if result.applied {
                        let text = parsed.jsonText
                        print("\(key) = \(text.count > 200 ? "\(text.prefix(200))… (\(text.utf8.count) bytes)" : text)")
                    } else {
                        print(
                            "\(key) kept \(result.entry.value?.jsonText ?? "(deleted)"): a later write (from \(result.entry.device)) wins"
                        )
                    }
                }
            }
        }

        struct Get: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "get", abstract: "Print a key's value as JSON.")

            @Argument(help: "The key.")
            var key: String

            @Flag(help: "Print the whole entry (value, timestamp, device) as JSON.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runClientCommand(client, json: json, { try await $0.entry(forKey: key) }) { entry in
                    print(entry.value?.jsonText ?? "null")
                }
            }
        }

        struct Remove: AsyncParsableCommand {
            static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a key.")

            @Argument(help: "The key.")
            var key: String

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runClientCommand(client, json: json, { try await $0.removeValue(forKey: key) }) { result in
                    print(result.applied ? "removed \(key)" : "\(key) kept: a later write wins")
                }
            }
        }

        struct List: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "ls", abstract: "List every key and value.",
                discussion: """
                    In an end-to-end encrypted container, a value that does not open under the key, or is \
                    older than this device has seen, is left out and named on standard error; the command \
                    then exits 9.
                    """)

            @Flag(help: "Print one JSON object instead of text.")
            var json = false

            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: json) {
                    let list = try await withRemote(client) { remote in
                        try await DocumentClient(remote: remote).values()
                    }
                    if json {
                        printJSON(list)
                    } else {
                        for entry in list.entries { print("\(entry.key) = \(entry.value?.jsonText ?? "null")") }
                        print(
                            "\(list.entries.count) of \(list.maximumKeys) keys, \(ByteCount(Int64(list.bytes))) of \(ByteCount(Int64(list.maximumBytes)))"
                        )
                        for why in list.withheld ?? [] { printError("left out: \(why)") }
                    }
                    // What the server sent failed its check: the listing is not the whole store.
                    if list.withheld?.isEmpty == false { throw ExitCode(9) }
                }
            }
        }
    }
}
