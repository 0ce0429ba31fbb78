import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension DocumentKind: ExpressibleByArgument {}

extension DocumentInfo {
    /// What `ls` and `find` print after a path: the state when it is not current, and any
    /// unresolved conflict versions.
    var stateNote: String {
        var note = state == .current ? "" : "  (\(state.rawValue))"
        if let conflicts { note += "  (conflict: \(conflicts.map { "v\($0)" }.joined(separator: ", ")))" }
        return note
    }
}
extension DocumentQuery.Sort: ExpressibleByArgument {}

/// A point in time given on the command line: `2026-11-01`, `2026-11-01 10:00[:00]` or
/// `2026-11-01T10:00:00Z` (UTC unless an offset is given), or an age: `30m`, `12h`, `7d` ago.
struct PointInTime: ExpressibleByArgument {
    var nanoseconds: Int64

    init?(argument: String) {
        self.init(argument, now: Date())
    }

    /// Nanoseconds since 1970 fit in 64 bits from 1677 to 2262: a time outside is refused.
    init?(_ text: String, now: Date) {
        func at(_ seconds: Double) -> Int64? {
            let nanoseconds = seconds * 1e9
            return nanoseconds >= 0 && nanoseconds < 9.2e18 ? Int64(nanoseconds) : nil
        }
        if let span = Span(argument: text), text.last.map({ !$0.isNumber }) ?? false {
            guard let value = at(now.timeIntervalSince1970 - Double(span.seconds)) else { return nil }
            nanoseconds = value
            return
        }
        if let date = ISO8601DateFormatter().date(from: text) {
            guard let value = at(date.timeIntervalSince1970) else { return nil }
            nanoseconds = value
            return
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        for format in [
            "yyyy-MM-dd", "yyyy-MM-dd HH:mm", "yyyy-MM-dd HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd'T'HH:mm:ss"
        ] {
            formatter.dateFormat = format
            if let date = formatter.date(from: text) {
                guard let value = at(date.timeIntervalSince1970) else { return nil }
                nanoseconds = value
                return
            }
        }
        return nil
    }
}

struct SizeArgument: ExpressibleByArgument {
    var bytes: Int64
    init?(argument: String) {
        guard let count = ByteCount(parsing: argument) else { return nil }
        bytes = count.value
    }
}

extension Xfer {
    struct Find: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "find",
            abstract:
                "Search the container's documents by name, kind, date, size or state; --watch keeps the result live.",
            discussion: """
                PATTERN is a glob matched against each document's name (its last path component), \
                ignoring case: `*.pdf`, `report-202?-*`, `[a-c]*.txt`. Quote it so the shell leaves \
                it alone. Without a pattern every name matches. Choose a folder with --prefix or \
                --scope. Times are UTC dates (`2026-11-01`, `2026-11-01 10:00`), ISO 8601 \
                (`2026-11-01T10:00:00+01:00`), or ages (`30m`, `12h`, `7d` ago).

                With --watch the result is printed, then one line per change as other devices \
                push, delete or conflict: `+` entered, `-` left, `~` changed (one JSON object per \
                update with --json), until interrupted.

                In an end-to-end encrypted container the server cannot read names: every \
                document is listed and the search is made on this device.
                """)

        @Argument(help: "A glob matched against document names, ignoring case (default: every name).")
        var pattern: String?

        @Option(
            name: .customLong("kind"),
            help: ArgumentHelp("Only this kind: file, package or directory (repeatable).", valueName: "KIND"))
        var kinds: [DocumentKind] = []

        @Option(help: ArgumentHelp("Only this scope: documents (Documents/…) or data (the rest).", valueName: "SCOPE"))
        var scope: Scope?

        @Option(
            help: ArgumentHelp(
                "Only documents whose path starts with this (within --scope, if given).", valueName: "PREFIX"))
        var prefix: String = ""

        @Option(help: ArgumentHelp("Only documents modified at or after this time.", valueName: "TIME"))
        var modifiedAfter: PointInTime?

        @Option(help: ArgumentHelp("Only documents modified before this time.", valueName: "TIME"))
        var modifiedBefore: PointInTime?

        @Option(help: ArgumentHelp("Only documents of at least this size (64K, 1.5G).", valueName: "SIZE"))
        var minSize: SizeArgument?

        @Option(help: ArgumentHelp("Only documents of at most this size.", valueName: "SIZE"))
        var maxSize: SizeArgument?

        @Flag(help: "Only documents with unresolved conflicts.")
        var conflicts = false

        @Flag(help: "Only deleted documents (what `xfer pull --version` can still bring back).")
        var deleted = false

        @Option(help: ArgumentHelp("Order: path, name, modified or size (ties by path).", valueName: "ORDER"))
        var sort: DocumentQuery.Sort = .path

        @Flag(help: "Reverse the order (largest, newest or Z first).")
        var reverse = false

        @Option(help: ArgumentHelp("At most this many documents (default: all).", valueName: "N"))
        var limit: Int?

        @Flag(help: "Keep the result live: print each change to it until interrupted.")
        var watch = false

        @Flag(help: "Print JSON instead of text.")
        var json = false

        @OptionGroup var client: ClientOptions

        func validate() throws {
            if conflicts && deleted { throw ValidationError("--conflicts and --deleted cannot be combined") }
            if let limit, limit < 1 { throw ValidationError("--limit must be at least 1") }
            if watch && limit != nil { throw ValidationError("--watch keeps the whole result; leave out --limit") }
            do {
                try query.validate()
            } catch let error as XferError {
                throw ValidationError(error.message)
            }
        }

        var query: DocumentQuery {
            DocumentQuery(
                name: pattern, kinds: kinds.isEmpty ? nil : Set(kinds), scope: scope, prefix: prefix,
                modifiedAfter: modifiedAfter?.nanoseconds, modifiedBefore: modifiedBefore?.nanoseconds,
                minimumSize: minSize?.bytes, maximumSize: maxSize?.bytes,
                state: conflicts ? .conflict : deleted ? .deleted : .current, sort: sort, descending: reverse)
        }

        func run() async throws {
            let query = query
            if !watch {
                try await runClientCommand(client, json: json, { try await $0.find(query, limit: limit) }) { list in
                    for document in list.documents { print(Self.line(document)) }
                    if list.more, let limit { printError("(the first \(limit); more match)") }
                }
                return
            }
            try await runReportingErrors(json: json) {
                try await withRemote(client) { remote in
                    for try await update in DocumentClient(remote: remote).watch(
                        query, wait: ProtocolLimits.maximumWaitSeconds)
                    {
                        if json {
                            printJSON(update)
                        } else if update.initial {
                            for document in update.documents { print(Self.line(document)) }
                            print("-- \(update.documents.count) documents; watching for changes (Ctrl-C to stop)")
                        } else {
                            for document in update.removed { print("- " + Self.line(document)) }
                            for document in update.added { print("+ " + Self.line(document)) }
                            for document in update.changed { print("~ " + Self.line(document)) }
                        }
                        fflush(nil)
                    }
                }
            }
        }

        /// `  12.0 KiB  2026-11-21 10:04:05  v3  file     Documents/a.txt  (conflict: v4)`
        static func line(_ document: DocumentInfo) -> String {
            let size = ByteCount(document.size).description
            return
                "\(size.padding(toLength: max(10, size.count), withPad: " ", startingAt: 0))  \(formatTime(document.mtimeNs))  v\(document.version)  "
                + "\(document.kind.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0))  \(document.path)\(document.stateNote)"
        }
    }
}
