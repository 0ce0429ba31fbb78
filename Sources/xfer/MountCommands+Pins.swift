import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferMount
import XferProtocol

/// Documents named on the command line: by document path, or by a path inside an `xfer mount`
/// (whose container they then name, unless --container does).
struct MountedDocuments {
    var client: ClientOptions
    var names: [String]

    init(_ arguments: [String], client: ClientOptions) {
        var client = client
        names = arguments.map { argument in
            let absolute = URL(fileURLWithPath: argument).resolvingSymlinksInPath().path
            guard FileManager.default.fileExists(atPath: argument), let (mount, document) = MountTable.locate(absolute)
            else { return argument }
            if client.container == nil { client.container = mount.container }
            return document
        }
        self.client = client
    }

    /// Runs `body` with pinning over these options' remote and its chunk cache.
    func withPinning<T>(_ body: (Pinning) async throws -> T) async throws -> T {
        try await withRemote(client) { remote in
            try await body(Pinning(client: DocumentClient(remote: remote), cache: try chunkCache(remote)))
        }
    }
}

/// What `pin` and `unpin` take: the documents, the client options, the output flags.
struct PinTargets: ParsableArguments {
    @Argument(help: "Documents: document paths (Documents/report.pdf), or paths inside a mount.")
    var names: [String]

    @OptionGroup var client: ClientOptions
    @OptionGroup var output: OutputOptions

    var documents: MountedDocuments { MountedDocuments(names, client: client) }
}

extension MountCommand {
    struct Pin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Keep documents on this device: their chunks are fetched now and never evicted.",
            discussion: """
                What iCloud calls Keep Downloaded. A pinned document's chunks go to the mount's \
                on-disk cache (STATE/chunk-cache) outside its --cache-size bound, so it reads \
                without the server; a running mount fetches a pinned document's new versions as \
                they come. Works with or without a mount running. NAME is a document path \
                (Documents/report.pdf) or a path inside an `xfer mount`.
                """)

        @OptionGroup var targets: PinTargets

        func run() async throws {
            let output = targets.output
            try await runReportingErrors(json: output.json) {
                let documents = targets.documents
                let reports = try await documents.withPinning { pinning in
                    var reports: [Pinning.Report] = []
                    for name in documents.names { reports.append(try await pinning.pin(name)) }
                    return reports
                }
                if output.json { return printJSON(reports) }
                guard !output.quiet else { return }
                for report in reports {
                    print(
                        "pinned \(report.document) v\(report.version): \(report.chunks) chunks, \(report.chunksFetched) fetched (\(ByteCount(report.bytesFetched)))"
                    )
                }
            }
        }
    }

    struct Unpin: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop keeping documents on this device; their chunks stay cached until room is needed.")

        @OptionGroup var targets: PinTargets

        struct Unpinned: Encodable {
            var document: String
            var wasPinned: Bool
        }

        func run() async throws {
            let output = targets.output
            try await runReportingErrors(json: output.json) {
                let documents = targets.documents
                let unpinned = try await documents.withPinning { pinning in
                    try documents.names.map { Unpinned(document: $0, wasPinned: try pinning.unpin($0)) }
                }
                if output.json { return printJSON(unpinned) }
                for item in unpinned where !output.quiet {
                    print(item.wasPinned ? "unpinned \(item.document)" : "\(item.document) was not pinned")
                }
            }
        }
    }

    struct MountStatus: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show where each document's data is: remote, partly cached, cached or pinned.",
            discussion: """
                PREFIX is a document path prefix (Documents/Photos/) or a path inside an `xfer \
                mount`; without it, every document. `xfer status DIR` on a mount shows the same.
                """)

        @Argument(help: "Only documents under this prefix, or this path inside a mount.")
        var prefix: String = ""

        @OptionGroup var client: ClientOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await showMountStatus(prefix, client: client, json: output.json)
        }
    }
}

/// Prints where each document under `prefix` is kept (the mount's `status`).
func showMountStatus(_ prefix: String, client: ClientOptions, json: Bool) async throws {
    try await runReportingErrors(json: json) {
        let documents = MountedDocuments(prefix.isEmpty ? [] : [prefix], client: client)
        let prefix = documents.names.first ?? ""
        let states = try await documents.withPinning { pinning in
            let listed = try await pinning.client.list(prefix: prefix).documents
            return try pinning.states(of: listed)
        }
        if json { return printJSON(["documents": states]) }
        for state in states {
            let part = state.state == .partial ? " \(ByteCount(state.cachedBytes)) of \(ByteCount(state.bytes))" : ""
            print(
                "\(state.state.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0))\(TerminalText.escape(state.path))\(part)"
            )
        }
    }
}
