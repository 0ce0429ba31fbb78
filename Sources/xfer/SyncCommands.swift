import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Keep a directory in sync with a container.",
            discussion: """
                Each file under DIR is a document (its path relative to DIR); a directory whose \
                name ends in a package extension is one package document; other directories \
                travel too, empty ones included, and one deleted elsewhere is removed only \
                once it is empty here. Local changes are \
                pushed, remote ones pulled, deletions go both ways, renames move no data. A \
                local file that changed since the last sync is never overwritten: it is pushed, \
                and if the server had a newer edit both are kept (see `xfer versions`). \
                --once syncs and exits; --watch follows local changes (inotify) and remote ones \
                (the change feed) until interrupted, retrying with backoff while the server is \
                unreachable. One sync per directory at a time. Paths ignored by .xferignore files \
                (gitignore syntax, one per directory, each for its directory and below), by \
                --exclude or by the built-in defaults (editor swap and backup files, .DS_Store, \
                Thumbs.db, desktop.ini, ._*) are left alone: never pushed, never pulled over, \
                never deleted. An end-to-end encrypted container syncs the same once this device \
                holds its key (`xfer key unlock`): names, chunks and manifests are sealed here, and \
                the folder keeps to that key. There, a document the server shows older than it \
                showed this device is kept here and --once exits 12 (rolled back); --once exits 9 \
                when anything the server sent fails its check (a chunk, a name, a deletion no \
                device sealed).
                """)

        @Argument(help: "The directory (bound to the container on first sync).", completion: .directory)
        var directory: String

        @Flag(help: "Sync once and exit (the default).")
        var once = false

        @Flag(help: "Keep syncing as things change, until interrupted.")
        var watch = false

        @Option(
            name: .customLong("package-extension"),
            help: ArgumentHelp(
                "A directory name extension that makes a package (repeatable; remembered for DIR; default: pkg, bundle, rtfd, xfpkg).",
                valueName: "EXT"))
        var packageExtensions: [String] = []

        @Option(
            help: ArgumentHelp(
                "Keep local data under this size, evicting the least recently used synced documents.", valueName: "SIZE"
            ))
        var localLimit: ByteCount?

        @Flag(
            help:
                "Let a pass delete more than 50 documents that are also more than a third of the directory's (held back otherwise)."
        )
        var allowMassDelete = false

        @Option(
            help: ArgumentHelp(
                "Days what sync deletes or replaces here stays in DIR/.xfer-trash (0: no trash).", valueName: "DAYS"))
        var trashDays: Int = 30

        @Option(
            help: ArgumentHelp(
                "With --watch: a file changed less than this many milliseconds ago waits until it has been left alone that long (lock and temporary files that live for less never travel; 0: push at once).",
                valueName: "MS"))
        var quietPeriod: Int = 200

        @Option(
            help: ArgumentHelp(
                "Ignore what this gitignore-style pattern matches, as if it ended DIR/.xferignore (repeatable; this run only; e.g. 'build/', '*.log', '!keep.log').",
                valueName: "PATTERN"))
        var exclude: [String] = []

        @Flag(
            help:
                "Print what one pass would do (upload, download, delete here or there, conflicts, held deletions) and change nothing, here or on the server."
        )
        var dryRun = false

        @Flag(help: "Print one JSON object per event instead of text (with --dry-run: one object with every step).")
        var json = false

        @Flag(name: .shortAndLong, help: "Print only errors and conflicts.")
        var quiet = false

        @OptionGroup var selection: SelectionOptions

        @OptionGroup var compression: CompressionOptions
        @OptionGroup var client: ClientOptions

        func validate() throws {
            try selection.validate()
            if once && watch { throw ValidationError("--once and --watch exclude each other") }
            if dryRun && watch { throw ValidationError("--dry-run shows one pass; it does not go with --watch") }
            if trashDays < 0 { throw ValidationError("--trash-days must not be negative") }
            if quietPeriod < 0 || quietPeriod > 600_000 {
                throw ValidationError("--quiet-period is milliseconds, 0 to 600000")
            }
            do {
                for pattern in exclude { try IgnoreRules.validate(pattern) }
            } catch let error as XferError {
                throw ValidationError(error.message)
            }
        }

        func run() async throws {
            try await runReportingErrors(json: json) {
                try await withRemote(client, unlocking: true) { remote in try await sync(remote) }
            }
        }

        func sync(_ remote: Remote) async throws {
            var options = SyncOptions()
            options.localLimit = localLimit?.value
            options.allowMassDelete = allowMassDelete
            options.trashDays = trashDays
            options.quietPeriod = .milliseconds(quietPeriod)
            options.exclude = exclude
            options.push.compression = compression.policy
            let state = try SyncState(directory: directory, stateDirectory: remote.stateDirectory)
            if selection.changes {
                let chosen = try selection.applied(to: try state.selection())
                if dryRun { options.selection = chosen } else { try state.setSelection(chosen) }
            }
            if dryRun {
                options.packageExtensions =
                    !packageExtensions.isEmpty
                    ? Set(
                        packageExtensions.map {
                            $0.trimmingCharacters(in: CharacterSet(charactersIn: ".")).lowercased()
                        })
                    : try state.packageExtensions() ?? options.packageExtensions
                let preview = try await SyncDirectory(
                    directory: directory, remote: remote, options: options, bind: false
                ).preview()
                Self.report(preview, json: json)
                return
            }
            if !packageExtensions.isEmpty { try state.setPackageExtensions(packageExtensions) }
            options.packageExtensions = try state.packageExtensions() ?? options.packageExtensions
            let engine = try SyncEngine(directory: directory, remote: remote, options: options)
            let printer = Task { [json, quiet] in
                for await event in engine.events { Self.report(event, json: json, quiet: quiet) }
            }
            defer { printer.cancel() }
            if watch {
                if !json && !quiet {
                    printError(
                        "watching \(engine.directory.directory) ↔ \(remote.container) on \(remote.connection.server); Ctrl-C stops"
                    )
                }
                let signals = SignalStop()
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await engine.watch() }
                    group.addTask { await signals.wait() }
                    try await group.next()
                    group.cancelAll()
                }
                await engine.close()
                _ = await printer.value
            } else {
                let summary = try await engine.syncOnce()
                await engine.close()
                _ = await printer.value
                try Self.check(summary)
            }
        }

        /// A pass that met a rolled-back document (exit 12) or data that failed its check
        /// (exit 9) has not synced what it should have, whatever else it did.
        static func check(_ summary: SyncSummary) throws {
            if summary.rolledBack > 0 {
                throw XferError(
                    .rolledBack,
                    "\(summary.rolledBack) document\(summary.rolledBack == 1 ? " is" : "s are") older on the server than it showed this device: rolled back there; the copies here were kept"
                )
            }
            if summary.unverified > 0 {
                throw XferError(
                    .corruptChunk,
                    "\(summary.unverified) document\(summary.unverified == 1 ? "" : "s"), chunk\(summary.unverified == 1 ? "" : "s") or name\(summary.unverified == 1 ? "" : "s") from the server failed their check and were not used; run `xfer verify --documents`"
                )
            }
        }

        static func report(_ preview: SyncPreview, json: Bool) {
            if json {
                printJSON(preview)
                return
            }
            if let change = preview.serverChanged {
                print("note: \(change); a real pass deletes nothing and uploads every local document again")
            }
            let symbols: [SyncPreview.Step.Action: String] = [
                .upload: "↑ upload", .download: "↓ download", .deleteLocal: "✕ delete here",
                .deleteRemote: "✕ delete on server", .conflict: "! conflict",
                .held: "‖ held", .skipped: "- skipped", .exclude: "○ leave out"
            ]
            for step in preview.steps {
                print(
                    "\(symbols[step.action]!.padding(toLength: 19, withPad: " ", startingAt: 0))\(step.path)  (\(step.reason))"
                )
            }
            let counts = Dictionary(grouping: preview.steps, by: \.action).mapValues(\.count)
            print(
                "dry run: \(counts[.upload] ?? 0) to upload, \(counts[.download] ?? 0) to download, \((counts[.deleteLocal] ?? 0) + (counts[.deleteRemote] ?? 0)) to delete, \(counts[.held] ?? 0) held, \(counts[.conflict] ?? 0) in conflict; nothing was changed"
            )
        }

        /// What a pass says of names on the server that do not open under the container's key.
        static func unopenedMessage(count: Int, held: Int) -> String {
            let names = count == 1 ? "1 name" : "\(count) names"
            let kept =
                held == 0
                ? ""
                : "; \(held) document\(held == 1 ? "" : "s") missing from its listing \(held == 1 ? "was" : "were") kept here, not deleted"
            return
                "the server lists \(names) that do not open under the container's key (damaged there, or written without the key)\(kept). Run `xfer verify --documents` to see which"
        }

        static func report(_ event: SyncEvent, json: Bool, quiet: Bool) {
            if json {
                if let line = SyncEventLine(event) { printJSON(line) }
                fflush(nil)
                return
            }
            switch event {
            case .uploaded(let path, let version, let bytes):
                if !quiet { print("↑ \(path) v\(version) (\(ByteCount(bytes)) sent)") }
            case .downloaded(let path, let version, let bytes):
                if !quiet { print("↓ \(path) v\(version) (\(ByteCount(bytes)) fetched)") }
            case .removedLocally(let path): if !quiet { print("✕ \(path) (deleted on the server, removed here)") }
            case .removedRemotely(let path): if !quiet { print("✕ \(path) (deleted here, deleted on the server)") }
            case .leftOut(let path):
                if !quiet { print("○ \(path) (left out of this device's selection: trashed here, kept on the server)") }
            case .evicted(let path): if !quiet { print("○ \(path) evicted") }
            case .conflict(let path, let current, let conflicts):
                print(
                    "! \(path): v\(current) is current; conflict versions \(conflicts.map { "v\($0)" }.joined(separator: ", ")) — see `xfer versions \(path)`"
                )
            case .failed(let path, let error): printError("\(path.map { "\($0): " } ?? "")\(error.message)")
            case .retrying(let path, let message):
                if !quiet { printError("~ \(path): \(message); tried again on the next pass") }
            case .passFailed(let error, let retry):
                printError("the pass failed (\(error.message)); retrying in \(retry)")
            case .folderMissing(let message): printError("\(message); waiting for it to come back")
            case .offline(let error, let retry): printError("offline (\(error.message)); retrying in \(retry)")
            case .watchLimited(let count, let example, let reason):
                printError(
                    "cannot watch \(count) director\(count == 1 ? "y" : "ies") for changes (\(example): \(reason)); they are rescanned every \(Int(SyncOptions().unwatchedRescanInterval.seconds)) s instead. Raise the limit: sysctl fs.inotify.max_user_watches=524288"
                )
            case .serverChanged(let reason):
                printError("\(reason); nothing local is deleted: local documents are uploaded to it again")
            case .deletionsHeld(let local, let remote, let total):
                printError(
                    "this pass would delete \(local > 0 ? "\(local) documents here" : "")\(local > 0 && remote > 0 ? " and " : "")\(remote > 0 ? "\(remote) on the server" : "") of \(total): more than \(MassDeletion.minimumCount) and a third, so nothing was deleted. If that is what you meant, run `xfer sync --once --allow-mass-delete`; deleted files go to the trash first (`xfer trash list`)"
                )
            case .namesUnopened(let count, let held):
                printError(Self.unopenedMessage(count: count, held: held))
            case .rolledBack(let path, let server, let seen):
                printError(
                    "! \(path): the server shows v\(server), older than v\(seen) it showed this device: rolled back; kept here, not synced"
                )
            case .passFinished(let summary):
                if !quiet
                    && (summary.uploaded + summary.downloaded + summary.removedLocally + summary.removedRemotely
                        + summary.evicted
                        + summary.directories > 0)
                {
                    let directories =
                        summary.directories > 0
                        ? ", \(summary.directories) director\(summary.directories == 1 ? "y" : "ies")" : ""
                    print(
                        "synced: \(summary.uploaded) up, \(summary.downloaded) down, \(summary.removedLocally + summary.removedRemotely) deleted\(directories), \(summary.conflicts) in conflict, \(summary.failed) failed in \(String(format: "%.2f", summary.seconds)) s"
                    )
                }
            case .progress: break
            }
            fflush(nil)
        }
    }
}
