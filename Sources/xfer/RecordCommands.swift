import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferProtocol

extension Xfer {
    /// `xfer records …`: the container's records, in CloudKit Web Services' JSON (docs/RECORDS.md).
    struct Records: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "records",
            abstract: "Records beside documents: typed fields in zones, saved with change tags, queried and followed.",
            discussion: """
                Each command takes the JSON body of the CloudKit Web Services request of the same \
                name (an argument, or - for standard input) and prints the server's answer as \
                JSON. docs/RECORDS.md has the shapes and examples.
                """,
            subcommands: [
                Modify.self, Lookup.self, Query.self, Changes.self, DatabaseChanges.self, Zones.self, ModifyZones.self,
                Subscribe.self, Subscriptions.self, Notifications.self
            ])

        struct Modify: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "modify",
                abstract:
                    "Create, update, replace or delete records ({\"operations\": [...], \"zoneID\"?, \"atomic\"?}).",
                discussion:
                    "Exits 7 if any operation was refused (CONFLICT, EXISTS, NOT_FOUND, …); the answer says which.")
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, RecordModifyRequest.self, RecordResults.self) { try await $0.modify($1) }
            }
        }

        struct Lookup: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "lookup", abstract: "Fetch records by name ({\"records\": [{\"recordName\": …}], …}).")
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, RecordLookupRequest.self, RecordResults.self) { try await $0.lookup($1) }
            }
        }

        struct Query: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "query",
                abstract:
                    "Query records ({\"query\": {\"recordType\", \"filterBy\"?, \"sortBy\"?}, \"resultsLimit\"?, …}).")
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, RecordQueryRequest.self, RecordQueryResults.self) { try await $0.query($1) }
            }
        }

        struct Changes: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "changes",
                abstract: "What changed in zones after their sync tokens ({\"zones\": [{\"zoneID\", \"syncToken\"?}]})."
            )
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, ZoneChangesRequest.self, ZoneChangesList.self) {
                    try await $0.zoneChanges($1)
                }
            }
        }

        struct DatabaseChanges: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "database-changes",
                abstract: "The zones that changed after a sync token ({\"syncToken\"?}).")
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, DatabaseChangesRequest.self, XferProtocol.DatabaseChanges.self) {
                    try await $0.databaseChanges($1)
                }
            }
        }

        struct Zones: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "zones", abstract: "List the container's zones.")
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await runReportingErrors(json: false) {
                    let zones = try await withRemote(client) { try await RecordsClient(remote: $0).zones() }
                    print(String(decoding: RecordJSON.encode(zones), as: UTF8.self))
                }
            }
        }

        struct ModifyZones: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                commandName: "modify-zones",
                abstract: "Create or delete zones ({\"operations\": [{\"operationType\", \"zone\": {\"zoneID\"}}]}).",
                discussion: "Deleting a zone deletes every record in it.")
            @OptionGroup var body: RecordBody
            @OptionGroup var client: ClientOptions

            func run() async throws {
                try await body.run(client, ZoneModifyRequest.self, ZoneList.self) { try await $0.modifyZones($1) }
            }
        }
    }
}

extension Xfer.Records {
    struct Subscribe: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "subscribe",
            abstract:
                "Create, replace or delete subscriptions ({\"operations\": [{\"operationType\", \"subscription\"}]}).",
            discussion: """
                A query subscription ({"subscriptionID", "subscriptionType": "query", "query", "firesOn"?, \
                "firesOnce"?}) is told when a record it selects is made, changed or deleted; a zone one \
                ({"subscriptionType": "zone", "zoneID"}) of every change in the zone. Read what they \
                were told with `xfer records notifications`, or add "webhook": {"url", "secret"?} to \
                have the server POST them there, signed (docs/RECORDS.md, "Webhooks").
                """)
        @OptionGroup var body: RecordBody
        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await body.run(client, SubscriptionModifyRequest.self, SubscriptionList.self) {
                try await $0.modifySubscriptions($1)
            }
        }
    }

    struct Subscriptions: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "subscriptions", abstract: "List the container's subscriptions.")
        @OptionGroup var client: ClientOptions

        func run() async throws {
            try await runReportingErrors(json: false) {
                let list = try await withRemote(client) { try await RecordsClient(remote: $0).subscriptions() }
                print(String(decoding: RecordJSON.encode(list), as: UTF8.self))
            }
        }
    }

    struct Notifications: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "notifications",
            abstract: "The notifications subscriptions were told of, after a cursor.",
            discussion: """
                Prints {"notifications", "cursor", "moreComing"}; give the cursor back as --since. \
                --wait holds the request until one arrives (at most 60 s); --follow keeps reading, \
                one JSON notification a line, until interrupted.
                """)
        @Option(help: "The cursor to read after (0: from the oldest kept).")
        var since: Int64 = 0
        @Option(help: ArgumentHelp("Wait up to this many seconds for one when there are none.", valueName: "SECONDS"))
        var wait: Int = 0
        @Flag(help: "Keep reading until interrupted.")
        var follow = false
        @OptionGroup var client: ClientOptions

        func validate() throws {
            guard (0...60).contains(wait) else { throw ValidationError("--wait is 0 to 60 seconds") }
        }

        func run() async throws {
            try await runReportingErrors(json: false) {
                try await withRemote(client) { remote in
                    let records = RecordsClient(remote: remote)
                    var cursor = since
                    repeat {
                        let page = try await records.notifications(since: cursor, wait: follow ? 30 : wait)
                        if follow {
                            for notification in page.notifications {
                                print(String(decoding: RecordJSON.encode(notification), as: UTF8.self))
                            }
                        } else {
                            print(String(decoding: RecordJSON.encode(page), as: UTF8.self))
                        }
                        cursor = page.cursor
                    } while follow && !Task.isCancelled
                }
            }
        }
    }
}

/// The JSON body of a records command: an argument, or `-` for standard input.
struct RecordBody: ParsableArguments {
    @Argument(help: ArgumentHelp("The request's JSON, or - to read it from standard input.", valueName: "JSON"))
    var json: String

    /// Parses the body, sends it, prints the answer; exits 7 when an item of it was refused.
    func run<Request: Codable, Answer: Codable>(
        _ client: ClientOptions, _ request: Request.Type, _ answer: Answer.Type,
        _ call: (RecordsClient, Request) async throws -> Answer
    ) async throws {
        try await runReportingErrors(json: false) {
            let text =
                json == "-" ? String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) : json
            let parsed = try RecordJSON.decode(Request.self, from: Array(text.utf8))
            let result = try await withRemote(client) { try await call(RecordsClient(remote: $0), parsed) }
            let printed = RecordJSON.encode(result)
            print(String(decoding: printed, as: UTF8.self))
            if let results = result as? RecordResults, results.records.contains(where: { $0.serverErrorCode != nil }) {
                throw ExitCode(7)
            }
        }
    }
}
