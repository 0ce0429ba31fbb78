import Testing
import XferCore
import XferProtocol

@Suite struct DocumentQueryTests {
    static func info(
        _ path: String, kind: DocumentKind = .file, size: Int64 = 1, mtime: Int64 = 1, state: VersionState = .current,
        conflicts: [Int64]? = nil
    ) throws -> DocumentInfo {
        DocumentInfo(
            path: try DocumentPath(path), version: 1, state: state, kind: kind, size: size, mtimeNs: mtime, mode: 0o644,
            baseVersion: nil, manifestDigest: nil, files: 1, chunks: 1, device: nil, sequence: 1, conflicts: conflicts)
    }

    @Test func theParametersReadBackAsTheSameQuery() throws {
        let queries = [
            DocumentQuery(),
            DocumentQuery(
                name: "*.PDF", kinds: [.file, .package], scope: .documents, prefix: "a b/&=?#", modifiedAfter: 5,
                modifiedBefore: 9, minimumSize: 0, maximumSize: 10, state: .conflict, sort: .size, descending: true),
            DocumentQuery(name: "[!a-c]?x\\*", state: .deleted, sort: .name)
        ]
        for query in queries {
            let items = Dictionary(uniqueKeysWithValues: query.parameters)
            #expect(try DocumentQuery(parameter: { items[$0] }) == query)
        }
    }

    @Test func whatNoServerAnswersIsRefusedNamingTheParameter() throws {
        let refused: [[String: String]] = [
            ["name": "a/b"], ["name": "a\u{0}"], ["name": "trailing\\"], ["name": String(repeating: "*", count: 256)],
            ["kind": "folder"], ["kind": "file,"], ["scope": "everything"], ["state": "gone"], ["sort": "random"],
            ["order": "up"], ["min_size": "-1"], ["min_size": "x"], ["modified_after": "9", "modified_before": "9"],
            ["min_size": "10", "max_size": "9"], ["prefix": "a\u{0}"]
        ]
        for items in refused {
            #expect(throws: XferError.self, "\(items)") { _ = try DocumentQuery(parameter: { items[$0] }) }
        }
        // An escaped backslash at the end is a literal one.
        _ = try DocumentQuery(parameter: { ["name": "a\\\\"][$0] })
    }

    @Test func namesMatchIgnoringCaseAndFormAndOnlyTheLastComponent() throws {
        let query = DocumentQuery(name: "ÉTÉ*.txt")
        #expect(query.matches(try Self.info("Documents/été 2026.TXT")))
        #expect(query.matches(try Self.info("Documents/e\u{301}te\u{301}.txt")))  // decomposed: the path is NFC
        #expect(!query.matches(try Self.info("Documents/été/notes.txt")))
        #expect(DocumentQuery(name: "*").matches(try Self.info("Documents/x")))
        #expect(!DocumentQuery(name: "x?").matches(try Self.info("Documents/x")))
        // folded: no upper case left
        #expect(DocumentQuery(name: "[[:upper:]]*").matches(try Self.info("Documents/Abc")) == false)
    }

    /// The one-name matcher (back to the last `*` only) gives git's wildmatch's answer for
    /// every pattern and name without `/`: 20,000 random pairs over a small alphabet, where
    /// stars, classes and escapes meet most often.
    @Test func theOneNameMatcherAgreesWithWildmatch() {
        var rng = SystemRandomNumberGenerator()
        let pieces: [String] = [
            "a", "b", "*", "**", "?", "[ab]", "[!a]", "[a-", "\\*", "\\a", "[[:alpha:]]", "[[:", ":]", "]", "[]a]"
        ]
        let letters: [Unicode.Scalar] = ["a", "b", "*", "c"]
        for _ in 0..<20_000 {
            let pattern = Array(
                (0..<Int.random(in: 0...6, using: &rng)).map { _ in pieces.randomElement(using: &rng)! }.joined()
                    .unicodeScalars)
            let name = (0..<Int.random(in: 0...8, using: &rng)).map { _ in letters.randomElement(using: &rng)! }
            var reference = Wildmatch(pattern: pattern, text: name)
            #expect(
                DocumentQuery.matches(pattern: pattern, folded: name) == reference.matches(),
                "\(String(String.UnicodeScalarView(pattern))) against \(String(String.UnicodeScalarView(name)))")
        }
    }

    /// Classes are read as git reads them: `[:` ends at the next `]`, and is a plain `[` when
    /// no `:` stands just before it; an unknown class name or an unterminated class never matches.
    @Test func classesAreReadAsGitReadsThem() {
        func match(_ pattern: String, _ name: String) -> Bool {
            DocumentQuery.matches(pattern: Array(pattern.unicodeScalars), folded: Array(name.unicodeScalars))
        }
        #expect(match("[[:x]:]", "x:]") && match("[[:x]:]", "[:]") && !match("[[:x]:]", "y:]"))
        #expect(match("[[:digit:]]x", "7x") && !match("[[:nosuch:]]x", "7x") && !match("[ab", "a"))
        #expect(match("[]a]", "]") && match("[!]]", "x") && !match("[!]]", "]"))
        // A pattern built to cost pattern² per class (a `[:` scan for each of 125) is read once.
        let costly = "*[" + String(repeating: "[:", count: 125) + "a]b"
        #expect(costly.utf8.count <= DocumentQuery.maximumPatternBytes)
        let pattern = DocumentQuery.NamePattern(folded: Array(costly.unicodeScalars))
        #expect(pattern.tokens?.count == 3)
        #expect(pattern.matches(Array((String(repeating: "a", count: 200) + "b").unicodeScalars)))
    }

    @Test func stateKindRangesAndPrefixDecideTogether() throws {
        let live = try Self.info("Documents/a", size: 100, mtime: 50)
        let conflicted = try Self.info("Documents/b", conflicts: [3])
        let deleted = try Self.info("Documents/c", state: .deleted)
        let uploading = try Self.info("Data/d", state: .uploading)
        #expect(
            DocumentQuery().matches(live) && DocumentQuery().matches(uploading) && !DocumentQuery().matches(deleted))
        #expect(DocumentQuery(state: .conflict).matches(conflicted) && !DocumentQuery(state: .conflict).matches(live))
        #expect(DocumentQuery(state: .deleted).matches(deleted) && !DocumentQuery(state: .deleted).matches(live))
        #expect(DocumentQuery(scope: .data).matches(uploading) && !DocumentQuery(scope: .data).matches(live))
        #expect(DocumentQuery(minimumSize: 100, maximumSize: 100).matches(live))
        #expect(!DocumentQuery(maximumSize: 99).matches(live))
        #expect(DocumentQuery(modifiedAfter: 50, modifiedBefore: 51).matches(live))
        #expect(!DocumentQuery(modifiedBefore: 50).matches(live))
        #expect(!DocumentQuery(kinds: [.package]).matches(live) && DocumentQuery(kinds: []).matches(live))
    }

    @Test func everyOrderIsTotalWithThePathBreakingTies() throws {
        let documents = [
            try Self.info("Documents/b", size: 5, mtime: 2), try Self.info("Documents/A", size: 5, mtime: 2),
            try Self.info("Documents/a", size: 1, mtime: 9), try Self.info("Data/z", size: 9, mtime: 1)
        ]
        func order(_ sort: DocumentQuery.Sort, _ descending: Bool = false) -> [String] {
            let query = DocumentQuery(sort: sort, descending: descending)
            return documents.sorted(by: query.precedes).map(\.path.value)
        }
        #expect(order(.path) == ["Data/z", "Documents/A", "Documents/a", "Documents/b"])
        #expect(order(.name) == ["Documents/A", "Documents/a", "Documents/b", "Data/z"])
        #expect(order(.size) == ["Documents/a", "Documents/A", "Documents/b", "Data/z"])
        #expect(order(.size, true) == ["Data/z", "Documents/b", "Documents/A", "Documents/a"])
        #expect(order(.modified) == ["Data/z", "Documents/A", "Documents/b", "Documents/a"])
    }
}
