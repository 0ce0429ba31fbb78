import Foundation
import XferCore
import XferProtocol

/// The rules of records (docs/RECORDS.md), written once for both backends: what a name, a zone
/// and a field may be, each field's type, what of a record is indexed for queries, and the
/// change tags and sync tokens the store hands out.
enum RecordRules {
    /// Checks a record's, type's, field's or zone's name: 1 to 255 bytes, no control characters.
    /// - Throws: `bad_request` naming `what`.
    static func checkName(_ name: String, _ what: String) throws {
        guard (1...255).contains(name.utf8.count),
            !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw XferError(
                .badRequest, "\(what) \"\(name.prefix(64))\" must be 1 to 255 bytes without control characters")
        }
    }

    /// A zone's name, checked: `_defaultZone`, or one that does not start with `_`.
    static func zoneName(_ zone: ZoneID?) throws -> String {
        let name = (zone ?? .defaultZone).zoneName
        try checkName(name, "zone name")
        guard name == ZoneID.defaultZone.zoneName || !name.hasPrefix("_") else {
            throw XferError(
                .badRequest, "zone name \"\(name.prefix(64))\" starts with _, which is kept for _defaultZone")
        }
        return name
    }

    /// `fields` with every type written out and every value checked against its type.
    /// - Throws: `bad_request` naming the field and what is wrong.
    static func typed(_ fields: [String: RecordField]) throws -> [String: RecordField] {
        var out: [String: RecordField] = [:]
        for (name, field) in fields {
            try checkName(name, "field name")
            guard !name.hasPrefix("___") else {
                throw XferError(
                    .badRequest, "field name \"\(name.prefix(64))\" starts with ___, which names system fields")
            }
            let type = try field.type ?? inferred(field.value, name)
            try check(field.value, as: type, name)
            guard field.isEncrypted != true || type == .encryptedBytes else {
                throw XferError(
                    .badRequest,
                    "field \"\(name.prefix(64))\" is marked isEncrypted but is not sealed (ENCRYPTED_BYTES): a device seals it under an end-to-end encrypted container's key (RecordsClient, xfer records), and the server never sees it in the clear"
                )
            }
            out[name] = RecordField(
                value: type == .double ? double(field.value) : field.value, type: type,
                isEncrypted: type == .encryptedBytes ? true : nil)
        }
        return out
    }

    /// The type a value without one has.
    static func inferred(_ value: JSONValue, _ field: String) throws -> RecordFieldType {
        switch value {
        case .string: return .string
        case .int: return .int64
        case .double: return .double
        case .array(let items):
            guard let first = items.first else { return .stringList }
            guard let list = try inferred(first, field).list else { break }
            return list
        case .object(let object):
            if object["recordName"] != nil { return .reference }
            if object["latitude"] != nil { return .location }
            if object["path"] != nil { return .asset }
        default: break
        }
        throw XferError(
            .badRequest, "field \"\(field.prefix(64))\" has a value whose type cannot be told; give its type")
    }

    /// Checks `value` is of `type`.
    static func check(_ value: JSONValue, as type: RecordFieldType, _ field: String) throws {
        func refuse(_ why: String) -> XferError {
            XferError(.badRequest, "field \"\(field.prefix(64))\" is \(type.rawValue): \(why)")
        }
        if let element = type.element {
            guard case .array(let items) = value else { throw refuse("its value must be a list") }
            for item in items { try check(item, as: element, field) }
            return
        }
        switch (type, value) {
        case (.string, .string), (.int64, .int), (.timestamp, .int), (.double, .double), (.double, .int): return
        case (.bytes, .string(let text)), (.encryptedBytes, .string(let text)):
            guard Data(base64Encoded: text) != nil else { throw refuse("its value must be base64") }
        case (.reference, .object(let object)):
            guard case .string(let name)? = object["recordName"] else { throw refuse("it needs a recordName") }
            try checkName(name, "referenced record name")
            if let action = object["action"],
                ![.string("NONE"), .string("DELETE_SELF"), .string("VALIDATE")].contains(action)
            {
                throw refuse("its action is NONE, DELETE_SELF or VALIDATE")
            }
        case (.asset, .object(let object)):
            guard case .string(let path)? = object["path"] else { throw refuse("it needs the path of a document") }
            _ = try DocumentPath(path)
            if let version = object["version"], case .int(let number) = version, number < 1 {
                throw refuse("its version is 1 or more")
            }
        case (.location, .object):
            _ = try RecordLocations.location(value, "field \"\(field.prefix(64))\" (LOCATION)")
        default:
            throw refuse("its value is not of that type")
        }
    }

    static func number(_ value: JSONValue?) -> Double? {
        switch value {
        case .int(let int)?: Double(int)
        case .double(let double)?: double
        default: nil
        }
    }

    /// The values of a field: a list's elements, or the one value.
    static func items(_ field: RecordField) -> [JSONValue] {
        if field.type?.element != nil || field.type == nil, case .array(let list) = field.value { return list }
        return [field.value]
    }

    static func double(_ value: JSONValue) -> JSONValue {
        if case .int(let int) = value { return .double(Double(int)) }
        return value
    }

    // MARK: What is indexed

    /// One indexed value of a field: a number (integers, timestamps, doubles in an order that
    /// sorts as they do) or a text (strings, referenced names, asset paths, tokens).
    struct IndexValue: Hashable {
        var field: String
        var kind: String
        var number: Int64?
        var text: String?
    }

    /// Tokens are the lowercased words of string fields, for the token comparators.
    static let tokenKind = "TOKEN"
    /// A field sealed on the device: a row without a value, so a query naming it is refused.
    static let encryptedKind = "ENCRYPTED"
    /// A reference whose record is deleted with the record it names (`DELETE_SELF`).
    static let deleteSelfKind = "DELETE_SELF"
    /// Records one deletion may take with it through `DELETE_SELF` references (CloudKit's 750).
    static let maximumCascade = 750

    /// What a record's fields put in the index: each scalar, each element of a list, and the
    /// tokens of strings. Bytes are not indexed; locations are points (``RecordLocations``).
    static func indexValues(_ fields: [String: RecordField]) -> [IndexValue] {
        var out: Set<IndexValue> = []
        for (name, field) in fields {
            guard let type = field.type else { continue }
            let items = type.element != nil ? Self.items(field) : [field.value]
            let kind = type.element ?? type
            for item in items {
                out.formUnion(indexValues(name, kind, item))
            }
        }
        return Array(out)
    }

    private static func indexValues(_ field: String, _ kind: RecordFieldType, _ value: JSONValue) -> [IndexValue] {
        switch (kind, value) {
        case (.string, .string(let text)):
            [IndexValue(field: field, kind: kind.rawValue, text: text)]
                + tokens(text).map { IndexValue(field: field, kind: tokenKind, text: $0) }
        case (.int64, .int(let int)), (.timestamp, .int(let int)):
            [IndexValue(field: field, kind: kind.rawValue, number: int)]
        case (.double, _):
            number(value).map { [IndexValue(field: field, kind: kind.rawValue, number: ordered($0))] } ?? []
        case (.reference, .object(let object)):
            if case .string(let name)? = object["recordName"] {
                [IndexValue(field: field, kind: kind.rawValue, text: name)]
                    + (object["action"] == .string("DELETE_SELF")
                        ? [IndexValue(field: field, kind: deleteSelfKind, text: name)] : [])
            } else {
                []
            }
        case (.asset, .object(let object)):
            if case .string(let path)? = object["path"] {
                [IndexValue(field: field, kind: kind.rawValue, text: path)]
            } else {
                []
            }
        case (.encryptedBytes, _): [IndexValue(field: field, kind: encryptedKind)]
        default: []
        }
    }

    /// A double as an integer that sorts as the doubles do (IEEE 754 bits, negatives flipped).
    static func ordered(_ value: Double) -> Int64 {
        let bits = Int64(bitPattern: (value == 0 ? 0.0 : value).bitPattern)
        return bits < 0 ? ~bits | Int64.min : bits
    }

    /// The lowercased words of `text` (letters and digits), at most 64 characters each, the
    /// first 256 distinct ones.
    static func tokens(_ text: String) -> Set<String> {
        var words: Set<String> = []
        for word in text.lowercased().split(whereSeparator: { !$0.isLetter && !$0.isNumber }) {
            words.insert(String(word.prefix(64)))
            if words.count == 256 { break }
        }
        return words
    }

    /// Indexed values one record may have (values, list elements and words together): a
    /// record's index stays within a few times its size.
    static let maximumIndexValues = 4_096

    /// A subscription as one may be kept: its name, zone, and query (which must compile).
    /// - Throws: `bad_request` saying what is wrong.
    static func check(_ subscription: RecordSubscription) throws {
        try RecordRules.checkName(subscription.subscriptionID, "subscriptionID")
        _ = try RecordRules.zoneName(subscription.zoneID)
        switch (subscription.subscriptionType, subscription.query) {
        case (.query, let query?):
            _ = try RecordQuerySQL(query, zone: 0, offset: 0, limit: 1, dialect: .sqlite)
            guard subscription.firesOn?.isEmpty != true else {
                throw XferError(.badRequest, "firesOn needs at least one of create, update and delete")
            }
        case (.query, nil): throw XferError(.badRequest, "a query subscription needs a query")
        case (.zone, _): break
        }
        if let webhook = subscription.webhook {
            _ = try WebhookRules.check(url: webhook.url)
            _ = try WebhookRules.secret(webhook.secret)
        }
    }

    // MARK: Tags and tokens

    /// A record's change tag: the change number that made its state, base 36.
    static func changeTag(_ sequence: Int64) -> String { String(sequence, radix: 36) }

    /// A sync token: a change number, as text.
    static func syncToken(_ sequence: Int64) -> String { "s\(sequence)" }

    /// The change number a sync token stands for (0 for none: from the start).
    /// - Throws: `bad_request` for one this server did not make.
    static func sequence(ofToken token: String?) throws -> Int64 {
        guard let token else { return 0 }
        guard token.hasPrefix("s"), let sequence = Int64(token.dropFirst()), sequence >= 0 else {
            throw XferError(.badRequest, "syncToken \"\(token.prefix(40))\" is not one this server gave")
        }
        return sequence
    }

    /// The page size asked for, within the limit.
    /// - Throws: `bad_request` past ``RecordLimits/results`` or below 1.
    static func resultsLimit(_ asked: Int?) throws -> Int {
        let limit = asked ?? RecordLimits.results
        guard (1...RecordLimits.results).contains(limit) else {
            throw XferError(.badRequest, "resultsLimit is 1 to \(RecordLimits.results)")
        }
        return limit
    }

    /// `record` with only the `desired` fields (all when `nil`).
    static func keeping(_ desired: [String]?, of record: Record) -> Record {
        guard let desired, let fields = record.fields else { return record }
        var record = record
        record.fields = fields.filter { desired.contains($0.key) }
        return record
    }
}

/// A query's continuation marker: where the next page starts, bound to the query it belongs to
/// (a marker given with another query is refused rather than read as a page of it).
enum RecordQueryMarker {
    static func marker(offset: Int, query: RecordQuery) -> String { "q\(offset).\(digest(query))" }

    /// The offset `marker` stands for (0 without one).
    /// - Throws: `bad_request` for a marker of another query, or not one at all.
    static func offset(_ marker: String?, query: RecordQuery) throws -> Int {
        guard let marker else { return 0 }
        let parts = marker.dropFirst().split(separator: ".")
        guard marker.hasPrefix("q"), parts.count == 2, let offset = Int(parts[0]), offset >= 0, offset <= 1_000_000,
            parts[1] == digest(query)
        else {
            throw XferError(.badRequest, "continuationMarker is not one this server gave for this query")
        }
        return offset
    }

    private static func digest(_ query: RecordQuery) -> String {
        String(ChunkID.of(RecordJSON.encode(query)).hex.prefix(16))
    }
}
