import Foundation
import XferCore
import XferProtocol

/// A records/query as SQL over the records and their indexed values
/// (``RecordRules/indexValues(_:)``), the same text on SQLite and PostgreSQL: each filter a
/// test on the index (``RecordCondition``), each sort key the least of a field's values, then
/// the name. A query is asked one of several ways (``RecordQueryWay``), chosen by
/// ``RecordQueryPlan`` from how broad its filters are (``counting``).
struct RecordQuerySQL {
    /// Fields that are the record's own rather than indexed values.
    static let nameField = "___recordID"
    static let createdField = "___createTime"
    static let modifiedField = "___modTime"
    static let allTokens = "allTokens"
    /// What one query may ask, so that its statement stays small: filters, sort keys, the
    /// values of an IN and the words of a token filter.
    static let maximumFilters = 32
    static let maximumSortKeys = 8
    static let maximumListValues = 256
    static let maximumTokens = 32

    /// The record's own tests: zone, type, not deleted (and the one record of a subscription's test).
    private let own: [(String, [SQLValue])]
    /// The filters, in the query's order (a range of one field is one).
    let filters: [RecordCondition]
    /// The terms of ORDER BY, the name last.
    private let order: [(String, [SQLValue])]
    /// The query has no sort key: its order is the names', which the records' index walks.
    let byName: Bool
    private let scope: RecordCondition.Scope
    private let bytewise: String
    private let byIDs: String
    /// The rows skipped and the rows of a page (one more is asked, to tell whether more follow).
    let page: (offset: Int, limit: Int)

    /// The page of `query` in zone `zone` from `offset`, at most `limit` rows (one more is asked
    /// for, to tell whether another page follows).
    /// - Throws: `bad_request` for a filter whose value does not suit its comparator.
    /// - Parameter record: Only this record, by row id (whether it passes: a query subscription).
    init(_ query: RecordQuery, zone: Int64, offset: Int, limit: Int, dialect: SQLDialect, record: Int64? = nil) throws {
        try RecordRules.checkName(query.recordType, "record type")
        guard (query.filterBy?.count ?? 0) <= Self.maximumFilters, (query.sortBy?.count ?? 0) <= Self.maximumSortKeys
        else {
            throw XferError(
                .badRequest, "a query has at most \(Self.maximumFilters) filters and \(Self.maximumSortKeys) sort keys")
        }
        var own: [(String, [SQLValue])] = [
            ("r.zone_id = ? AND r.type = ? AND r.deleted = ?", [.int(zone), .text(query.recordType), .bool(false)])
        ]
        if let record { own.append(("r.id = ?", [.int(record)])) }
        var filters: [RecordCondition] = []
        for group in Self.grouped(query.filterBy ?? []) {
            if group.count > 1 || Self.isRange(group[0]) {
                filters.append(try Self.range(group))
            } else {
                filters += try Self.condition(group[0], dialect: dialect)
            }
        }
        var order: [(String, [SQLValue])] = []
        for sort in query.sortBy ?? [] {
            let direction = sort.ascending == false ? "DESC" : "ASC"
            for key in try Self.sortKeys(sort, dialect: dialect) {
                order.append(("(\(key.expression)) IS NULL, \(key.expression) \(direction)", key.values + key.values))
            }
        }
        order.append(("r.name\(dialect.bytewise) ASC", []))
        (self.own, self.filters, self.order) = (own, filters, order)
        byName = (query.sortBy ?? []).isEmpty
        scope = RecordCondition.Scope(zone: zone, type: query.recordType)
        bytewise = dialect.bytewise
        byIDs = dialect.byIDs
        page = (offset, limit)
    }

    /// The places of the filters a page may be found from: the first
    /// ``RecordQueryPlan/findingFilters`` able to (``RecordCondition/isFindable``); any others
    /// are tested per record.
    var findable: [Int] {
        Array(filters.indices.filter { filters[$0].isFindable }.prefix(RecordQueryPlan.findingFilters))
    }

    /// One row: for each of ``findable``, its matches counted up to `cap` (nil: none to count).
    func counting(cap: Int) -> (sql: String, values: [SQLValue])? {
        let counts = findable.compactMap { filters[$0].count(in: scope, cap: cap) }
        guard !counts.isEmpty else { return nil }
        return ("SELECT " + counts.map(\.0).joined(separator: ", "), counts.flatMap(\.1))
    }

    /// The name of record `count` by name, where a walk within that many ends (no row: fewer).
    func walkEnd(within count: Int) -> (sql: String, values: [SQLValue]) {
        let (test, values) = own[0]
        return (
            "SELECT r.name FROM records r WHERE \(test) ORDER BY r.name\(bytewise) LIMIT 1 OFFSET \(count - 1)", values
        )
    }

    /// The statement asking the page `way`; a walk within a count stops at the name `end`
    /// (``walkEnd(within:)``).
    func statement(_ way: RecordQueryWay, through end: String? = nil) -> (sql: String, values: [SQLValue]) {
        var conditions = own
        switch way {
        case .walk:
            conditions += filters.map { $0.perRecord() }
            if let end { conditions.append(("r.name\(bytewise) <= ?", [.text(end)])) }
        case .drive(let place):
            return statement(.intersect([place]))  // the matches of one filter, intersected with none
        case .intersect(let places) where places.isEmpty || !places.allSatisfy(findable.contains):
            return statement(.walk(within: nil))
        case .intersect(let places):
            conditions.append(RecordCondition.among(places.map { filters[$0] }, in: scope))
            conditions += filters.indices.filter { !places.contains($0) }.map { filters[$0].perRecord() }
        }
        // Found by ids, SQLite fetches each record by its id rather than walk the type's names.
        let table = if case .walk = way { "records r" } else { "records r\(byIDs)" }
        let sql = """
            SELECT r.* FROM \(table) WHERE \(conditions.map(\.0).joined(separator: " AND "))
            ORDER BY \(order.map(\.0).joined(separator: ", ")) LIMIT \(page.limit + 1) OFFSET \(page.offset)
            """
        return (sql, conditions.flatMap(\.1) + order.flatMap(\.1))
    }

    /// The fields a query names that records of its type hold sealed on the device
    /// (``RecordRules/encryptedKind``): a query on them is refused rather than answered empty.
    static func encryptedFields(of query: RecordQuery) -> (sql: String, values: [SQLValue])? {
        let own: Set<String> = [nameField, createdField, modifiedField, allTokens]
        let fields = Set((query.filterBy ?? []).map(\.fieldName) + (query.sortBy ?? []).map(\.fieldName))
            .subtracting(own).sorted()
        guard !fields.isEmpty else { return nil }
        let list = Array(repeating: "?", count: fields.count).joined(separator: ", ")
        return (
            "SELECT DISTINCT field FROM record_values WHERE zone_id = ? AND type = ? AND kind = '\(RecordRules.encryptedKind)' AND field IN (\(list)) ORDER BY field",
            [.text(query.recordType)] + fields.map { .text($0) }
        )
    }

    static let ordering: Set<RecordComparator> = [.lessThan, .lessThanOrEquals, .greaterThan, .greaterThanOrEquals]

    /// The SQL operator of a comparison comparator (`=` for the others).
    static func operation(_ comparator: RecordComparator) -> String {
        switch comparator {
        case .lessThan: "<"
        case .lessThanOrEquals: "<="
        case .greaterThan: ">"
        case .greaterThanOrEquals: ">="
        default: "="
        }
    }

    /// Whether `filter` is an ordering filter of an indexed field (one bound of a range).
    static func isRange(_ filter: RecordFilter) -> Bool {
        ordering.contains(filter.comparator) && ![nameField, createdField, modifiedField].contains(filter.fieldName)
    }

    /// The filters in order, each alone but for the ordering filters of one indexed field,
    /// grouped where the first of them stands (a range: `price > a AND price < b` is one walk of
    /// the index, not two halves of it intersected).
    static func grouped(_ filters: [RecordFilter]) -> [[RecordFilter]] {
        var groups: [[RecordFilter]] = []
        var rangeOf: [String: Int] = [:]
        for filter in filters {
            guard isRange(filter) else {
                groups.append([filter])
                continue
            }
            if let index = rangeOf[filter.fieldName] {
                groups[index].append(filter)
            } else {
                rangeOf[filter.fieldName] = groups.count
                groups.append([filter])
            }
        }
        return groups
    }

    /// The ordering filters of one field as one condition: a value of the field within every
    /// bound. A kind a bound cannot have (a string against a number) drops out.
    static func range(_ filters: [RecordFilter]) throws -> RecordCondition {
        let field = filters[0].fieldName
        try RecordRules.checkName(field, "field name")
        let bounds = try filters.map { filter in (operation(filter.comparator), try candidates(filter.fieldValue)) }
        var tests: [String] = []
        var values: [SQLValue] = []
        for (kind, column, _) in bounds[0].1 {
            let each = bounds.compactMap { bound in bound.1.first { $0.0 == kind }.map { (bound.0, $0.2) } }
            guard each.count == bounds.count else { continue }
            tests.append("(v.kind = ?" + each.map { " AND v.\(column) \($0.0) ?" }.joined() + ")")
            values += [.text(kind)] + each.map(\.1)
        }
        guard !tests.isEmpty else { return .plain("0 = 1", []) }
        return .has(
            .values, test: "v.field = ? AND (\(tests.joined(separator: " OR ")))", values: [.text(field)] + values,
            negated: false)
    }

    /// A filter as conditions on `r` (several for all of a set of words).
    static func condition(_ filter: RecordFilter, dialect: SQLDialect) throws -> [RecordCondition] {
        let value = filter.fieldValue.value
        switch filter.fieldName {
        case nameField: return [try own("r.name\(dialect.bytewise)", filter, text: true)]
        case createdField: return [try own("r.created_at", filter, text: false)]
        case modifiedField: return [try own("r.modified_at", filter, text: false)]
        default: break
        }
        try RecordRules.checkName(filter.fieldName, "field name")
        // Tokens of all of a record's strings, or of one field.
        let every =
            filter.fieldName == allTokens && [.containsAllTokens, .containsAnyTokens].contains(filter.comparator)
        let field = every ? "1 = 1" : "v.field = ?"
        let bound: [SQLValue] = every ? [] : [.text(filter.fieldName)]
        switch filter.comparator {
        case .near:
            let (test, values) = try RecordLocations.near(filter)
            return [.has(.locations, test: test, values: values, negated: false)]
        case .containsAllTokens, .containsAnyTokens:
            guard case .string(let text) = value else {
                throw XferError(.badRequest, "\(filter.comparator.rawValue) takes a string of words")
            }
            let tokens = RecordRules.tokens(text).sorted()
            guard (1...maximumTokens).contains(tokens.count) else {
                throw XferError(.badRequest, "\(filter.comparator.rawValue) takes 1 to \(maximumTokens) words")
            }
            let words = "\(field) AND v.kind = '\(RecordRules.tokenKind)' AND v.text"
            if filter.comparator == .containsAnyTokens {
                let list = Array(repeating: "?", count: tokens.count).joined(separator: ", ")
                return [
                    .has(
                        .values, test: "\(words) IN (\(list))", values: bound + tokens.map { .text($0) }, negated: false
                    )
                ]
            }
            return tokens.map { .has(.values, test: "\(words) = ?", values: bound + [.text($0)], negated: false) }
        default:
            let (test, values) = try matching(filter)
            let negated = [.notBeginsWith, .notIn, .notEquals, .notListContains].contains(filter.comparator)
            return [.has(.values, test: "\(field) AND (\(test))", values: bound + values, negated: negated)]
        }
    }

    /// The test on an index row `v` that one filter's value passes (its negation applied by the caller).
    static func matching(_ filter: RecordFilter) throws -> (String, [SQLValue]) {
        let sqlOperator = operation(filter.comparator)
        switch filter.comparator {
        case .equals, .notEquals, .listContains, .notListContains, .lessThan, .lessThanOrEquals, .greaterThan,
            .greaterThanOrEquals:
            break
        case .in, .notIn:
            guard case .array(let items) = filter.fieldValue.value, (1...maximumListValues).contains(items.count) else {
                throw XferError(
                    .badRequest, "\(filter.comparator.rawValue) takes a list of 1 to \(maximumListValues) values")
            }
            let element = filter.fieldValue.type?.element ?? filter.fieldValue.type
            var tests: [String] = []
            var values: [SQLValue] = []
            for item in items {
                for (kind, column, value) in try candidates(RecordField(value: item, type: element)) {
                    tests.append("(v.kind = ? AND v.\(column) = ?)")
                    values += [.text(kind), value]
                }
            }
            return (tests.joined(separator: " OR "), values)
        case .beginsWith, .notBeginsWith:
            guard case .string(let prefix) = filter.fieldValue.value, !prefix.isEmpty else {
                throw XferError(.badRequest, "\(filter.comparator.rawValue) takes a string")
            }
            return (
                "v.kind = 'STRING' AND v.text >= ? AND v.text < ? AND substr(v.text, 1, \(prefix.unicodeScalars.count)) = ?",
                [.text(prefix), .text(prefix + "\u{10FFFF}"), .text(prefix)]
            )
        case .containsAllTokens, .containsAnyTokens, .near:
            throw XferError(.internal, "\(filter.comparator.rawValue) is not a value test")
        }
        var tests: [String] = []
        var values: [SQLValue] = []
        for (kind, column, value) in try candidates(filter.fieldValue) {
            tests.append("(v.kind = ? AND v.\(column) \(sqlOperator) ?)")
            values += [.text(kind), value]
        }
        return (tests.joined(separator: " OR "), values)
    }

    /// What an indexed value equal to `field` looks like: its kind, column and bound value. A
    /// number without a type matches integers and doubles alike.
    static func candidates(_ field: RecordField) throws -> [(String, String, SQLValue)] {
        let type = try field.type.map { $0.element ?? $0 } ?? RecordRules.inferred(field.value, "fieldValue")
        switch (type, field.value) {
        case (.string, .string(let text)): return [("STRING", "text", .text(text))]
        case (.timestamp, .int(let int)): return [("TIMESTAMP", "number", .int(int))]
        case (.int64, .int(let int)):
            return field.type == nil
                ? [("INT64", "number", .int(int)), ("DOUBLE", "number", .int(RecordRules.ordered(Double(int))))]
                : [("INT64", "number", .int(int))]
        case (.double, _):
            guard let number = RecordRules.number(field.value) else { break }
            return [("DOUBLE", "number", .int(RecordRules.ordered(number)))]
        case (.reference, .object(let object)):
            guard case .string(let name)? = object["recordName"] else { break }
            return [("REFERENCE", "text", .text(name))]
        case (.reference, .string(let name)): return [("REFERENCE", "text", .text(name))]
        case (.asset, .object(let object)):
            guard case .string(let path)? = object["path"] else { break }
            return [("ASSETID", "text", .text(path))]
        default: break
        }
        throw XferError(.badRequest, "a query cannot compare with a value of type \(type.rawValue)")
    }

    /// A filter on one of the record's own columns: its name, or when made or changed.
    static func own(_ column: String, _ filter: RecordFilter, text: Bool) throws -> RecordCondition {
        func value(_ json: JSONValue) throws -> SQLValue {
            switch (text, json) {
            case (true, .string(let name)): return .text(name)
            case (true, .object(let object)):
                if case .string(let name)? = object["recordName"] { return .text(name) }
            case (false, .int(let time)): return .int(time)
            default: break
            }
            throw XferError(
                .badRequest, "\(filter.fieldName) is compared with a \(text ? "record name" : "time in ms")")
        }
        let operators: [RecordComparator: String] = [
            .equals: "=", .notEquals: "<>", .lessThan: "<", .lessThanOrEquals: "<=", .greaterThan: ">",
            .greaterThanOrEquals: ">="
        ]
        if let operation = operators[filter.comparator] {
            return .plain("\(column) \(operation) ?", [try value(filter.fieldValue.value)])
        }
        guard [.in, .notIn].contains(filter.comparator), case .array(let items) = filter.fieldValue.value,
            (1...maximumListValues).contains(items.count)
        else {
            throw XferError(.badRequest, "\(filter.fieldName) takes EQUALS, NOT_EQUALS, the orderings, IN and NOT_IN")
        }
        let list = Array(repeating: "?", count: items.count).joined(separator: ", ")
        return .plain("\(column) \(filter.comparator == .in ? "IN" : "NOT IN") (\(list))", try items.map(value))
    }

    /// What one sort key orders by: a column of the record, a field's nearest point to a
    /// location, or a field's least number, then text.
    static func sortKeys(_ sort: RecordSort, dialect: SQLDialect) throws -> [(expression: String, values: [SQLValue])] {
        let field = sort.fieldName
        if let location = sort.relativeLocation {
            try RecordRules.checkName(field, "field name")
            return [RecordLocations.sortKey(field, from: try RecordLocations.checked(location, "relativeLocation"))]
        }
        switch field {
        case nameField: return [("r.name\(dialect.bytewise)", [])]
        case createdField: return [("r.created_at", [])]
        case modifiedField: return [("r.modified_at", [])]
        default:
            let least = { (column: String) in
                "(SELECT MIN(v.\(column)) FROM record_values v WHERE v.record_id = r.id AND v.field = ? AND v.kind <> '\(RecordRules.tokenKind)')"
            }
            return [(least("number"), [.text(field)]), (least("text") + dialect.bytewise, [.text(field)])]
        }
    }
}
