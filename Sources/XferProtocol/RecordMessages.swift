import Foundation
import XferCore

// Records beside documents (docs/RECORDS.md): the JSON of CloudKit Web Services' records,
// zones and changes routes, served at /v1/containers/{c}/records/…, /zones/… and /changes/…,
// so that a client written for CloudKit needs only another base URL.

/// A zone's name: `{"zoneName": …}` (CloudKit's zone ID dictionary; `ownerRecordName` is not
/// used, a shared container names its owner in the path).
public struct ZoneID: Codable, Sendable, Hashable {
    /// The zone's name: 1 to 255 bytes, not starting with `_` unless it is `_defaultZone`.
    public var zoneName: String

    /// The zone every container has, which cannot be deleted.
    public static let defaultZone = ZoneID(zoneName: "_defaultZone")

    public init(zoneName: String) { self.zoneName = zoneName }

    enum CodingKeys: String, CodingKey { case zoneName }
}

/// One field's value and its type (CloudKit's record field dictionary).
public struct RecordField: Codable, Sendable, Hashable {
    /// The value, as JSON: see ``RecordFieldType`` for each type's form.
    public var value: JSONValue
    /// The type; when absent it is taken from the value (a string is `STRING`, an integer
    /// `INT64`, another number `DOUBLE`, a list the list of its first element's type).
    public var type: RecordFieldType?
    /// Sealed on the device (CloudKit's `encryptedValues`): set it on a field to save and
    /// ``RecordsClient`` seals it under the container's end-to-end key; the server keeps it
    /// as `ENCRYPTED_BYTES` and answers no query on it.
    public var isEncrypted: Bool?

    public init(value: JSONValue, type: RecordFieldType? = nil, isEncrypted: Bool? = nil) {
        self.value = value
        self.type = type
        self.isEncrypted = isEncrypted
    }

    enum CodingKeys: String, CodingKey { case value, type, isEncrypted }
}

/// A field's type and how its value is written.
public enum RecordFieldType: String, Codable, Sendable, Hashable, CaseIterable {
    /// A string.
    case string = "STRING"
    /// A 64-bit integer.
    case int64 = "INT64"
    /// A double.
    case double = "DOUBLE"
    /// Milliseconds since 1970, an integer.
    case timestamp = "TIMESTAMP"
    /// Bytes, in base64.
    case bytes = "BYTES"
    /// Another record of the zone: `{"recordName", "action"?: "NONE"|"DELETE_SELF"}`.
    case reference = "REFERENCE"
    /// A document version of the container: `{"path", "version"?}` (the latest when absent),
    /// so that large data rides the chunk engine.
    case asset = "ASSETID"
    /// `{"latitude", "longitude", "horizontalAccuracy"?, "altitude"?, …}`, degrees and metres.
    case location = "LOCATION"
    case stringList = "STRING_LIST"
    case int64List = "INT64_LIST"
    case doubleList = "DOUBLE_LIST"
    case timestampList = "TIMESTAMP_LIST"
    case bytesList = "BYTES_LIST"
    case referenceList = "REFERENCE_LIST"
    case assetList = "ASSETID_LIST"
    case locationList = "LOCATION_LIST"
    /// A field sealed on the device, in base64: only devices holding the container's key open it.
    case encryptedBytes = "ENCRYPTED_BYTES"

    /// The type of one element of a list type; `nil` for a scalar type.
    public var element: RecordFieldType? {
        switch self {
        case .stringList: .string
        case .int64List: .int64
        case .doubleList: .double
        case .timestampList: .timestamp
        case .bytesList: .bytes
        case .referenceList: .reference
        case .assetList: .asset
        case .locationList: .location
        default: nil
        }
    }

    /// The list type of this scalar type.
    public var list: RecordFieldType? { Self.allCases.first { $0.element == self } }
}

/// When and by whom a record was made or last changed (`created`, `modified`).
public struct RecordStamp: Codable, Sendable, Hashable {
    /// Milliseconds since 1970, the server's clock.
    public var timestamp: Int64
    /// The account that wrote.
    public var userRecordName: String
    /// The device that wrote, as the token or the request says.
    public var deviceID: String?

    public init(timestamp: Int64, userRecordName: String, deviceID: String?) {
        self.timestamp = timestamp
        self.userRecordName = userRecordName
        self.deviceID = deviceID
    }

    enum CodingKeys: String, CodingKey { case timestamp, userRecordName, deviceID }
}

/// A record (CloudKit's record dictionary).
public struct Record: Codable, Sendable, Hashable {
    /// Its name, unique in its zone: 1 to 255 bytes.
    public var recordName: String
    /// Its type: what queries select by.
    public var recordType: String?
    /// The server's tag of the record's current state: an update that names another is refused
    /// with `CONFLICT` (the record changed since the client read it).
    public var recordChangeTag: String?
    /// Its fields by name.
    public var fields: [String: RecordField]?
    /// When and by whom it was made.
    public var created: RecordStamp?
    /// When and by whom it last changed.
    public var modified: RecordStamp?
    /// Whether it was deleted (in changes).
    public var deleted: Bool?

    public init(
        recordName: String, recordType: String? = nil, recordChangeTag: String? = nil,
        fields: [String: RecordField]? = nil, created: RecordStamp? = nil, modified: RecordStamp? = nil,
        deleted: Bool? = nil
    ) {
        self.recordName = recordName
        self.recordType = recordType
        self.recordChangeTag = recordChangeTag
        self.fields = fields
        self.created = created
        self.modified = modified
        self.deleted = deleted
    }

    enum CodingKeys: String, CodingKey {
        case recordName, recordType, recordChangeTag, fields, created, modified, deleted
    }
}

/// What one operation or lookup gives back: the record, or why not (CloudKit's record fetch
/// error dictionary: `recordName`, `reason`, `serverErrorCode`, and for `CONFLICT` the server's
/// record, so the client can merge and retry).
public struct RecordResult: Codable, Sendable, Hashable {
    public var record: Record?
    public var recordName: String?
    public var reason: String?
    public var serverErrorCode: String?
    public var serverRecord: Record?

    public init(record: Record) { self.record = record }

    public init(recordName: String, error code: String, reason: String, serverRecord: Record? = nil) {
        self.recordName = recordName
        self.serverErrorCode = code
        self.reason = reason
        self.serverRecord = serverRecord
    }

    /// A record's dictionary on its own, or an error dictionary.
    public func encode(to encoder: any Encoder) throws {
        if let record {
            try record.encode(to: encoder)
            return
        }
        var container = encoder.container(keyedBy: ErrorKeys.self)
        try container.encodeIfPresent(recordName, forKey: .recordName)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(serverErrorCode, forKey: .serverErrorCode)
        try container.encodeIfPresent(serverRecord, forKey: .serverRecord)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: ErrorKeys.self)
        if let code = try container.decodeIfPresent(String.self, forKey: .serverErrorCode) {
            serverErrorCode = code
            recordName = try container.decodeIfPresent(String.self, forKey: .recordName)
            reason = try container.decodeIfPresent(String.self, forKey: .reason)
            serverRecord = try container.decodeIfPresent(Record.self, forKey: .serverRecord)
        } else {
            record = try Record(from: decoder)
        }
    }

    enum ErrorKeys: String, CodingKey { case recordName, reason, serverErrorCode, serverRecord }
}

/// CloudKit's `serverErrorCode` values that records answer with.
public enum RecordErrorCode {
    public static let conflict = "CONFLICT"
    public static let notFound = "NOT_FOUND"
    public static let exists = "EXISTS"
    public static let badRequest = "BAD_REQUEST"
    public static let limitExceeded = "LIMIT_EXCEEDED"
    public static let atomicError = "ATOMIC_ERROR"
    public static let quotaExceeded = "QUOTA_EXCEEDED"
    public static let zoneNotFound = "ZONE_NOT_FOUND"
    /// A `VALIDATE` reference names a record that is not there.
    public static let validatingReference = "VALIDATING_REFERENCE_ERROR"
}

/// What a records/modify operation does (CloudKit's `operationType`).
public enum RecordOperationType: String, Codable, Sendable, Hashable {
    /// Makes the record; `EXISTS` if there is one.
    case create
    /// Changes the fields given, the others kept; needs the current `recordChangeTag`.
    case update
    /// ``update`` whatever the tag.
    case forceUpdate
    /// Makes the record, or replaces all its fields; an existing one needs the current tag.
    case replace
    /// ``replace`` whatever the tag.
    case forceReplace
    /// Deletes the record; needs the current tag.
    case delete
    /// ``delete`` whatever the tag.
    case forceDelete

    /// Whether the record's change tag is checked.
    public var checksTag: Bool { self == .update || self == .replace || self == .delete }
}

/// One operation of records/modify.
public struct RecordOperation: Codable, Sendable, Hashable {
    public var operationType: RecordOperationType
    public var record: Record
    /// The fields to return (all when absent).
    public var desiredKeys: [String]?

    public init(_ type: RecordOperationType, _ record: Record, desiredKeys: [String]? = nil) {
        operationType = type
        self.record = record
        self.desiredKeys = desiredKeys
    }

    enum CodingKeys: String, CodingKey { case operationType, record, desiredKeys }
}

/// The JSON coders of the records routes: CloudKit's own key names (camelCase) and field names
/// as they are, where the rest of the wire format is snake_case (``WireJSON``).
public enum RecordJSON {
    /// Encodes a records message, keys sorted.
    public static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try! encoder.encode(value))  // strings, numbers, arrays and objects only
    }

    /// Decodes a records message.
    /// - Throws: `bad_request` saying what is wrong (``WireJSON/decode(_:from:)``'s rules, keys as written).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Sequence<UInt8>) throws -> T {
        try WireJSON.decode(type, from: bytes, snakeCase: false)
    }
}
