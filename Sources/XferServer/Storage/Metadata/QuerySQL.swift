import Foundation
import XferCore
import XferProtocol

/// The SQL of one search (``DocumentQuery``) in one container, decided from the query alone:
/// which table leads, the conditions that narrow the rows, the order, and each page's keyset
/// condition. Which table leads decides which index serves (docs/PERFORMANCE.md, "Search at
/// a million documents"): an order by time or size, and the deleted, walk `versions` by their
/// indexes and look each row's document up; the rest walk `documents` in path or name order.
/// Keyset conditions are written so the walked index's range serves them
/// (`key >= k AND (key > k OR path > p)`).
struct QuerySQL: Equatable {
    /// The `FROM` clause.
    var source: String
    /// The conditions every page holds, joined by `AND`.
    var conditions: [String]
    /// The values of their placeholders, in order.
    var values: [SQLValue]
    /// The sort key's expression; `nil` for path order (the path alone).
    var key: String?
    /// Whether the sort key is a name (text) rather than a number.
    var keyIsText: Bool
    /// `>` ascending, `<` descending.
    var after: String
    /// The `ORDER BY` clause.
    var order: String
    /// The dialect's bytewise collation, appended to the path.
    var bytewise: String

    init(container: Int64, _ query: DocumentQuery, dialect: SQLDialect) {
        let bytewise = dialect.bytewise
        self.bytewise = bytewise
        if query.sort == .modified || query.sort == .size || query.state == .deleted {
            source = "versions v JOIN documents d ON d.id = v.document_id"
            conditions = ["v.container_id = ?", "v.version = COALESCE(d.current_version, d.latest_version)"]
        } else {
            // A name pattern read in path order: the index that holds both, so a name that
            // does not match costs no row read.
            let hint =
                query.likePattern != nil && query.sort == .path ? dialect.indexedBy("documents_by_path_name") : ""
            source =
                "documents d\(hint) JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)"
            conditions = ["d.container_id = ?"]
        }
        values = [.int(container)]
        switch query.state {
        case .current:
            conditions.append("v.state != 'deleted'")
        case .conflict:
            conditions.append(
                "v.state != 'deleted' AND d.id IN (SELECT document_id FROM versions WHERE container_id = ? AND state = 'conflict')"
            )
            values.append(.int(container))
        case .deleted:
            conditions.append("v.state = 'deleted'")
        }
        if let kinds = query.kinds, !kinds.isEmpty {
            conditions.append("v.kind IN (\(sqlPlaceholders(kinds.count)))")
            values += kinds.map(\.rawValue).sorted().map(SQLValue.text)
        }
        let (narrowing, narrowingValues) = Self.narrowing(query, bytewise: bytewise)
        conditions += narrowing
        values += narrowingValues
        switch query.sort {
        case .path: key = nil
        case .name: key = "d.name_folded\(bytewise)"
        case .modified: key = "v.mtime_ns"
        case .size: key = "v.size"
        }
        keyIsText = query.sort == .name
        let direction: String
        (after, direction) = query.descending ? ("<", " DESC") : (">", "")
        order = (key.map { "\($0)\(direction), " } ?? "") + "d.path\(bytewise)\(direction)"
    }

    /// The path prefix, time, size and name conditions, and their values.
    private static func narrowing(_ query: DocumentQuery, bytewise: String) -> ([String], [SQLValue]) {
        var conditions: [String] = []
        var values: [SQLValue] = []
        let prefix = query.pathPrefix
        if !prefix.isEmpty {
            // Every path with the prefix lies in [prefix, its successor): a range of the path index.
            conditions.append("d.path\(bytewise) >= ?")
            values.append(.text(prefix))
            if let end = MetadataTransaction.successor(of: prefix) {
                conditions.append("d.path\(bytewise) < ?")
                values.append(.text(end))
            }
            conditions.append("substr(d.path, 1, length(?)) = ?")
            values += [.text(prefix), .text(prefix)]
        }
        let bounds: [(String, Int64?)] = [
            ("v.mtime_ns >= ?", query.modifiedAfter), ("v.mtime_ns < ?", query.modifiedBefore),
            ("v.size >= ?", query.minimumSize), ("v.size <= ?", query.maximumSize)
        ]
        for case (let condition, let value?) in bounds {
            conditions.append(condition)
            values.append(.int(value))
        }
        if let like = query.likePattern {
            conditions.append("d.name_folded LIKE ? ESCAPE '\\'")
            values.append(.text(like))
        }
        return (conditions, values)
    }

    /// The statement for the next `batch` rows after `position` (from the start without one),
    /// each row the document's path, its folded name and `columns`, and its values.
    func page(after position: QueryPosition?, batch: Int, columns: String) -> (sql: String, values: [SQLValue]) {
        var where_ = conditions
        var bound = values
        if let position {
            if let key {
                let value: SQLValue = keyIsText ? .text(position.key) : .int(Int64(position.key) ?? 0)
                where_.append("\(key) \(after)= ? AND (\(key) \(after) ? OR d.path\(bytewise) \(after) ?)")
                bound += [value, value, .text(position.path)]
            } else {
                where_.append("d.path\(bytewise) \(after) ?")
                bound.append(.text(position.path))
            }
        }
        let sql = """
            SELECT d.path, d.name_folded, \(columns) FROM \(source)
            WHERE \(where_.joined(separator: " AND "))
            ORDER BY \(order) LIMIT ?
            """
        return (sql, bound + [.int(Int64(batch))])
    }
}
