import Foundation
import XferCore

/// A search of a container's documents: which documents (a name pattern, kinds, a scope or
/// path prefix, a modification-time and size range, a state) and in what order.
///
/// One definition serves every place a query is decided: the server's query route
/// (`GET /v1/containers/{c}/query`, docs/PROTOCOL.md), which narrows with SQL and decides with
/// ``matches(_:)``; a live query on a device, which decides with ``matches(_:)`` whether a change
/// enters, leaves or updates its result; and an end-to-end encrypted container, whose names only
/// a device can read, so it is filtered and sorted there.
public struct DocumentQuery: Sendable, Hashable {
    /// Which documents, by their newest state.
    public enum State: String, Sendable, Hashable, CaseIterable {
        /// Live documents (current, or uploading and never committed): what `xfer ls` shows.
        case current
        /// Live documents with at least one unresolved conflict version.
        case conflict
        /// Documents whose newest version is a deletion ("Recently Deleted").
        case deleted
    }

    /// The order of a result. Ties are broken by path, so every order is total and a page
    /// token is one position in it.
    public enum Sort: String, Sendable, Hashable, CaseIterable {
        /// By path, byte by byte (as a listing).
        case path
        /// By name (the last path component), case-insensitive.
        case name
        /// By modification time.
        case modified
        /// By content size.
        case size
    }

    /// A glob (`*`, `?`, `[…]`, `\` escapes) matched case-insensitively against each document's
    /// name, its last path component; `nil` matches every name. A pattern holds no `/`: a
    /// part of the tree is chosen with ``prefix`` or ``scope``.
    public var name: String?
    /// Only these kinds; `nil` or empty for every kind.
    public var kinds: Set<DocumentKind>?
    /// Only this scope.
    public var scope: Scope?
    /// Only paths starting with this (bytewise, after the scope's prefix when both are given).
    public var prefix: String
    /// Only documents modified at or after this time (nanoseconds since 1970).
    public var modifiedAfter: Int64?
    /// Only documents modified before this time (nanoseconds since 1970).
    public var modifiedBefore: Int64?
    /// Only documents of at least this many bytes.
    public var minimumSize: Int64?
    /// Only documents of at most this many bytes.
    public var maximumSize: Int64?
    /// Which documents by state.
    public var state: State
    /// The order of the result.
    public var sort: Sort
    /// Largest first, newest first, Z to A.
    public var descending: Bool

    /// The longest pattern a query may carry, in bytes: a name's longest
    /// (``DocumentPathRules/maximumComponentBytes``).
    public static let maximumPatternBytes = DocumentPathRules.maximumComponentBytes

    /// A query; every argument left out matches everything.
    public init(
        name: String? = nil, kinds: Set<DocumentKind>? = nil, scope: Scope? = nil, prefix: String = "",
        modifiedAfter: Int64? = nil, modifiedBefore: Int64? = nil, minimumSize: Int64? = nil, maximumSize: Int64? = nil,
        state: State = .current, sort: Sort = .path, descending: Bool = false
    ) {
        self.name = name
        self.kinds = kinds
        self.scope = scope
        self.prefix = prefix
        self.modifiedAfter = modifiedAfter
        self.modifiedBefore = modifiedBefore
        self.minimumSize = minimumSize
        self.maximumSize = maximumSize
        self.state = state
        self.sort = sort
        self.descending = descending
    }

    /// The full path prefix: the scope's and ``prefix`` together.
    public var pathPrefix: String { (scope?.prefix ?? "") + prefix }

    /// The pattern folded as names are (``DocumentQuery/folded(_:)``), split into scalars.
    public var foldedPattern: [Unicode.Scalar]? { name.map { Array(Self.folded($0).unicodeScalars) } }

    /// A name as queries compare it: lowercased (Unicode, locale-independent) and in
    /// canonical composition, so `Report.PDF` and `report.pdf` are one name to a query. The
    /// server stores each document's folded name, and a pattern is folded the same way.
    public static func folded(_ name: some StringProtocol) -> String {
        let lowered = String(name).lowercased()
        // ASCII is in NFC already: only other text goes through Foundation's (slow) mapping.
        return lowered.utf8.allSatisfy { $0 < 0x80 } ? lowered : lowered.precomposedStringWithCanonicalMapping
    }

    /// The last component of a path.
    public static func name(of path: DocumentPath) -> Substring {
        let scalars = path.value.unicodeScalars
        // By scalar: a component that starts with a combining mark joins the `/` in one Character.
        return scalars.lastIndex(of: "/").map { Substring(scalars[scalars.index(after: $0)...]) }
            ?? Substring(path.value)
    }

    /// Throws `bad_request` for a query no server answers: a pattern too long, holding `/`
    /// or NUL, or ending in a lone `\`; a range whose bounds are crossed; a negative bound.
    public func validate() throws {
        if let name {
            guard name.utf8.count <= Self.maximumPatternBytes else {
                throw XferError(.badRequest, "the name pattern is longer than \(Self.maximumPatternBytes) bytes")
            }
            guard !name.utf8.contains(UInt8(ascii: "/")), !name.utf8.contains(0) else {
                throw XferError(
                    .badRequest, "a name pattern matches one name and holds no '/'; choose a folder with the prefix")
            }
            var escapes = 0
            for scalar in name.unicodeScalars.reversed() { if scalar == "\\" { escapes += 1 } else { break } }
            guard escapes % 2 == 0 else { throw XferError(.badRequest, "the name pattern ends in a lone '\\'") }
        }
        guard prefix.utf8.count <= DocumentPathRules.maximumPathBytes, !prefix.utf8.contains(0) else {
            throw XferError(.badRequest, "the prefix is too long or contains NUL")
        }
        for (label, bound) in [
            ("modified_after", modifiedAfter), ("modified_before", modifiedBefore),
            ("min_size", minimumSize), ("max_size", maximumSize)
        ] {
            if let bound, bound < 0 { throw XferError(.badRequest, "\(label) must not be negative") }
        }
        if let low = modifiedAfter, let high = modifiedBefore, low >= high {
            throw XferError(.badRequest, "modified_after must be before modified_before")
        }
        if let low = minimumSize, let high = maximumSize, low > high {
            throw XferError(.badRequest, "min_size must not exceed max_size")
        }
    }

    /// Whether `document` (its newest state, as a listing or the change feed gives it) is in
    /// the result.
    public func matches(_ document: DocumentInfo) -> Bool {
        matches(document, pattern: foldedPattern.map(NamePattern.init(folded:)))
    }

    func matches(_ document: DocumentInfo, pattern: NamePattern?) -> Bool {
        switch state {
        case .current: guard document.state != .deleted else { return false }
        case .conflict: guard document.state != .deleted, document.conflicts?.isEmpty == false else { return false }
        case .deleted: guard document.state == .deleted else { return false }
        }
        if let kinds, !kinds.isEmpty, !kinds.contains(document.kind) { return false }
        let prefix = pathPrefix
        if !prefix.isEmpty, !document.path.value.utf8.starts(with: prefix.utf8) { return false }
        if let low = modifiedAfter, document.mtimeNs < low { return false }
        if let high = modifiedBefore, document.mtimeNs >= high { return false }
        if let low = minimumSize, document.size < low { return false }
        if let high = maximumSize, document.size > high { return false }
        if let pattern {
            return pattern.matches(Array(Self.folded(Self.name(of: document.path)).unicodeScalars))
        }
        return true
    }

    /// A name pattern read once (``init(folded:)``) and matched against many names.
    public struct NamePattern: Sendable {
        public enum Token: Sendable {
            case literal(Unicode.Scalar)
            case any
            case star
            case set(GlobClass)
        }
        /// The pattern's tokens; `nil` for one that never matches (an unterminated class, an
        /// unknown `[:name:]`).
        public let tokens: [Token]?

        /// Reads a folded pattern as git's wildmatch does within one name: `*` (runs of them
        /// are one), `?`, `[…]` (``GlobClass``), `\\` escapes.
        public init(folded pattern: [Unicode.Scalar]) {
            var tokens: [Token] = []
            var index = 0
            while index < pattern.count {
                switch pattern[index] {
                case "*":
                    if case .star? = tokens.last {} else { tokens.append(.star) }
                    index += 1
                case "?":
                    tokens.append(.any)
                    index += 1
                case "[":
                    guard let (set, next) = GlobClass.parse(pattern, from: index) else {
                        self.tokens = nil
                        return
                    }
                    tokens.append(.set(set))
                    index = next
                case "\\":
                    guard index + 1 < pattern.count else {
                        self.tokens = nil
                        return
                    }
                    tokens.append(.literal(pattern[index + 1]))
                    index += 2
                default:
                    tokens.append(.literal(pattern[index]))
                    index += 1
                }
            }
            self.tokens = tokens
        }

        /// Whether a folded name matches, going back only to the last `*` seen (enough when
        /// every other token takes exactly one scalar): at most tokens × name steps, each
        /// class test at most its length, and no memory.
        public func matches(_ name: [Unicode.Scalar]) -> Bool {
            guard let tokens else { return false }
            var p = 0
            var t = 0
            var star: (token: Int, text: Int)? = nil
            while t < name.count {
                if p < tokens.count {
                    switch tokens[p] {
                    case .star:
                        star = (p, t)
                        p += 1
                        continue
                    case .any:
                        p += 1
                        t += 1
                        continue
                    case .set(let set):
                        if set.contains(name[t]) {
                            p += 1
                            t += 1
                            continue
                        }
                    case .literal(let scalar):
                        if scalar == name[t] {
                            p += 1
                            t += 1
                            continue
                        }
                    }
                }
                // A mismatch: the last `*` takes one more scalar, or nothing matches.
                guard let last = star else { return false }
                star = (last.token, last.text + 1)
                p = last.token + 1
                t = last.text + 1
            }
            while p < tokens.count, case .star = tokens[p] { p += 1 }
            return p == tokens.count
        }
    }

    /// Whether a folded name matches a folded pattern (``NamePattern``, read for this call).
    public static func matches(pattern: [Unicode.Scalar], folded name: [Unicode.Scalar]) -> Bool {
        NamePattern(folded: pattern).matches(name)
    }

    /// ``matches(_:)`` with the pattern read once: for deciding many documents.
    public func matcher() -> @Sendable (DocumentInfo) -> Bool {
        let pattern = foldedPattern.map(NamePattern.init(folded:))
        let query = self
        return { document in query.matches(document, pattern: pattern) }
    }

    /// How many candidate rows a server checks for one page of a query with a pattern of
    /// `patternLength` scalars: each check is at most pattern × name (≤ 255) steps, and a page
    /// does at most about 100 million of them, so a page's cost is bounded whatever the
    /// names and the pattern.
    public static func queryRowsPerPage(patternLength: Int) -> Int {
        min(20_000, max(1_000, 100_000_000 / ((patternLength + 1) * 256)))
    }

    /// Whether `a` comes before `b` in this query's order (path breaks ties; descending
    /// reverses both).
    public func precedes(_ a: DocumentInfo, _ b: DocumentInfo) -> Bool {
        let ascending: Bool
        switch sort {
        case .path:
            ascending = PathOrder.precedes(a.path.value, b.path.value)
        case .name:
            let (x, y) = (Self.folded(Self.name(of: a.path)), Self.folded(Self.name(of: b.path)))
            ascending = x == y ? PathOrder.precedes(a.path.value, b.path.value) : PathOrder.precedes(x, y)
        case .modified:
            ascending = a.mtimeNs == b.mtimeNs ? PathOrder.precedes(a.path.value, b.path.value) : a.mtimeNs < b.mtimeNs
        case .size:
            ascending = a.size == b.size ? PathOrder.precedes(a.path.value, b.path.value) : a.size < b.size
        }
        return a.path == b.path ? false : (descending ? !ascending : ascending)
    }

    /// The query as URL query items, in a fixed order (the route's parameters).
    public var parameters: [(String, String)] {
        var items: [(String, String)] = []
        if let name { items.append(("name", name)) }
        if let kinds, !kinds.isEmpty { items.append(("kind", kinds.map(\.rawValue).sorted().joined(separator: ","))) }
        if let scope { items.append(("scope", scope.rawValue)) }
        if !prefix.isEmpty { items.append(("prefix", prefix)) }
        if let modifiedAfter { items.append(("modified_after", String(modifiedAfter))) }
        if let modifiedBefore { items.append(("modified_before", String(modifiedBefore))) }
        if let minimumSize { items.append(("min_size", String(minimumSize))) }
        if let maximumSize { items.append(("max_size", String(maximumSize))) }
        if state != .current { items.append(("state", state.rawValue)) }
        if sort != .path { items.append(("sort", sort.rawValue)) }
        if descending { items.append(("order", "desc")) }
        return items
    }

    /// Reads a query from URL query items (`value(name)` gives a parameter's value, if sent).
    /// - Throws: `bad_request` naming the parameter that is wrong, or for a query ``validate()`` refuses.
    public init(parameter value: (String) -> String?) throws {
        func integer(_ key: String) throws -> Int64? {
            guard let raw = value(key) else { return nil }
            guard let number = Int64(raw), number >= 0 else {
                throw XferError(.badRequest, "\(key) must be a non-negative integer")
            }
            return number
        }
        func one<T: RawRepresentable & CaseIterable>(_ key: String, _ type: T.Type) throws -> T?
        where T.RawValue == String {
            guard let raw = value(key) else { return nil }
            guard let parsed = T(rawValue: raw) else {
                throw XferError(
                    .badRequest, "\(key) must be one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return parsed
        }
        var kinds: Set<DocumentKind>? = nil
        if let raw = value("kind") {
            kinds = try Set(
                raw.split(separator: ",", omittingEmptySubsequences: false).map { part in
                    guard let kind = DocumentKind(rawValue: String(part)) else {
                        throw XferError(.badRequest, "kind must be file, package or directory (comma-separated)")
                    }
                    return kind
                })
        }
        let order = value("order")
        guard order == nil || order == "asc" || order == "desc" else {
            throw XferError(.badRequest, "order must be asc or desc")
        }
        self.init(
            name: value("name"), kinds: kinds, scope: try one("scope", Scope.self),
            prefix: (value("prefix") ?? "").precomposedStringWithCanonicalMapping,
            modifiedAfter: try integer("modified_after"), modifiedBefore: try integer("modified_before"),
            minimumSize: try integer("min_size"), maximumSize: try integer("max_size"),
            state: try one("state", State.self) ?? .current, sort: try one("sort", Sort.self) ?? .path,
            descending: order == "desc")
        try validate()
    }
}
