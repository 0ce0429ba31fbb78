import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferMount
import XferProtocol

// The commands on a synced directory's documents: status, evict and fetch.
extension Xfer {
    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract:
                "Show each document of a synced directory (synced, pending, conflict, evicted) or of a mount (remote, cached, pinned).",
            discussion: """
                The first line says how the directory's `xfer sync` is doing: running or not, its last pass and \
                last error, how many documents are pending. Without the server (unreachable), shows what local \
                state alone can tell. Exits 11 if the folder is gone or unmounted.
                """)

        @Argument(help: "The synced directory, or a path inside it (default: here).", completion: .directory)
        var directory: String = "."

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        struct Output: Encodable {
            var directory: String
            var reachable: Bool
            var notices: [String]
            /// How the folder's `xfer sync` is doing (running or not, last pass, last error).
            var daemon: SyncHealth?
            /// Documents pending upload or download.
            var pending: Int
            /// What this device holds (`xfer sync --only/--exclude-path/…`).
            var selection: SyncSelection
            var documents: [DocumentStatus]
        }

        func run() async throws {
            let absolute = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
            if MountTable.locate(absolute) != nil {
                return try await showMountStatus(directory, client: client, json: json)  // an `xfer mount`
            }
            try await runReportingErrors(json: json) {
                let (sync, status) = try await withSynced(directory, client) { sync in (sync, try await sync.status()) }
                let notices = try sync.notices()
                let health = try sync.state.health()
                let selection = try sync.state.selection()
                let pending = status.documents.filter { $0.state == .pendingUpload || $0.state == .pendingDownload }
                    .count
                if json {
                    printJSON(
                        Output(
                            directory: sync.directory, reachable: status.reachable, notices: notices, daemon: health,
                            pending: pending, selection: selection, documents: status.documents))
                    return
                }
                for notice in notices { print("note: \(notice)") }
                print(Self.describe(health, pending: pending))
                if let line = Self.describe(selection) { print(line) }
                if !status.reachable { print("(server unreachable: local state only)") }
                for document in status.documents {
                    let conflicts =
                        document.conflicts.isEmpty
                        ? "" : "  conflicts: \(document.conflicts.map { "v\($0)" }.joined(separator: ", "))"
                    print(
                        document.state.rawValue.padding(toLength: 17, withPad: " ", startingAt: 0)
                            + ByteCount(document.size).description.padding(toLength: 11, withPad: " ", startingAt: 0)
                            + "\(document.path)\(conflicts)")
                }
            }
        }

        /// One line on what this device holds, unless it holds everything.
        static func describe(_ selection: SyncSelection) -> String? {
            guard !selection.isEverything else { return nil }
            var parts: [String] = []
            if !selection.only.isEmpty { parts.append("only " + selection.only.joined(separator: ", ")) }
            if !selection.excluded.isEmpty { parts.append("leaving out " + selection.excluded.joined(separator: ", ")) }
            if selection.noNewFolders {
                parts.append("new top-level folders left out (held: \(selection.folders.joined(separator: ", ")))")
            }
            if !selection.kept.isEmpty { parts.append("kept as made here: " + selection.kept.joined(separator: ", ")) }
            return "selection: " + parts.joined(separator: "; ")
        }

        /// One line on the folder's daemon: running or not, its last pass and last error.
        static func describe(_ health: SyncHealth?, pending: Int) -> String {
            func ago(_ time: Double?) -> String {
                guard let time else { return "never" }
                let seconds = Int(max(0, Date().timeIntervalSince1970 - time))
                return seconds < 120
                    ? "\(seconds) s ago" : seconds < 7200 ? "\(seconds / 60) min ago" : "\(seconds / 3600) h ago"
            }
            guard let health else { return "sync: never run here; \(pending) pending" }
            var line =
                health.running
                ? "sync: running (pid \(health.pid.map(String.init) ?? "?")\(health.watching ? ", watching" : ""))"
                : "sync: not running"
            if health.running && health.phase != .idle && health.phase != .stopped {
                line += ", \(health.phase.rawValue.replacingOccurrences(of: "_", with: " "))"
            }
            line += "; last pass \(ago(health.lastPassAt))"
            if let error = health.lastError, let at = health.lastErrorAt, at >= (health.lastPassAt ?? 0) {
                line += "; last error \(ago(at)): \(error)"
            }
            return line + "; \(pending) pending"
        }
    }

    struct Evict: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "evict",
            abstract: "Remove a synced document's local data, keeping it listed; `xfer fetch` brings it back.",
            discussion:
                "Refused for a document with changes not yet on the server, and for one whose version the server does not confirm it holds (asked first): the local copy may be the only one."
        )

        @Argument(help: "A document in a synced directory.", completion: .file())
        var path: String

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runReportingErrors(json: json) {
                let document = try await withSynced(path, client) { sync in
                    let document = try documentPath(path, in: sync)
                    try await sync.evict(document)
                    return document
                }
                if json {
                    printJSON(["evicted": document.value])
                } else {
                    print("evicted \(document) (its data stays on the server)")
                }
            }
        }
    }

    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "fetch",
            abstract: "Bring an evicted document of a synced directory back from the server.")

        @Argument(help: "A document in a synced directory.", completion: .file())
        var path: String

        @OptionGroup var client: ClientOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await runReportingErrors(json: output.json) {
                let bar = ProgressBar(quiet: output.quiet || output.json)
                defer { bar.finish() }
                let report = try await withSynced(path, client) { sync in
                    try await sync.fetch(try documentPath(path, in: sync), progress: bar.update)
                }
                bar.finish()
                if output.json {
                    printJSON(report)
                } else if !output.quiet {
                    print("fetched \(report.document) v\(report.version) (\(ByteCount(report.bytesFetched)) fetched)")
                }
            }
        }
    }
}

/// Runs `body` with the synced directory holding `path`, opened with its binding's server and
/// container, closing the connection afterwards.
func withSynced<T>(_ path: String, _ client: ClientOptions, _ body: (SyncDirectory) async throws -> T) async throws -> T
{
    let stateDirectory = client.stateDir ?? ClientState.defaultDirectory()
    guard let directory = SyncState.directory(containing: path, stateDirectory: stateDirectory) else {
        throw XferError(.notFound, "\(path) is not in a synced directory; start one with `xfer sync DIR`")
    }
    let state = try SyncState(directory: directory, stateDirectory: stateDirectory)
    var options = SyncOptions()
    options.packageExtensions = try state.packageExtensions() ?? options.packageExtensions
    return try await withRemote(client, boundTo: state) { remote in
        try await body(try SyncDirectory(directory: directory, remote: remote, options: options))
    }
}

/// The document path of a local path inside a synced directory.
func documentPath(_ path: String, in sync: SyncDirectory) throws -> DocumentPath {
    let absolute = ClientState.absolute(path)
    guard absolute.hasPrefix(sync.directory + "/") else {
        throw XferError(.invalidPath, "\(path) is the synced directory itself; name a document inside it")
    }
    return try DocumentPath(String(absolute.dropFirst(sync.directory.count + 1)))
}
