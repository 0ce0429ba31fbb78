import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "push",
            abstract: "Push a file or a directory (a package) as one document version.",
            discussion: """
                Announces the document at once, then chunks and hashes it, uploads only the \
                chunks the server lacks and commits the new version atomically. Files unchanged \
                since the last push (same size, mtime, inode and ctime) are not read again; \
                nothing at all is sent only once the server confirms it holds the version this \
                copy was synced from (a new server at the same address gets everything). If \
                another device pushed since this copy was synced, both versions are kept: the \
                later edit (by mtime) is current, the other a conflict version (`xfer versions`). \
                A directory leaves out what its .xferignore files (gitignore syntax, one per \
                directory, each for its directory and below), --exclude and the built-in \
                defaults ignore (editor swap and backup files, .DS_Store, Thumbs.db, \
                desktop.ini, ._*). In an end-to-end encrypted container (`xfer container create \
                NAME --encrypted`) the name, every chunk and the manifest are sealed on this \
                device, which must hold the container's key (`xfer key unlock`).
                """)

        @Argument(help: "A file or a directory.", completion: .file())
        var path: String

        @Argument(help: "The document's path in the container (e.g. Documents/report.pdf).")
        var name: String

        @Flag(help: "Replace the server's current version even if this copy was not synced from it.")
        var force = false

        @Option(
            help: ArgumentHelp(
                "Leave out of a directory what this gitignore-style pattern matches, relative to the directory (repeatable; e.g. 'build/', '*.o', '!keep.o').",
                valueName: "PATTERN"))
        var exclude: [String] = []

        @Flag(
            help:
                "Print what the push would do (a new document, a new version, a conflict, nothing) and how much it would read, and change nothing."
        )
        var dryRun = false

        func validate() throws {
            do {
                for pattern in exclude { try IgnoreRules.validate(pattern) }
            } catch let error as XferError {
                throw ValidationError(error.message)
            }
        }

        @OptionGroup var compression: CompressionOptions
        @OptionGroup var client: ClientOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await runReportingErrors(json: output.json) {
                let document = try DocumentPath(name)
                var options = PushOptions()
                options.force = force
                options.exclude = exclude
                options.compression = compression.policy
                if dryRun {
                    let plan = try await withRemote(client, unlocking: true) { remote in
                        try await PushEngine(remote: remote, options: options).plan(path, as: document)
                    }
                    if output.json {
                        printJSON(plan)
                    } else {
                        print(
                            "dry run: \(plan.action.rawValue) \(plan.document): \(plan.reason); \(plan.files) files, \(ByteCount(plan.bytes)), \(plan.filesToRead) to read (\(ByteCount(plan.bytesToRead))); nothing was changed"
                        )
                    }
                    return
                }
                let bar = ProgressBar(quiet: output.quiet || output.json)
                defer { bar.finish() }
                // The files and the state are looked at while the server says whether the container
                // is end-to-end encrypted; nothing is sent before it has.
                let report = try await withRemote(client) { remote in
                    try await remote.whileUnlocking { remote, confirmed in
                        try await PushEngine(remote: remote, options: options).push(
                            path, as: document, progress: bar.update, confirmed: confirmed)
                    }
                }
                bar.finish()
                if output.json {
                    printJSON(report)
                } else if !output.quiet {
                    if !report.committed {
                        print("\(report.document) v\(report.version) is unchanged; nothing sent")
                        return
                    }
                    if report.state == .conflict {
                        printError(
                            "\(report.document) changed on the server since this copy was synced, and that edit is newer: your version v\(report.version) is kept as a conflict version. See `xfer versions \(report.document)`, then `xfer resolve \(report.document) --keep VERSION`"
                        )
                    } else if !report.conflicts.isEmpty {
                        printError(
                            "\(report.document) had changed on the server since this copy was synced; your newer version is current and the other is kept as conflict version \(report.conflicts.map { "v\($0)" }.joined(separator: ", ")). See `xfer versions \(report.document)`"
                        )
                    }
                    print(
                        "pushed \(report.document) v\(report.version): \(report.files) files, \(ByteCount(report.bytes)), \(report.chunks) chunks; sent \(report.chunksSent) chunks (\(ByteCount(report.bytesSent))), reused \(ByteCount(report.bytesReused)) in \(String(format: "%.2f", report.seconds)) s"
                    )
                }
            }
        }
    }

    struct Pull: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pull",
            abstract: "Pull a document's current version into a file or directory.",
            discussion: """
                Downloads only the chunks not already on disk, verifies every chunk against its id, \
                and replaces the destination atomically: the old file or tree, or the new one, \
                never a mix. Re-running an interrupted pull fetches only what did not arrive. \
                An existing destination is replaced only if this client pulled it from the same \
                document and it has not changed since (else exit 7, nothing changed; --force \
                replaces it); an existing directory that is not such a copy receives the \
                document inside it, as `cp -r` does. In an end-to-end encrypted container every \
                piece of the manifest and every chunk is opened and checked with the container's \
                key on this device; nothing that fails is written.
                """)

        @Argument(help: "The document's path in the container.")
        var name: String

        @Argument(help: "Where to put it (default: the document's last path component, here).", completion: .file())
        var destination: String?

        @Option(
            help: ArgumentHelp(
                "Pull this version (a superseded or conflict one; see `xfer versions`) instead of the current one.",
                valueName: "N"))
        var version: Int64?

        @Flag(
            help:
                "Replace whatever is at the destination. Without it, only a copy this client pulled from the same document and that is unchanged since is replaced; anything else is refused (exit 7) and left as it is."
        )
        var force = false

        @Flag(
            help:
                "Print what the pull would do (create, replace, nothing, or refuse) and how much it would download, and change nothing."
        )
        var dryRun = false

        @OptionGroup var client: ClientOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await runReportingErrors(json: output.json) {
                let document = try DocumentPath(name)
                let target = destination ?? String(document.components.last ?? "document")
                if dryRun {
                    var options = PullOptions()
                    options.force = force
                    let plan = try await withRemote(client, unlocking: true) { remote in
                        try await PullEngine(remote: remote, options: options).plan(
                            document, into: target, version: version)
                    }
                    if output.json {
                        printJSON(plan)
                    } else {
                        print(
                            "dry run: \(plan.action.rawValue) \(plan.destination) from \(plan.document) v\(plan.version): \(plan.reason)"
                                + (plan.action == .create || plan.action == .replace
                                    ? "; \(plan.files) files, \(ByteCount(plan.bytes)), \(plan.chunksToFetch) chunks to download (\(ByteCount(plan.bytesToFetch)))"
                                    : "")
                                + "; nothing was changed")
                    }
                    // A refused pull exits as the real one would (7), so a script can test first.
                    if plan.action == .refused {
                        throw ExitCode(ExitCodes.code(for: XferError(.conflict, plan.reason)))
                    }
                    return
                }
                let bar = ProgressBar(quiet: output.quiet || output.json)
                defer { bar.finish() }
                var options = PullOptions()
                options.force = force
                // The destination's state opens while the server says whether the container is
                // end-to-end encrypted; nothing is sent before it has.
                let report = try await withRemote(client) { remote in
                    try await remote.whileUnlocking { remote, confirmed in
                        try await PullEngine(remote: remote, options: options).pull(
                            document, into: target, version: version,
                            progress: bar.update, confirmed: confirmed)
                    }
                }
                bar.finish()
                if output.json {
                    printJSON(report)
                } else if !output.quiet {
                    print(
                        "pulled \(report.document) v\(report.version) into \(report.destination): \(report.files) files, \(ByteCount(report.bytes)); fetched \(report.chunksFetched) chunks (\(ByteCount(report.bytesFetched))), reused \(report.chunksReused) in \(String(format: "%.2f", report.seconds)) s"
                    )
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls",
            abstract: "List documents in the container (uploading ones included).")

        @Argument(help: "Only documents whose path starts with this (within --scope, if given).")
        var prefix: String = ""

        @Option(
            help: ArgumentHelp(
                "Only this scope: documents (Documents/…, user-visible) or data (the rest, app-private).",
                valueName: "SCOPE"))
        var scope: Scope?

        @Flag(
            name: [.customShort("l"), .long],
            help: "Long lines: the modification time (UTC) and the device that wrote each version too.")
        var long = false

        @Flag(
            help:
                "The deleted documents instead (what `xfer pull --version` can still bring back; as `xfer find --deleted`)."
        )
        var deleted = false

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            let (prefix, scope, deleted) = (prefix, scope, deleted)
            try await runClientCommand(
                client, json: json,
                { client in
                    deleted
                        ? try await client.find(
                            DocumentQuery(scope: scope, prefix: prefix, state: .deleted, sort: .path), limit: nil)
                        : try await client.list(prefix: prefix, scope: scope)
                }
            ) { list in
                for document in list.documents {
                    if long {
                        print(Find.line(document) + (document.device.map { "  [\($0)]" } ?? ""))
                    } else {
                        let size = ByteCount(document.size).description
                        print(
                            "\(size.padding(toLength: max(10, size.count), withPad: " ", startingAt: 0))  v\(document.version)  \(document.kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(document.path)\(document.stateNote)"
                        )
                    }
                }
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm",
            abstract: "Delete a document (a new version that records the deletion).")

        @Argument(help: "The document's path in the container.")
        var name: String

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json, { try await $0.delete(name) }) { info in
                print("deleted \(info.path) (v\(info.version))")
            }
        }
    }
}

extension Xfer {
    struct Quota: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "quota",
            abstract: "Show the account's storage use and quota.",
            discussion: """
                Use counts the plain bytes of each distinct chunk the account stores, once, \
                however many documents and versions share it, and each version the server keeps: \
                256 bytes for its record plus its manifest (about 40 bytes a chunk).
                """)

        @Flag(help: "Print one JSON object instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runClientCommand(client, json: json, { try await $0.account() }) { account in
                let percent = account.quota > 0 ? Double(account.charged) / Double(account.quota) * 100 : 0
                print(
                    "\(account.name): \(ByteCount(account.charged)) used of \(ByteCount(account.quota)) (\(String(format: "%.1f", percent)) %): "
                        + "\(ByteCount(account.used)) of chunks, \(ByteCount(account.versionBytes ?? 0)) of version records"
                )
            }
        }
    }
}
