import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Records on both backends (docs/RECORDS.md): saving with change tags, lookups, queries,
/// zones and changes, with CloudKit's semantics.
@Suite struct RecordStoreTests {
    static let notes = try! ContainerName("notes")
    static let writer = RecordWriter(account: "alice", device: "laptop")

    static func note(_ name: String, _ title: String, _ stars: Int64, tags: [String] = [], tag: String? = nil)
        -> Record
    {
        Record(
            recordName: name, recordType: "Note", recordChangeTag: tag,
            fields: [
                "title": RecordField(value: .string(title)), "stars": RecordField(value: .int(stars)),
                "tags": RecordField(value: .array(tags.map { .string($0) }), type: .stringList),
                "weight": RecordField(value: .double(Double(stars) / 2))
            ])
    }

    static func modify(
        _ store: any MetadataStore, _ account: Int64, _ operations: [RecordOperation], zone: ZoneID? = nil,
        atomic: Bool? = nil
    ) async throws -> [RecordResult] {
        try await store.modifyRecords(
            account: account, container: notes,
            RecordModifyRequest(operations: operations, zoneID: zone, atomic: atomic), writer: writer
        ).records
    }

    @Test(arguments: MetadataStoreTests.backends) func changeTagsDecideWhoWins(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let made = try await Self.modify(store, alice, [RecordOperation(.create, Self.note("n1", "first", 3))])
            let tag = try #require(made[0].record?.recordChangeTag)
            #expect(made[0].record?.created?.userRecordName == "alice" && made[0].record?.created?.deviceID == "laptop")
            #expect(made[0].record?.fields?["stars"]?.type == .int64)
            let again = try await Self.modify(store, alice, [RecordOperation(.create, Self.note("n1", "x", 1))])
            #expect(again[0].serverErrorCode == "EXISTS")

            // An update from the current tag wins; one from the old tag is a conflict, with the server's record.
            var change = Record(
                recordName: "n1", recordChangeTag: tag, fields: ["title": RecordField(value: .string("second"))])
            let updated = try await Self.modify(store, alice, [RecordOperation(.update, change)])
            let newTag = try #require(updated[0].record?.recordChangeTag)
            #expect(newTag != tag && updated[0].record?.fields?["stars"]?.value == .int(3), "update keeps other fields")
            change.fields = ["title": RecordField(value: .string("stale"))]
            let stale = try await Self.modify(store, alice, [RecordOperation(.update, change)])
            #expect(stale[0].serverErrorCode == "CONFLICT")
            #expect(stale[0].serverRecord?.fields?["title"]?.value == .string("second"))
            #expect(stale[0].serverRecord?.recordChangeTag == newTag)
            let forced = try await Self.modify(store, alice, [RecordOperation(.forceUpdate, change)])
            #expect(forced[0].record?.fields?["title"]?.value == .string("stale"))

            // replace drops the fields not sent; forceReplace and forceUpdate make missing records.
            let replaced = try await Self.modify(
                store, alice,
                [
                    RecordOperation(
                        .forceReplace, Record(recordName: "n1", fields: ["title": RecordField(value: .string("only"))])),
                    RecordOperation(.forceUpdate, Self.note("n2", "made by forceUpdate", 5)),
                    RecordOperation(.update, Self.note("nope", "x", 1, tag: "1"))
                ])
            #expect(replaced[0].record?.fields?.keys.sorted() == ["title"] && replaced[0].record?.recordType == "Note")
            #expect(replaced[1].record?.recordName == "n2" && replaced[2].serverErrorCode == "NOT_FOUND")

            // A delete needs the current tag, forceDelete none; a deleted record is not found.
            let n2 = try #require(replaced[1].record?.recordChangeTag)
            let deletions = try await Self.modify(
                store, alice,
                [
                    RecordOperation(.delete, Record(recordName: "n2", recordChangeTag: "old")),
                    RecordOperation(.delete, Record(recordName: "n2", recordChangeTag: n2)),
                    RecordOperation(.forceDelete, Record(recordName: "n1"))
                ])
            #expect(deletions.map(\.serverErrorCode) == ["CONFLICT", nil, nil])
            let looked = try await store.lookupRecords(
                account: alice, container: Self.notes,
                RecordLookupRequest(records: [RecordNameRef(recordName: "n1"), RecordNameRef(recordName: "n2")]))
            #expect(looked.records.map(\.serverErrorCode) == ["NOT_FOUND", "NOT_FOUND"])
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func recordsCountAgainstTheQuota(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            func usage() async throws -> AccountUsage {
                try #require(try await store.accounts().first { $0.id == alice })
            }
            _ = try await Self.modify(
                store, alice, (0..<4).map { RecordOperation(.create, Self.note("n\($0)", "ü title", 1)) })
            _ = try await Self.modify(
                store, alice, [RecordOperation(.forceReplace, Self.note("n1", "longer title now", 2))])
            _ = try await Self.modify(store, alice, [RecordOperation(.forceDelete, Record(recordName: "n2"))])
            var used = try await usage()
            #expect(
                used.versionBytes > 0 && used.versionBytes == used.versionBytesKept, "what is charged is what is kept")
            _ = try await store.setQuota(account: try AccountName("alice"), quota: used.versionBytes + 500)
            let big = Record(
                recordName: "big", recordType: "Note",
                fields: ["text": RecordField(value: .string(String(repeating: "x", count: 4_000)))])
            let refused = try await Self.modify(store, alice, [RecordOperation(.create, big)])
            #expect(refused[0].serverErrorCode == "QUOTA_EXCEEDED")
            let huge = Record(
                recordName: "huge", recordType: "Note",
                fields: ["text": RecordField(value: .string(String(repeating: "x", count: RecordLimits.recordBytes)))])
            _ = try await store.setQuota(account: try AccountName("alice"), quota: 1 << 30)
            #expect(
                try await Self.modify(store, alice, [RecordOperation(.create, huge)])[0].serverErrorCode
                    == "LIMIT_EXCEEDED")
            _ = try await store.modifyZones(
                account: alice, container: Self.notes,
                ZoneModifyRequest(operations: [ZoneOperation(.create, ZoneID(zoneName: "Z"))]))
            _ = try await Self.modify(store, alice, [RecordOperation(.create, big)], zone: ZoneID(zoneName: "Z"))
            _ = try await store.modifyZones(
                account: alice, container: Self.notes,
                ZoneModifyRequest(operations: [ZoneOperation(.delete, ZoneID(zoneName: "Z"))]))
            used = try await usage()
            #expect(used.versionBytes == used.versionBytesKept, "a deleted zone gives its records' bytes back")
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func anAtomicRequestAppliesAllOrNothing(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let zone = ZoneID(zoneName: "Work")
            let bad = try await Self.modify(
                store, alice, [RecordOperation(.create, Self.note("a", "x", 1))], zone: zone)
            #expect(bad[0].serverErrorCode == "ZONE_NOT_FOUND")
            _ = try await store.modifyZones(
                account: alice, container: Self.notes, ZoneModifyRequest(operations: [ZoneOperation(.create, zone)]))
            _ = try await Self.modify(store, alice, [RecordOperation(.create, Self.note("a", "x", 1))], zone: zone)
            let failed = try await Self.modify(
                store, alice,
                [RecordOperation(.create, Self.note("b", "y", 2)), RecordOperation(.create, Self.note("a", "z", 3))],
                zone: zone)
            #expect(failed.map(\.serverErrorCode) == ["ATOMIC_ERROR", "EXISTS"])
            let b = try await store.lookupRecords(
                account: alice, container: Self.notes,
                RecordLookupRequest(records: [RecordNameRef(recordName: "b")], zoneID: zone))
            #expect(b.records[0].serverErrorCode == "NOT_FOUND", "the atomic request left nothing")
            // Not atomic: each alone.
            let alone = try await Self.modify(
                store, alice,
                [RecordOperation(.create, Self.note("b", "y", 2)), RecordOperation(.create, Self.note("a", "z", 3))],
                zone: zone, atomic: false)
            #expect(alone.map(\.serverErrorCode) == [nil, "EXISTS"])
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func queriesFilterSortAndPage(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            var operations: [RecordOperation] = []
            for index in 0..<30 {
                let title = index % 3 == 0 ? "Groceries list \(index)" : "Trip notes \(index)"
                operations.append(
                    RecordOperation(
                        .create,
                        Self.note("n\(index)", title, Int64(index % 6), tags: index % 2 == 0 ? ["even"] : ["odd"])))
            }
            operations.append(
                RecordOperation(
                    .create,
                    Record(recordName: "other", recordType: "Task", fields: ["stars": RecordField(value: .int(5))])))
            _ = try await Self.modify(store, alice, operations)
            func names(_ filters: [RecordFilter], sort: [RecordSort]? = nil, limit: Int? = nil) async throws -> [String]
            {
                try await store.queryRecords(
                    account: alice, container: Self.notes,
                    RecordQueryRequest(
                        query: RecordQuery(recordType: "Note", filterBy: filters, sortBy: sort), resultsLimit: limit)
                ).records.compactMap { $0.record?.recordName }
            }
            let five = try await names([RecordFilter("stars", .equals, RecordField(value: .int(5)))])
            #expect(five == ["n11", "n17", "n23", "n29", "n5"], "EQUALS, the type's records only, by name")
            #expect(
                try await names([RecordFilter("stars", .greaterThanOrEquals, RecordField(value: .int(5)))]).count == 5)
            #expect(try await names([RecordFilter("weight", .lessThan, RecordField(value: .double(0.6)))]).count == 10)
            #expect(
                try await names([RecordFilter("weight", .equals, RecordField(value: .int(2)))]).count == 5,
                "a number matches a double")
            #expect(
                try await names([RecordFilter("stars", .in, RecordField(value: .array([.int(0), .int(1)])))]).count
                    == 10)
            #expect(try await names([RecordFilter("stars", .notEquals, RecordField(value: .int(0)))]).count == 25)
            #expect(
                try await names([RecordFilter("title", .beginsWith, RecordField(value: .string("Groceries")))]).count
                    == 10)
            #expect(
                try await names([RecordFilter("tags", .listContains, RecordField(value: .string("odd")))]).count == 15)
            #expect(
                try await names([
                    RecordFilter("allTokens", .containsAllTokens, RecordField(value: .string("grocerIES list")))
                ])
                .count == 10)
            #expect(
                try await names([
                    RecordFilter("title", .containsAnyTokens, RecordField(value: .string("trip groceries")))
                ]).count == 30)
            #expect(
                try await names([RecordFilter("___recordID", .equals, RecordField(value: .string("n7")))]) == ["n7"])

            // Sorted by a field, then by name; paged by the marker.
            let sorted = try await names([], sort: [RecordSort("stars", ascending: false)])
            #expect(sorted.prefix(5) == ["n11", "n17", "n23", "n29", "n5"] && sorted.count == 30)
            var pages: [String] = []
            var marker: String? = nil
            repeat {
                let page = try await store.queryRecords(
                    account: alice, container: Self.notes,
                    RecordQueryRequest(
                        query: RecordQuery(recordType: "Note", sortBy: [RecordSort("stars")]), resultsLimit: 7,
                        continuationMarker: marker))
                pages += page.records.compactMap { $0.record?.recordName }
                marker = page.continuationMarker
            } while marker != nil
            #expect(pages == (try await names([], sort: [RecordSort("stars")])), "pages join to the whole")
            await #expect(throws: XferError.self, "a marker of another query") {
                _ = try await store.queryRecords(
                    account: alice, container: Self.notes,
                    RecordQueryRequest(
                        query: RecordQuery(recordType: "Task"), continuationMarker: "q7.0000000000000000"))
            }
        }
    }

    /// Every way a query can be asked (``RecordQueryWay``) gives the same pages: walked in name
    /// order (whole, or within a few records and then found the other way), found from each
    /// filter that can, from their intersection, and as the plan decides.
    @Test(arguments: MetadataStoreTests.backends) func everyWayOfAskingAQueryAnswersAlike(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let store = try #require(store as? any SQLMetadataStore)
            let words = ["red", "blue", "green", "gold"]
            let operations = (0..<120).map { index in
                let title = "\(words[index % 4]) \(words[index / 4 % 4]) note \(index)"
                let tags = index % 3 == 0 ? ["even", "third"] : index % 2 == 0 ? ["even"] : ["odd"]
                return RecordOperation(
                    .create, Self.note("n\(1000 - index * 7 % 1000)", title, Int64(index % 6), tags: tags))
            }
            // A record without tags passes NOT_LIST_CONTAINS.
            let bare = Record(
                recordName: "n500", recordType: "Note",
                fields: ["title": RecordField(value: .string("blue plain")), "stars": RecordField(value: .int(3))])
            _ = try await Self.modify(store, alice, operations + [RecordOperation(.create, bare)])
            let equals = { (field: String, value: JSONValue) in RecordFilter(field, .equals, RecordField(value: value))
            }
            let queries: [([RecordFilter], [RecordSort]?)] = [
                ([RecordFilter("tags", .listContains, RecordField(value: .string("even")))], nil),
                (
                    [equals("stars", .int(5)), RecordFilter("tags", .listContains, RecordField(value: .string("odd")))],
                    nil
                ),
                ([RecordFilter("title", .containsAllTokens, RecordField(value: .string("gold red")))], nil),
                (
                    [
                        RecordFilter("tags", .notListContains, RecordField(value: .string("third"))),
                        RecordFilter("stars", .greaterThan, RecordField(value: .int(1))),
                        RecordFilter("title", .beginsWith, RecordField(value: .string("blue")))
                    ], [RecordSort("stars", ascending: false)]
                ),
                ([equals("stars", .int(9))], nil)
            ]
            for (filters, sort) in queries {
                let query = RecordQuery(recordType: "Note", filterBy: filters, sortBy: sort)
                let findable = try RecordQuerySQL(query, zone: 0, offset: 0, limit: 1, dialect: .sqlite).findable
                var ways: [[RecordQueryWay]?] = [
                    nil, [.walk(within: nil)], [.walk(within: 60), .intersect(findable)], [.intersect(findable)]
                ]
                ways += findable.map { [.drive($0)] }
                var answers: Set<[String]> = []
                for way in ways {
                    var names: [String] = []
                    var marker: String?
                    repeat {
                        let page = try await store.queryRecords(
                            account: alice, container: Self.notes,
                            RecordQueryRequest(query: query, resultsLimit: 9, continuationMarker: marker), ways: way)
                        names += page.records.compactMap { $0.record?.recordName }
                        marker = page.continuationMarker
                    } while marker != nil
                    answers.insert(names)
                }
                #expect(answers.count == 1, "\(filters.map(\.fieldName)): \(answers)")
                #expect(answers.first?.isEmpty == (filters.first?.fieldValue.value == .int(9)), "\(answers)")
                if filters.count == 3 { #expect(answers.first?.contains("n500") == true, "\(answers)") }
            }
        }
    }

    /// Places by latitude and longitude: cities a known distance apart, two points either side
    /// of the antimeridian, two either side of 1,000 m from (0, 20), and a list of two cities.
    static let places: [(String, [(Double, Double)])] = [
        ("paris", [(48.8566, 2.3522)]), ("london", [(51.5074, -0.1278)]), ("brussels", [(50.8503, 4.3517)]),
        ("berlin", [(52.52, 13.405)]), ("newyork", [(40.7128, -74.006)]), ("east", [(0, 179.9)]),
        ("west", [(0, -179.9)]), ("in", [(0.008984, 20)]), ("out", [(0.009002, 20)]),
        ("tour", [(40.7128, -74.006), (51.5074, -0.1278)])
    ]

    @Test(arguments: MetadataStoreTests.backends) func nearFindsPlacesWithinADistance(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let operations = Self.places.map { name, points in
                let values = points.map { JSONValue.object(["latitude": .double($0.0), "longitude": .double($0.1)]) }
                let field =
                    values.count == 1
                    ? RecordField(value: values[0]) : RecordField(value: .array(values), type: .locationList)
                return RecordOperation(.create, Record(recordName: name, recordType: "Place", fields: ["at": field]))
            }
            _ = try await Self.modify(store, alice, operations + [RecordOperation(.create, Self.note("n", "x", 1))])
            func near(_ latitude: Double, _ longitude: Double, _ metres: Double?, descending: Bool = false)
                async throws -> [String]
            {
                let at = RecordLocation(latitude: latitude, longitude: longitude)
                let filter = RecordFilter(
                    "at", .near,
                    RecordField(value: .object(["latitude": .double(latitude), "longitude": .double(longitude)])),
                    distance: metres)
                let sort = RecordSort("at", ascending: !descending, relativeLocation: at)
                return try await store.queryRecords(
                    account: alice, container: Self.notes,
                    RecordQueryRequest(query: RecordQuery(recordType: "Place", filterBy: [filter], sortBy: [sort]))
                ).records.compactMap { $0.record?.recordName }
            }
            // Brussels is 264 km from Paris, London 344 km, Berlin 878 km.
            #expect(try await near(48.8566, 2.3522, 300_000) == ["paris", "brussels"])
            #expect(try await near(48.8566, 2.3522, 400_000) == ["paris", "brussels", "london", "tour"])
            #expect(
                try await near(48.8566, 2.3522, 900_000, descending: true) == [
                    "berlin", "london", "tour", "brussels", "paris"
                ])
            #expect(try await near(0, 180, 20_000) == ["east", "west"], "across the antimeridian")
            #expect(try await near(0, 20, 1_000) == ["in"], "999 m in, 1,001 m out")
            #expect(try await near(40.7128, -74.006, 0) == ["newyork", "tour"], "any point of a list")
            #expect(try await near(0, 0, 1e9).count == Self.places.count, "past half the Earth, everything")
            for bad in [nil, -1, Double.infinity] {
                await #expect(throws: XferError.self, "distance \(String(describing: bad))") {
                    try await near(0, 0, bad)
                }
            }
            await #expect(throws: XferError.self, "a latitude past 90") { try await near(91, 0, 10) }

            // A record's points go with its change and its deletion.
            let moved = Record(
                recordName: "paris", recordType: "Place",
                fields: ["at": RecordField(value: .object(["latitude": .double(52.52), "longitude": .double(13.4)]))])
            _ = try await Self.modify(store, alice, [RecordOperation(.forceReplace, moved)])
            #expect(try await near(48.8566, 2.3522, 300_000) == ["brussels"])
            _ = try await Self.modify(
                store, alice, [RecordOperation(.forceDelete, Record(recordName: "brussels", recordType: "Place"))])
            #expect(try await near(48.8566, 2.3522, 300_000).isEmpty)
            #expect(try await near(52.52, 13.405, 1_000) == ["berlin", "paris"])
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func fieldsSealedOnADeviceAreKeptAndNeverQueried(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let sealed = RecordField(value: .string("c2VhbGVk"), type: .encryptedBytes, isEncrypted: true)
            let record = Record(
                recordName: "c1", recordType: "Contact",
                fields: ["name": RecordField(value: .string("Ada")), "phone": sealed])
            let saved = try await Self.modify(store, alice, [RecordOperation(.create, record)])
            #expect(saved[0].record?.fields?["phone"] == sealed)
            var unsealed = record
            unsealed.recordName = "c2"
            unsealed.fields?["phone"] = RecordField(value: .string("+44"), isEncrypted: true)
            await #expect(throws: XferError.self, "marked isEncrypted but not sealed: the request is refused") {
                try await Self.modify(store, alice, [RecordOperation(.create, unsealed)])
            }
            func query(_ filters: [RecordFilter], sort: [RecordSort]? = nil) async throws -> [String] {
                try await store.queryRecords(
                    account: alice, container: Self.notes,
                    RecordQueryRequest(query: RecordQuery(recordType: "Contact", filterBy: filters, sortBy: sort))
                ).records.compactMap { $0.record?.recordName }
            }
            #expect(try await query([RecordFilter("name", .equals, RecordField(value: .string("Ada")))]) == ["c1"])
            await #expect(throws: XferError.self, "a filter on a sealed field") {
                try await query([RecordFilter("phone", .equals, RecordField(value: .string("+44")))])
            }
            await #expect(throws: XferError.self, "a sort by one") { try await query([], sort: [RecordSort("phone")]) }
        }
    }

    /// The layout before locations were indexed, per backend.
    static let beforeLocations = ["sqlite": "v20: records", "postgres": "v18: records"]

    @Test(arguments: MetadataStoreTests.backends) func locationsSavedBeforeTheyWereIndexedAreFound(_ kind: String)
        async throws
    {
        try await IndexKeyTests.withPlace(kind, "rl") { place in
            let last: String = try #require(Self.beforeLocations[kind])
            do {
                let old = try await IndexKeyTests.open(kind, place, migratingUpTo: last) as! any SQLMetadataStore
                defer { (old as? PostgresMetadataStore)?.shutdown() }
                _ = try await old.createAccount(
                    name: try AccountName("alice"), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(place)"))
                let account = try #require(
                    try await old.read { try $0.sql.int("SELECT id FROM accounts WHERE name = 'alice'") })
                try await old.execute("INSERT INTO containers (account_id, name) VALUES (?, 'notes')", [.int(account)])
                let fields = #"{"at":{"type":"LOCATION","value":{"latitude":48.8566,"longitude":2.3522}}}"#
                try await old.write { tx in
                    let container = try #require(try tx.sql.int("SELECT id FROM containers WHERE name = 'notes'"))
                    try tx.sql.rows(
                        "INSERT INTO record_zones (container_id, name, sequence, deleted) VALUES (?, '_defaultZone', 1, ?)",
                        container, false)
                    let zone = try #require(try tx.sql.int("SELECT id FROM record_zones"))
                    try tx.sql.rows(
                        """
                        INSERT INTO records (zone_id, name, type, fields, sequence, deleted, created_at, created_by,
                          modified_at, modified_by) VALUES (?, 'paris', 'Place', ?, 1, ?, 0, 'alice', 0, 'alice')
                        """, zone, fields, false)
                }
            }
            let store = try await IndexKeyTests.open(kind, place)
            defer { (store as? PostgresMetadataStore)?.shutdown() }
            let alice = try await MetadataStoreTests.accountID(store, "alice")
            let near = RecordFilter(
                "at", .near, RecordField(value: .object(["latitude": .double(48.85), "longitude": .double(2.35)])),
                distance: 2_000)
            let found = try await store.queryRecords(
                account: alice, container: Self.notes,
                RecordQueryRequest(query: RecordQuery(recordType: "Place", filterBy: [near])))
            #expect(found.records.compactMap { $0.record?.recordName } == ["paris"])
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func changesFollowSyncTokens(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            func changes(_ token: String?, limit: Int = 200) async throws -> ZoneChanges {
                try await store.zoneChanges(
                    account: alice, container: Self.notes,
                    ZoneChangesRequest(zones: [
                        ZoneChangesQuery(zoneID: .defaultZone, syncToken: token, resultsLimit: limit)
                    ])
                ).zones[0]
            }
            let empty = try await changes(nil)
            #expect(empty.records.isEmpty && !empty.moreComing)
            _ = try await Self.modify(
                store, alice, (0..<5).map { RecordOperation(.create, Self.note("n\($0)", "t", 1)) })
            let first = try await changes(nil, limit: 3)
            #expect(first.records.count == 3 && first.moreComing)
            let rest = try await changes(first.syncToken, limit: 3)
            #expect(rest.records.count == 2 && !rest.moreComing)
            _ = try await Self.modify(store, alice, [RecordOperation(.forceDelete, Record(recordName: "n0"))])
            let deleted = try await changes(rest.syncToken)
            #expect(
                deleted.records.map { $0.record?.recordName } == ["n0"] && deleted.records[0].record?.deleted == true)

            let database = try await store.databaseChanges(
                account: alice, container: Self.notes, DatabaseChangesRequest())
            #expect(database.zones.map(\.zoneID) == [.defaultZone])
            let after = try await store.databaseChanges(
                account: alice, container: Self.notes, DatabaseChangesRequest(syncToken: database.syncToken))
            #expect(after.zones.isEmpty)
            _ = try await store.modifyZones(
                account: alice, container: Self.notes,
                ZoneModifyRequest(operations: [ZoneOperation(.create, ZoneID(zoneName: "Work"))]))
            let zones = try await store.zones(account: alice, container: Self.notes)
            #expect(zones.zones.compactMap(\.zoneID?.zoneName) == ["_defaultZone", "Work"])
            let later = try await store.databaseChanges(
                account: alice, container: Self.notes, DatabaseChangesRequest(syncToken: database.syncToken))
            #expect(later.zones.map(\.zoneID.zoneName) == ["Work"])
            let removed = try await store.modifyZones(
                account: alice, container: Self.notes,
                ZoneModifyRequest(operations: [
                    ZoneOperation(.delete, ZoneID(zoneName: "Work")), ZoneOperation(.delete, .defaultZone)
                ]))
            #expect(removed.zones.map(\.serverErrorCode) == [nil, "BAD_REQUEST"])
            _ = try await store.deleteAccount(try AccountName("alice"), dryRun: false)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func subscriptionsAreToldOfWhatTheyWatch(_ kind: String) async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            let starred = RecordQuery(
                recordType: "Note", filterBy: [RecordFilter("stars", .greaterThanOrEquals, RecordField(value: .int(4)))]
            )
            let subscribed = try await store.modifySubscriptions(
                account: alice, container: Self.notes,
                SubscriptionModifyRequest(operations: [
                    SubscriptionOperation(
                        .create, RecordSubscription(subscriptionID: "starred", subscriptionType: .query, query: starred)
                    ),
                    SubscriptionOperation(.create, RecordSubscription(subscriptionID: "all", subscriptionType: .zone)),
                    SubscriptionOperation(
                        .create,
                        RecordSubscription(
                            subscriptionID: "once", subscriptionType: .query, query: RecordQuery(recordType: "Note"),
                            firesOn: [.delete], firesOnce: true)),
                    SubscriptionOperation(.create, RecordSubscription(subscriptionID: "all", subscriptionType: .zone))
                ]))
            #expect(subscribed.subscriptions.map(\.serverErrorCode) == [nil, nil, nil, "EXISTS"])
            await #expect(throws: XferError.self, "a query that does not compile") {
                _ = try await store.modifySubscriptions(
                    account: alice, container: Self.notes,
                    SubscriptionModifyRequest(operations: [
                        SubscriptionOperation(
                            .create,
                            RecordSubscription(
                                subscriptionID: "bad", subscriptionType: .query,
                                query: RecordQuery(
                                    recordType: "Note",
                                    filterBy: [RecordFilter("stars", .in, RecordField(value: .int(1)))])))
                    ]))
            }
            _ = try await Self.modify(store, alice, [RecordOperation(.create, Self.note("low", "t", 1))])
            _ = try await Self.modify(store, alice, [RecordOperation(.create, Self.note("high", "t", 5))])
            _ = try await Self.modify(store, alice, [RecordOperation(.forceUpdate, Self.note("low", "t", 4))])
            _ = try await Self.modify(store, alice, [RecordOperation(.forceDelete, Record(recordName: "high"))])
            _ = try await Self.modify(store, alice, [RecordOperation(.forceDelete, Record(recordName: "low"))])
            let all = try await store.notifications(account: alice, container: Self.notes, after: 0, limit: 100)
            let seen = all.notifications.map { "\($0.subscriptionID) \($0.reason.rawValue) \($0.recordName)" }
            #expect(
                seen == [
                    "all create low", "all create high", "starred create high", "all update low", "starred update low",
                    "all delete high", "once delete high", "starred delete high", "all delete low", "starred delete low"
                ])
            let left = try await store.subscriptions(account: alice, container: Self.notes)
            #expect(
                left.subscriptions.compactMap(\.subscription?.subscriptionID) == ["all", "starred"], "once fired once")
            // Pages hold whole changes; the cursor goes on from the last.
            let first = try await store.notifications(account: alice, container: Self.notes, after: 0, limit: 2)
            #expect(first.notifications.count == 3 && first.moreComing)
            let rest = try await store.notifications(
                account: alice, container: Self.notes, after: first.cursor, limit: 100)
            #expect(first.notifications.count + rest.notifications.count == 10 && !rest.moreComing)
            let none = try await store.notifications(
                account: alice, container: Self.notes, after: rest.cursor, limit: 100)
            #expect(none.notifications.isEmpty && none.cursor == rest.cursor)
            _ = try await store.deleteAccount(try AccountName("alice"), dryRun: false)
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func deleteSelfReferencesGoWithTheirRecord(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            func child(_ name: String, of parent: String, _ action: String) -> RecordOperation {
                RecordOperation(
                    .create,
                    Record(
                        recordName: name, recordType: "Item",
                        fields: [
                            "parent": RecordField(
                                value: .object(["recordName": .string(parent), "action": .string(action)]))
                        ]))
            }
            _ = try await Self.modify(
                store, alice,
                [
                    RecordOperation(.create, Record(recordName: "p", recordType: "List")),
                    child("c1", of: "p", "DELETE_SELF"), child("c2", of: "p", "NONE"),
                    child("g", of: "c1", "DELETE_SELF")
                ])
            #expect(
                try await Self.modify(store, alice, [RecordOperation(.forceDelete, Record(recordName: "p"))])[0].record?
                    .deleted == true)
            let left = try await store.lookupRecords(
                account: alice, container: Self.notes,
                RecordLookupRequest(records: ["c1", "c2", "g"].map { RecordNameRef(recordName: $0) }))
            #expect(left.records.map { $0.serverErrorCode ?? "kept" } == ["NOT_FOUND", "kept", "NOT_FOUND"])

            // A VALIDATE reference needs its record in the zone, live.
            let validating = try await Self.modify(
                store, alice, [child("v1", of: "c2", "VALIDATE"), child("v2", of: "p", "VALIDATE")])
            #expect(validating.map { $0.serverErrorCode ?? "saved" } == ["saved", "VALIDATING_REFERENCE_ERROR"])

            let asset = Record(
                recordName: "photo", recordType: "Item",
                fields: ["image": RecordField(value: .object(["path": .string("Documents/none.jpg")]))])
            let refused = try await Self.modify(store, alice, [RecordOperation(.create, asset)])
            #expect(refused[0].serverErrorCode == "BAD_REQUEST" && refused[0].reason?.contains("push it first") == true)
        }
    }
}
