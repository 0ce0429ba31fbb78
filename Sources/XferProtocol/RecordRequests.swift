import Foundation
import XferCore

// The request and answer bodies of the records routes (docs/RECORDS.md), in CloudKit Web
// Services' shapes; coded with ``RecordJSON``.

/// The most operations, lookups or results one request takes or gives (CloudKit's 200).
public enum RecordLimits {
    public static let operations = 200
    public static let results = 200
    /// Bytes of a record's fields, as JSON: CloudKit's 1 MiB.
    public static let recordBytes = 1 << 20
    /// Bytes of one request body: every operation at its largest would not fit, a few do.
    public static let requestBytes = 8 << 20
    /// Subscriptions one container may have.
    public static let subscriptions = 1_000
}

/// `records/modify`.
public struct RecordModifyRequest: Codable, Sendable, Hashable {
    public var operations: [RecordOperation]
    public var zoneID: ZoneID?
    /// All or nothing: one operation failing fails them all (`ATOMIC_ERROR` for the others).
    public var atomic: Bool?
    public var desiredKeys: [String]?

    public init(operations: [RecordOperation], zoneID: ZoneID? = nil, atomic: Bool? = nil) {
        self.operations = operations
        self.zoneID = zoneID
        self.atomic = atomic
    }

    enum CodingKeys: String, CodingKey { case operations, zoneID, atomic, desiredKeys }
}

/// The answer of `records/modify` and `records/lookup`: one item per operation or name, in order.
public struct RecordResults: Codable, Sendable, Hashable {
    public var records: [RecordResult]

    public init(records: [RecordResult]) { self.records = records }
}

/// A record named in a lookup.
public struct RecordNameRef: Codable, Sendable, Hashable {
    public var recordName: String

    public init(recordName: String) { self.recordName = recordName }

    enum CodingKeys: String, CodingKey { case recordName }
}

/// `records/lookup`.
public struct RecordLookupRequest: Codable, Sendable, Hashable {
    public var records: [RecordNameRef]
    public var zoneID: ZoneID?
    public var desiredKeys: [String]?

    public init(records: [RecordNameRef], zoneID: ZoneID? = nil, desiredKeys: [String]? = nil) {
        self.records = records
        self.zoneID = zoneID
        self.desiredKeys = desiredKeys
    }

    enum CodingKeys: String, CodingKey { case records, zoneID, desiredKeys }
}

/// How a query compares a field with a value (CloudKit's `comparator`).
public enum RecordComparator: String, Codable, Sendable, Hashable, CaseIterable {
    case equals = "EQUALS"
    case notEquals = "NOT_EQUALS"
    case lessThan = "LESS_THAN"
    case lessThanOrEquals = "LESS_THAN_OR_EQUALS"
    case greaterThan = "GREATER_THAN"
    case greaterThanOrEquals = "GREATER_THAN_OR_EQUALS"
    case `in` = "IN"
    case notIn = "NOT_IN"
    case beginsWith = "BEGINS_WITH"
    case notBeginsWith = "NOT_BEGINS_WITH"
    case listContains = "LIST_CONTAINS"
    case notListContains = "NOT_LIST_CONTAINS"
    case containsAllTokens = "CONTAINS_ALL_TOKENS"
    case containsAnyTokens = "CONTAINS_ANY_TOKENS"
    /// A location within the filter's `distance` (metres) of the value's.
    case near = "NEAR"
}

/// A point on the Earth: a LOCATION field's value (its other keys, such as `altitude`, are
/// kept in the record and ignored by queries).
public struct RecordLocation: Codable, Sendable, Hashable {
    public var latitude: Double
    public var longitude: Double

    public init(latitude: Double, longitude: Double) {
        self.latitude = latitude
        self.longitude = longitude
    }
}

/// One condition of a query.
public struct RecordFilter: Codable, Sendable, Hashable {
    public var comparator: RecordComparator
    /// The field; `___recordID` for the record's name; `allTokens` with the token comparators
    /// for every string field.
    public var fieldName: String
    public var fieldValue: RecordField
    /// NEAR's radius, in metres along the Earth's surface.
    public var distance: Double?

    public init(_ fieldName: String, _ comparator: RecordComparator, _ value: RecordField, distance: Double? = nil) {
        self.fieldName = fieldName
        self.comparator = comparator
        fieldValue = value
        self.distance = distance
    }

    enum CodingKeys: String, CodingKey { case comparator, fieldName, fieldValue, distance }
}

/// One key of a query's order.
public struct RecordSort: Codable, Sendable, Hashable {
    public var fieldName: String
    /// Ascending unless `false`.
    public var ascending: Bool?
    /// For a LOCATION field: order by distance from here (nearest first when ascending).
    public var relativeLocation: RecordLocation?

    public init(_ fieldName: String, ascending: Bool = true, relativeLocation: RecordLocation? = nil) {
        self.fieldName = fieldName
        self.ascending = ascending
        self.relativeLocation = relativeLocation
    }

    enum CodingKeys: String, CodingKey { case fieldName, ascending, relativeLocation }
}

/// What a query selects: records of one type passing every filter, in the sort's order.
public struct RecordQuery: Codable, Sendable, Hashable {
    public var recordType: String
    public var filterBy: [RecordFilter]?
    public var sortBy: [RecordSort]?

    public init(recordType: String, filterBy: [RecordFilter]? = nil, sortBy: [RecordSort]? = nil) {
        self.recordType = recordType
        self.filterBy = filterBy
        self.sortBy = sortBy
    }

    enum CodingKeys: String, CodingKey { case recordType, filterBy, sortBy }
}

/// `records/query`.
public struct RecordQueryRequest: Codable, Sendable, Hashable {
    public var query: RecordQuery
    public var zoneID: ZoneID?
    /// At most ``RecordLimits/results`` (the default).
    public var resultsLimit: Int?
    /// Where the previous page ended (its answer's).
    public var continuationMarker: String?
    public var desiredKeys: [String]?

    public init(
        query: RecordQuery, zoneID: ZoneID? = nil, resultsLimit: Int? = nil, continuationMarker: String? = nil,
        desiredKeys: [String]? = nil
    ) {
        self.query = query
        self.zoneID = zoneID
        self.resultsLimit = resultsLimit
        self.continuationMarker = continuationMarker
        self.desiredKeys = desiredKeys
    }

    enum CodingKeys: String, CodingKey { case query, zoneID, resultsLimit, continuationMarker, desiredKeys }
}

/// The answer of `records/query`: a page, and where the next one starts while there is one.
public struct RecordQueryResults: Codable, Sendable, Hashable {
    public var records: [RecordResult]
    public var continuationMarker: String?

    public init(records: [RecordResult], continuationMarker: String?) {
        self.records = records
        self.continuationMarker = continuationMarker
    }

    enum CodingKeys: String, CodingKey { case records, continuationMarker }
}

/// A zone as `zones/list` and `changes/database` give it.
public struct ZoneInfo: Codable, Sendable, Hashable {
    public var zoneID: ZoneID
    /// Where its changes stand now: give it to `changes/zone` to read what comes after.
    public var syncToken: String?
    /// Whether modifications in it may be atomic (always).
    public var atomic: Bool?
    /// In `changes/database`: whether the zone was deleted.
    public var deleted: Bool?

    public init(zoneID: ZoneID, syncToken: String?, atomic: Bool? = true, deleted: Bool? = nil) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.atomic = atomic
        self.deleted = deleted
    }

    enum CodingKeys: String, CodingKey { case zoneID, syncToken, atomic, deleted }
}

/// The answer of `zones/list` and `zones/modify`.
public struct ZoneList: Codable, Sendable, Hashable {
    public var zones: [ZoneResult]

    public init(zones: [ZoneResult]) { self.zones = zones }
}

/// A zone, or why an operation on it failed.
public struct ZoneResult: Codable, Sendable, Hashable {
    public var zoneID: ZoneID?
    public var syncToken: String?
    public var atomic: Bool?
    public var deleted: Bool?
    public var reason: String?
    public var serverErrorCode: String?

    public init(_ zone: ZoneInfo) {
        zoneID = zone.zoneID
        syncToken = zone.syncToken
        atomic = zone.atomic
        deleted = zone.deleted
    }

    public init(zoneID: ZoneID, error code: String, reason: String) {
        self.zoneID = zoneID
        serverErrorCode = code
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey { case zoneID, syncToken, atomic, deleted, reason, serverErrorCode }
}

/// One operation of `zones/modify`.
public struct ZoneOperation: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable { case create, delete }

    public struct Zone: Codable, Sendable, Hashable {
        public var zoneID: ZoneID
        enum CodingKeys: String, CodingKey { case zoneID }
    }

    public var operationType: Kind
    public var zone: Zone

    public init(_ type: Kind, _ zoneID: ZoneID) {
        operationType = type
        zone = Zone(zoneID: zoneID)
    }

    enum CodingKeys: String, CodingKey { case operationType, zone }
}

/// `zones/modify`.
public struct ZoneModifyRequest: Codable, Sendable, Hashable {
    public var operations: [ZoneOperation]

    public init(operations: [ZoneOperation]) { self.operations = operations }
}

/// One zone of `changes/zone`.
public struct ZoneChangesQuery: Codable, Sendable, Hashable {
    public var zoneID: ZoneID
    /// Where the previous answer ended; absent for everything from the start.
    public var syncToken: String?
    public var resultsLimit: Int?
    public var desiredKeys: [String]?

    public init(zoneID: ZoneID, syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.zoneID = zoneID
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }

    enum CodingKeys: String, CodingKey { case zoneID, syncToken, resultsLimit, desiredKeys }
}

/// `changes/zone`.
public struct ZoneChangesRequest: Codable, Sendable, Hashable {
    public var zones: [ZoneChangesQuery]

    public init(zones: [ZoneChangesQuery]) { self.zones = zones }
}

/// What changed in one zone after a sync token, deletions included, in order.
public struct ZoneChanges: Codable, Sendable, Hashable {
    public var zoneID: ZoneID
    public var records: [RecordResult]
    /// Where this page ends: give it back for what comes after.
    public var syncToken: String
    /// Whether more changes follow this page.
    public var moreComing: Bool
    public var reason: String?
    public var serverErrorCode: String?

    public init(zoneID: ZoneID, records: [RecordResult], syncToken: String, moreComing: Bool) {
        self.zoneID = zoneID
        self.records = records
        self.syncToken = syncToken
        self.moreComing = moreComing
    }

    enum CodingKeys: String, CodingKey { case zoneID, records, syncToken, moreComing, reason, serverErrorCode }
}

/// The answer of `changes/zone`.
public struct ZoneChangesList: Codable, Sendable, Hashable {
    public var zones: [ZoneChanges]

    public init(zones: [ZoneChanges]) { self.zones = zones }
}

/// `changes/database`.
public struct DatabaseChangesRequest: Codable, Sendable, Hashable {
    public var syncToken: String?
    public var resultsLimit: Int?

    public init(syncToken: String? = nil, resultsLimit: Int? = nil) {
        self.syncToken = syncToken
        self.resultsLimit = resultsLimit
    }

    enum CodingKeys: String, CodingKey { case syncToken, resultsLimit }
}

/// The answer of `changes/database`: the zones that changed after the token.
public struct DatabaseChanges: Codable, Sendable, Hashable {
    public var zones: [ZoneInfo]
    public var syncToken: String
    public var moreComing: Bool

    public init(zones: [ZoneInfo], syncToken: String, moreComing: Bool) {
        self.zones = zones
        self.syncToken = syncToken
        self.moreComing = moreComing
    }

    enum CodingKeys: String, CodingKey { case zones, syncToken, moreComing }
}
