import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol
import XferServer

/// A span of time on the command line: `90`, `90s`, `15m`, `2h`, `7d`.
struct Span: ExpressibleByArgument {
    var seconds: Int64

    init?(argument: String) {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var text = Substring(argument)
        var unit: Int64 = 1
        if let last = text.last, let factor = units[last] {
            unit = factor
            text = text.dropLast()
        }
        guard let value = Int64(text), value >= 0 else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: unit)
        guard !overflow else { return nil }
        seconds = product
    }

    var defaultValueDescription: String { seconds % 86_400 == 0 ? "\(seconds / 86_400)d" : "\(seconds)s" }
}

extension Xfer {
    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract:
                "Check stored data: a synced directory, a server's chunks and manifests, or a container as this device reads it.",
            discussion: """
                `xfer verify DIR` reads every file of a synced directory that claims to be \
                unchanged and compares it with the manifest it was synced at (offline). Files \
                changed since are listed as modified, not as damage.

                `xfer verify --data DIR` checks a server's data directory (safe while it serves): \
                every chunk's SHA-256, every committed manifest, that each referenced chunk is \
                present and intact, reference counts and quota use. `xfer verify --remote` asks \
                the running server to do the same (admin token); use it when the server keeps \
                metadata or chunks elsewhere (--metadata, --chunks), which --data cannot reach.

                `xfer verify --documents` downloads and checks the container's current \
                documents here, with this device's keys: every name, manifest and chunk, as a \
                pull checks them, writing nothing. In an end-to-end encrypted container it is the \
                check only a device holding the key can make (the server cannot open what it \
                stores).

                Exits 0 if all is well, 9 if anything is damaged or missing.
                """)

        @Argument(help: ArgumentHelp("A synced directory.", valueName: "DIR"))
        var directory: String?

        @Option(help: ArgumentHelp("Verify a server's data directory instead.", valueName: "DIR"))
        var data: String?

        @Flag(help: "Ask the server at --server to verify its stores (admin token).")
        var remote = false

        @Flag(help: "Download and check every current document of --container here, with this device's keys.")
        var documents = false

        @Flag(help: "Print the report as one JSON object.")
        var json = false

        @Flag(
            name: .shortAndLong,
            help: "No progress and no summary: only the problems found, and the exit status (9 on damage).")
        var quiet = false

        @OptionGroup var client: ClientOptions

        @OptionGroup var sealing: SealingOptions

        func validate() throws {
            guard [directory != nil, data != nil, remote, documents].filter({ $0 }).count <= 1 else {
                throw ValidationError("give one of DIR, --data DIR, --remote or --documents")
            }
        }

        func run() async throws {
            try await runReportingErrors(json: json) {
                if documents {
                    try await verifyDocuments()
                } else if data != nil || remote {
                    try await verifyServer()
                } else {
                    try verifyDirectory()
                }
            }
        }
    }

    struct GarbageCollect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gc",
            abstract: "Remove chunks no version needs and give their space back.",
            discussion: """
                Removes versions announced but never committed, releases chunks uploaded for a \
                commit that never came (their bytes leave the account's quota), deletes chunks \
                no account holds, and rewrites packs that are mostly empty. Anything younger than --grace is left alone, so uploads in \
                flight are safe. Safe while the server runs: with --data it works on the data \
                directory directly (embedded stores only), otherwise it asks --server (admin token).
                """)

        @Option(help: ArgumentHelp("A server's data directory.", valueName: "DIR"))
        var data: String?

        @Option(
            help: ArgumentHelp(
                "Leave uploads, leases and chunks younger than this alone (90s, 15m, 2h, 7d).", valueName: "SPAN"))
        var grace = Span(argument: "1d")!

        @Flag(help: "Only count what would be removed.")
        var dryRun = false

        @Flag(help: "Print the report as one JSON object.")
        var json = false

        @Flag(name: .shortAndLong, help: "Print nothing (errors still go to stderr): for cron.")
        var quiet = false

        @OptionGroup var client: ClientOptions

        @OptionGroup var sealing: SealingOptions

        func run() async throws {
            try await runReportingErrors(json: json) {
                let report: GarbageReport
                if let data {
                    report = try await Maintenance(data: try await openExistingData(data, sealing: sealing))
                        .collectGarbage(grace: grace.seconds, dryRun: dryRun)
                } else {
                    report = try await withRemote(client) { remote in
                        try await remote.connection.collectGarbage(
                            GarbageRequest(graceSeconds: grace.seconds, dryRun: dryRun))
                    }
                }
                if json {
                    printJSON(report)
                } else if !quiet {
                    let verb = dryRun ? "would remove" : "removed"
                    print(
                        "\(verb) \(report.chunksRemoved) of \(report.chunksScanned) chunks (\(ByteCount(report.bytesRemoved))); released \(report.leasesExpired) unused uploads (\(ByteCount(report.quotaReleased)) of quota); expired \(report.uploadsExpired) unfinished versions; removed \(report.tokensExpired) expired tokens; \(report.milliseconds) ms"
                    )
                }
            }
        }
    }
}

extension Xfer.Verify {
    /// `--documents`: every current document of the container, checked here with this device's keys.
    func verifyDocuments() async throws {
        let report = try await withRemote(client, unlocking: true) { remote in
            try await showingProgress { try await ContainerVerify(remote: remote).run(progress: $0) }
        }
        if json {
            printJSON(report)
        } else {
            if !quiet {
                print(
                    "\(report.documentsChecked) documents, \(report.chunksChecked) chunks (\(ByteCount(report.bytesChecked))) checked"
                )
            }
            for problem in report.problems { print("  damaged  \(problem.document): \(problem.problem)") }
            if !quiet || !report.ok {
                print(
                    report.ok
                        ? "ok" : "\(report.problems.count) problem\(report.problems.count == 1 ? "" : "s")")
            }
        }
        if !report.ok { throw ExitCode(9) }
    }

    /// Runs `check`, showing on a terminal the chunks it has checked: `\r` lines do not belong in a
    /// log, nor beside JSON or `--quiet`.
    func showingProgress<T>(_ check: (@escaping @Sendable (Int) -> Void) async throws -> T) async throws -> T {
        let progress = !json && !quiet && isatty(STDERR_FILENO) == 1
        let result = try await check { checked in
            if progress {
                FileHandle.standardError.write(Data("\rxfer: \(checked) chunks checked".utf8))
            }
        }
        if progress { FileHandle.standardError.write(Data("\n".utf8)) }
        return result
    }

    /// `--data DIR` or `--remote`: a server's stores.
    func verifyServer() async throws {
        let report: ServerVerifyReport
        if let data {
            let maintenance = Maintenance(data: try await openExistingData(data, sealing: sealing))
            report = try await showingProgress { try await maintenance.verify(progress: $0) }
        } else {
            report = try await withRemote(client) { remote in try await remote.connection.verifyServer() }
        }
        if json {
            printJSON(report)
        } else {
            if !quiet {
                print(
                    "\(report.chunksChecked) chunks (\(ByteCount(report.bytesChecked))) and \(report.versionsChecked) versions checked, \(report.recordsChecked) chunk records, \(report.milliseconds) ms"
                )
            }
            for problem in report.problems { print("  \(problem)") }
            if report.problemCount > report.problems.count {
                print("  … and \(report.problemCount - report.problems.count) more")
            }
            if !quiet || !report.ok {
                print(
                    report.ok
                        ? "ok" : "\(report.problemCount) problem\(report.problemCount == 1 ? "" : "s")")
            }
        }
        if !report.ok { throw ExitCode(9) }
    }

    /// `DIR`: a synced directory against the manifests it was synced at.
    func verifyDirectory() throws {
        let stateDirectory = client.stateDir ?? ClientState.defaultDirectory()
        let report = try LocalVerifier.verify(
            directory: directory ?? ".", stateDirectory: stateDirectory, keyFile: client.chosenKeyFile())
        if json {
            printJSON(report)
        } else {
            if !quiet {
                print(
                    "\(report.documentsChecked) documents, \(report.filesChecked) files (\(ByteCount(report.bytesChecked))) checked; \(report.evicted) evicted"
                )
            }
            for path in report.damaged { print("  damaged  \(path)") }
            for path in report.missing { print("  missing  \(path)") }
            for path in report.modified where !quiet { print("  modified \(path) (not yet synced)") }
            if !quiet || !report.ok {
                print(
                    report.ok
                        ? "ok"
                        : "\(report.damaged.count) damaged, \(report.missing.count) missing: `xfer fetch PATH` or `rm` and `xfer sync` brings back the synced version"
                )
            }
        }
        if !report.ok { throw ExitCode(9) }
    }
}
