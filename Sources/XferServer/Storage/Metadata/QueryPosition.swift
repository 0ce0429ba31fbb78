import Foundation
import XferCore
import XferProtocol

/// Where a page of a query ends: the last document's sort key and path. A page token is this,
/// with the query's order, so a token is never read in another order.
struct QueryPosition: Equatable {
    var sort: DocumentQuery.Sort
    var descending: Bool
    /// The sort key: empty for a path order, the folded name, or a number as text.
    var key: String
    var path: String

    init(sort: DocumentQuery.Sort, descending: Bool, key: String, path: String) {
        self.sort = sort
        self.descending = descending
        self.key = key
        self.path = path
    }

    /// The position after `document` in `query`'s order; `storedName` is its folded name as
    /// the store keeps it (what SQL sorted by), else it is folded here.
    init(after document: DocumentInfo, in query: DocumentQuery, storedName: String? = nil) {
        let key: String
        switch query.sort {
        case .path: key = ""
        case .name: key = storedName ?? DocumentQuery.folded(DocumentQuery.name(of: document.path))
        case .modified: key = String(document.mtimeNs)
        case .size: key = String(document.size)
        }
        self.init(sort: query.sort, descending: query.descending, key: key, path: document.path.value)
    }

    /// The token a client sends back: base64url of the fields joined by NUL (which no path
    /// or name holds).
    var token: String {
        let text = [sort.rawValue, descending ? "desc" : "asc", key, path].joined(separator: "\u{0}")
        return Data(text.utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(
                of: "=", with: "")
    }

    /// Reads a token this server gave for `query`.
    /// - Throws: `bad_request` for anything else (another order's token included).
    init(token: String, for query: DocumentQuery) throws {
        let refused = XferError(.badRequest, "page is not a token this server gave for this query")
        guard token.utf8.count <= 4 * DocumentPathRules.maximumPathBytes else { throw refused }
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            throw refused
        }
        let fields = text.split(separator: "\u{0}", omittingEmptySubsequences: false).map(String.init)
        guard fields.count == 4, fields[0] == query.sort.rawValue, fields[1] == (query.descending ? "desc" : "asc"),
            fields[3].utf8.count <= DocumentPathRules.maximumPathBytes
        else { throw refused }
        switch query.sort {
        case .path: guard fields[2].isEmpty else { throw refused }
        case .name: guard fields[2].utf8.count <= DocumentPathRules.maximumComponentBytes * 4 else { throw refused }
        case .modified, .size: guard Int64(fields[2]) != nil else { throw refused }
        }
        self.init(sort: query.sort, descending: query.descending, key: fields[2], path: fields[3])
    }
}
