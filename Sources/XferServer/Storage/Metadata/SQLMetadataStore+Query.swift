import Foundation
import XferCore
import XferProtocol

// Search: a container's documents by name pattern, kind, scope, time, size and
// state, sorted and paged. SQL narrows (a LIKE over each document's folded name, which every
// match satisfies, and the plain comparisons); ``DocumentQuery/matches(_:)`` decides, so the
// server, a live query and an end-to-end container's device all apply one rule.
extension SQLMetadataStore {
    public func query(account: Int64, container: ContainerName, _ query: DocumentQuery, after page: String?, limit: Int)
        async throws -> DocumentList
    {
        try query.validate()
        let position = try page.map { try QueryPosition(token: $0, for: query) }
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return DocumentList(documents: [], cursor: 0)
            }
            let cursor = try tx.sql.int("SELECT sequence FROM containers WHERE id = ?", containerID) ?? 0
            return try tx.query(container: containerID, query, after: position, limit: limit, cursor: cursor)
        }
    }
}

extension DocumentQuery {
    /// A LIKE pattern (escape `\`) that every folded name the glob matches also matches, made
    /// from the pattern's tokens (``DocumentQuery/NamePattern``): `*` becomes `%`, `?` and a
    /// class `_` (one scalar each), literals stay, with `%`, `_` and `\` escaped. `nil` for a
    /// glob that matches every name.
    var likePattern: String? {
        guard let glob = foldedPattern else { return nil }
        // A pattern that never matches still goes through SQL (the check refuses every row).
        guard let tokens = NamePattern(folded: glob).tokens else { return "%" }
        var like = ""
        var afterStar = false
        for token in tokens {
            switch token {
            case .star:
                if !afterStar { like.append("%") }
            case .any, .set:
                like.append("_")
            case .literal(let scalar):
                if scalar == "%" || scalar == "_" || scalar == "\\" { like.append("\\") }
                like.unicodeScalars.append(scalar)
            }
            if case .star = token { afterStar = true } else { afterStar = false }
        }
        return like == "%" ? nil : like
    }
}

extension MetadataTransaction {

    /// One page of `query` in `container` (the SQL that narrows it is ``QuerySQL``'s), each
    /// candidate row checked by ``DocumentQuery/matcher()``.
    func query(container: Int64, _ query: DocumentQuery, after position: QueryPosition?, limit: Int, cursor: Int64)
        throws -> DocumentList
    {
        let plan = QuerySQL(container: container, query, dialect: dialect)
        // Rows read for one page at most: a page whose candidates the exact check mostly
        // refuses ends early, `more` set, and the client asks on from where it stopped.
        let rowsPerPage = DocumentQuery.queryRowsPerPage(patternLength: query.foldedPattern?.count ?? 0)
        var found: [DocumentInfo] = []
        var position = position
        var last: QueryPosition? = nil
        var examined = 0
        let batch = min(limit + 1, rowsPerPage)
        let matches = query.matcher()
        while true {
            let (statement, values) = plan.page(after: position, batch: batch, columns: infoColumns)
            let rows = try sql.rows(statement, values)
            for row in rows {
                let document = try Self.info(row: row)
                examined += 1
                // The position in the order SQL walked: a name's key as stored.
                position = QueryPosition(after: document, in: query, storedName: try row.optionalText("name_folded"))
                guard matches(document) else { continue }
                if found.count == limit {
                    // One more than asked: the page ends at the one before, whose position is kept.
                    return DocumentList(documents: found, cursor: cursor, more: true, next: last!.token)
                }
                found.append(document)
                last = position
            }
            if rows.count < batch { return DocumentList(documents: found, cursor: cursor) }
            if examined >= rowsPerPage, let position {
                // Enough read for one answer: the client asks on from the last row read.
                return DocumentList(documents: found, cursor: cursor, more: true, next: position.token)
            }
        }
    }

    /// The least string above every string that starts with `prefix` (in bytewise UTF-8
    /// order, which is scalar order): its last scalar that can grow, grown by one, and what
    /// follows it dropped; `nil` if none can (every scalar U+10FFFF).
    static func successor(of prefix: String) -> String? {
        var scalars = Array(prefix.unicodeScalars)
        while let last = scalars.popLast() {
            var value = last.value + 1
            if value == 0xD800 { value = 0xE000 }  // surrogates are no scalars
            if let next = Unicode.Scalar(value) {
                scalars.append(next)
                return String(String.UnicodeScalarView(scalars))
            }
        }
        return nil
    }

    /// Fills the folded name (``DocumentQuery/folded(_:)``) of every document that has none:
    /// the documents of a store made before queries, once, after its schema is migrated.
    func fillFoldedNames() throws {
        var after: Int64 = 0
        while true {
            let rows = try sql.rows(
                "SELECT id, path FROM documents WHERE id > ? AND name_folded IS NULL ORDER BY id LIMIT 1000", after)
            for row in rows {
                let id = try row.int("id")
                let path = try DocumentPath(try row.text("path"))
                try sql.rows(
                    "UPDATE documents SET name_folded = ? WHERE id = ?",
                    DocumentQuery.folded(DocumentQuery.name(of: path)), id)
                after = id
            }
            if rows.count < 1000 { return }
        }
    }
}
