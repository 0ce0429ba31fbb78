import Foundation
import XferCore

/// The little XML WebDAV needs, without an XML library: a PROPFIND body read into what it asks
/// for (checked well formed: tags balanced, namespaces declared), and a multistatus answer
/// written with every name and text escaped.
public enum DavXML {
    /// The WebDAV namespace.
    public static let dav = "DAV:"
    /// Bodies read at most (a PROPFIND names a few properties).
    public static let maximumBody = 64 << 10
    /// Elements one body may hold, and namespace declarations: what one request may make the
    /// server build stays small whatever its 64 KiB hold.
    public static let maximumElements = 1024
    public static let maximumNamespaces = 32

    /// A qualified element name.
    public struct Name: Hashable, Sendable {
        /// The namespace URI (`""` for none).
        public var namespace: String
        /// The local part.
        public var local: String

        /// A name of `local` in `namespace`.
        public init(namespace: String, local: String) {
            self.namespace = namespace
            self.local = local
        }
    }

    /// What a PROPFIND asks for.
    public enum PropfindRequest: Equatable, Sendable {
        case allProperties
        case propertyNames
        case properties([Name])
    }

    /// An element as the scanner met it: its name, its parent's index, the namespaces in scope
    /// on it (by prefix; `""` the default), and where its content lies in the text.
    public struct Element {
        public var name: Name
        /// The index of the parent element in what ``elements(_:)`` returns.
        public var parentIndex: Int?
        public var parent: Name?
        public var namespaces: [String: String]
        /// Where the element's content lies in the text it was read from (empty if self-closing).
        public var content: Range<String.Index>
    }

    /// The elements of a well-formed document, in order.
    /// - Parameter text: The document (a request body).
    /// - Returns: Every element, in document order (empty for a blank text).
    /// - Throws: `bad_request` for text that is not well-formed XML as far as WebDAV bodies go.
    public static func elements(_ text: String) throws -> [Element] {
        try checkMarkupStandsAlone(text)
        try checkReferences(text)
        var found: [Element] = []
        var declared = 0
        var stack: [(raw: String, name: Name, namespaces: [String: String], index: Int)] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "<") {
            rest = rest[rest.index(after: open)...]
            if rest.hasPrefix("?") {
                guard let end = rest.range(of: "?>") else { throw malformed("an unterminated declaration") }
                rest = rest[end.upperBound...]
                continue
            }
            if rest.hasPrefix("!--") {
                guard let end = rest.range(of: "-->") else { throw malformed("an unterminated comment") }
                rest = rest[end.upperBound...]
                continue
            }
            if rest.hasPrefix("!") { throw malformed("a DOCTYPE or CDATA section") }
            guard let close = rest.firstIndex(of: ">") else { throw malformed("an unterminated tag") }
            var tag = rest[..<close]
            rest = rest[rest.index(after: close)...]
            if tag.hasPrefix("/") {
                let raw = tag.dropFirst().trimmingCharacters(in: .whitespacesAndNewlines)
                guard let top = stack.popLast(), top.raw == raw else {
                    throw malformed("</\(raw)> closes no open element")
                }
                found[top.index].content = found[top.index].content.lowerBound..<open
                continue
            }
            let selfClosing = tag.hasSuffix("/")
            if selfClosing { tag = tag.dropLast() }
            let parts = tag.split(maxSplits: 1, whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" })
            guard let rawName = parts.first.map(String.init), !rawName.isEmpty else { throw malformed("an empty tag") }
            var namespaces = stack.last?.namespaces ?? [:]
            if parts.count > 1 { try declare(String(parts[1]), in: &namespaces, declared: &declared) }
            let name = try qualifiedName(rawName, namespaces)
            guard found.count < maximumElements else { throw malformed("more than \(maximumElements) elements") }
            found.append(
                Element(
                    name: name, parentIndex: stack.last?.index, parent: stack.last?.name, namespaces: namespaces,
                    content: rest.startIndex..<rest.startIndex))
            if !selfClosing { stack.append((rawName, name, namespaces, found.count - 1)) }
        }
        guard stack.isEmpty else { throw malformed("<\(stack.last!.raw)> is never closed") }
        guard !found.isEmpty || text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
            throw malformed("no element")
        }
        return found
    }

    static func malformed(_ why: String) -> XferError {
        XferError(.badRequest, "the request body is not well-formed XML: \(why)")
    }

    /// Adds the namespaces a tag's `attributes` declare (`xmlns`, `xmlns:PREFIX`) to
    /// `namespaces`, counting them in `declared` (at most ``maximumNamespaces`` a document).
    static func declare(_ attributeText: String, in namespaces: inout [String: String], declared: inout Int) throws {
        for (key, value) in try attributes(attributeText) {
            if key == "xmlns" || key.hasPrefix("xmlns:") {
                declared += 1
                guard declared <= maximumNamespaces else {
                    throw malformed("more than \(maximumNamespaces) namespace declarations")
                }
            }
            if key == "xmlns" {
                namespaces[""] = value
            } else if key.hasPrefix("xmlns:") {
                // Namespaces in XML 1.0 §3: a prefix cannot be bound to the empty name.
                guard !value.isEmpty else {
                    throw malformed("the prefix \(key.dropFirst(6)) is bound to no namespace")
                }
                namespaces[String(key.dropFirst(6))] = value
            }
        }
    }

    /// The name a tag's `rawName` (`local` or `prefix:local`) stands for under `namespaces`.
    static func qualifiedName(_ rawName: String, _ namespaces: [String: String]) throws -> Name {
        let prefix: String
        let local: String
        if let colon = rawName.firstIndex(of: ":") {
            prefix = String(rawName[..<colon])
            local = String(rawName[rawName.index(after: colon)...])
        } else {
            prefix = ""
            local = rawName
        }
        guard !local.isEmpty, isName(local), prefix.isEmpty || isName(prefix) else {
            throw malformed("a tag whose name is not an XML name")
        }
        guard let namespace = namespaces[prefix] ?? (prefix.isEmpty ? "" : nil) else {
            throw malformed("the prefix \(prefix) is not declared")
        }
        return Name(namespace: namespace, local: local)
    }

    /// Whether `text` can be an XML name (or prefix) as far as writing it back goes: no markup,
    /// quote, space or colon in it.
    public static func isName(_ text: String) -> Bool {
        !text.utf8.contains { byte in
            byte <= 0x20
                || [
                    UInt8(ascii: "<"), UInt8(ascii: ">"), UInt8(ascii: "&"), UInt8(ascii: "\""), UInt8(ascii: "'"),
                    UInt8(ascii: "="), UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: "!"), UInt8(ascii: "?")
                ].contains(byte)
        }
    }

    /// Every `&` begins a reference XML knows without a DOCTYPE: the five entities or a
    /// character reference (so a value kept whole and sent back stays well formed).
    static func checkReferences(_ text: String) throws {
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            rest = rest[rest.index(after: amp)...]
            guard let semicolon = rest.prefix(12).firstIndex(of: ";") else {
                throw XferError(.badRequest, "the request body is not well-formed XML: a bare &")
            }
            let reference = rest[..<semicolon]
            let known =
                ["amp", "lt", "gt", "quot", "apos"].contains(reference)
                || (reference.hasPrefix("#x") && reference.count > 2 && reference.dropFirst(2).allSatisfy(\.isHexDigit))
                || (reference.hasPrefix("#") && reference.count > 1 && reference.dropFirst().allSatisfy(\.isASCII)
                    && reference.dropFirst().allSatisfy(\.isNumber))
            guard known else {
                throw XferError(
                    .badRequest, "the request body is not well-formed XML: an unknown reference &\(reference);")
            }
        }
    }

    /// `key="value"` pairs of a tag.
    static func attributes(_ text: String) throws -> [(String, String)] {
        var pairs: [(String, String)] = []
        var rest = Substring(text)
        while true {
            rest = rest.drop(while: { $0.isWhitespace })
            guard !rest.isEmpty else { return pairs }
            guard let equals = rest.firstIndex(of: "=") else {
                throw XferError(.badRequest, "the request body is not well-formed XML: an attribute without a value")
            }
            let key = rest[..<equals].trimmingCharacters(in: .whitespaces)
            rest = rest[rest.index(after: equals)...].drop(while: { $0.isWhitespace })
            guard let quote = rest.first, quote == "\"" || quote == "'" else {
                throw XferError(.badRequest, "the request body is not well-formed XML: an unquoted attribute")
            }
            rest = rest.dropFirst()
            guard let end = rest.firstIndex(of: quote) else {
                throw XferError(.badRequest, "the request body is not well-formed XML: an unterminated attribute")
            }
            pairs.append((key, unescape(String(rest[..<end]))))
            rest = rest[rest.index(after: end)...]
        }
    }

    /// What a PROPFIND body asks for; an empty body asks for every property (RFC 4918 §9.1).
    /// - Throws: `bad_request` for a body that is not a DAV: propfind of allprop, propname or prop.
    public static func propfind(_ body: String) throws -> PropfindRequest {
        let elements = try elements(body)
        guard let root = elements.first else { return .allProperties }
        guard root.name == Name(namespace: dav, local: "propfind") else {
            throw XferError(.badRequest, "a PROPFIND body is a DAV: propfind element")
        }
        let children = elements.filter { $0.parent == root.name }
        if children.contains(where: { $0.name == Name(namespace: dav, local: "propname") }) { return .propertyNames }
        if children.contains(where: { $0.name == Name(namespace: dav, local: "prop") }) {
            var seen = Set<Name>()
            let names = elements.filter { $0.parent == Name(namespace: dav, local: "prop") }.map(\.name).filter {
                seen.insert($0).inserted
            }
            guard names.count <= 256 else { throw XferError(.badRequest, "a PROPFIND asks for at most 256 properties") }
            return .properties(names)
        }
        if children.contains(where: { $0.name == Name(namespace: dav, local: "allprop") }) { return .allProperties }
        throw XferError(.badRequest, "a PROPFIND body holds allprop, propname or prop")
    }

    /// One change a PROPPATCH asks for: a property set to an element (kept whole) or removed.
    public enum PatchChange: Equatable, Sendable {
        case set(Name, xml: String)
        case remove(Name)

        /// The property changed.
        public var name: Name {
            switch self {
            case .set(let name, _), .remove(let name): return name
            }
        }
    }

    /// The changes of a PROPPATCH body, in document order (RFC 4918 §9.2).
    /// - Parameters:
    ///   - body: The request body.
    ///   - maximumChanges: Changes one body may make (the store's properties a path keeps).
    /// - Throws: `bad_request` for a body that is not a DAV: propertyupdate of set and remove,
    ///   or that makes more than `maximumChanges` changes.
    public static func proppatch(_ body: String, maximumChanges: Int = .max) throws -> [PatchChange] {
        let elements = try elements(body)
        guard let root = elements.first, root.name == Name(namespace: dav, local: "propertyupdate") else {
            throw XferError(.badRequest, "a PROPPATCH body is a DAV: propertyupdate element")
        }
        var changes: [PatchChange] = []
        for element in elements {
            // A property: a child of DAV:prop, itself a child of DAV:set or DAV:remove.
            guard element.parent == Name(namespace: dav, local: "prop"), let propIndex = element.parentIndex,
                let action = elements[propIndex].parent, action.namespace == dav,
                action.local == "set" || action.local == "remove",
                elements[propIndex].parentIndex.map({ elements[$0].parentIndex == 0 }) == true
            else { continue }
            if action.local == "remove" {
                changes.append(.remove(element.name))
            } else {
                changes.append(.set(element.name, xml: standalone(element, in: body)))
            }
        }
        guard !changes.isEmpty else {
            throw XferError(.badRequest, "a PROPPATCH body sets or removes at least one property")
        }
        guard changes.count <= maximumChanges else {
            throw XferError(.badRequest, "a PROPPATCH changes at most \(maximumChanges) properties")
        }
        return changes
    }

    /// What a LOCK body asks for (RFC 4918 §14.11): the scope, and the client's owner element.
    public struct LockRequest: Equatable, Sendable {
        public var exclusive: Bool
        /// The `DAV:owner` element, standing alone (``standalone(_:in:)``).
        public var owner: String?
    }

    /// The lock a LOCK body asks for.
    /// - Throws: `bad_request` for a body that is not a DAV: lockinfo of a write lock, exclusive or shared.
    public static func lockinfo(_ body: String) throws -> LockRequest {
        let elements = try elements(body)
        guard let root = elements.first, root.name == Name(namespace: dav, local: "lockinfo") else {
            throw XferError(.badRequest, "a LOCK body is a DAV: lockinfo element")
        }
        func child(_ local: String, of parent: Int) -> Int? {
            elements.indices.first {
                elements[$0].parentIndex == parent && elements[$0].name == Name(namespace: dav, local: local)
            }
        }
        guard let scope = child("lockscope", of: 0), let type = child("locktype", of: 0),
            child("write", of: type) != nil
        else {
            throw XferError(.badRequest, "a LOCK body names a lockscope and a locktype of write")
        }
        let exclusive = child("exclusive", of: scope) != nil
        guard exclusive || child("shared", of: scope) != nil else {
            throw XferError(.badRequest, "a lock's scope is exclusive or shared")
        }
        return LockRequest(
            exclusive: exclusive, owner: child("owner", of: 0).map { standalone(elements[$0], in: body) })
    }

    /// A property's element as text that stands alone: its name in a prefix of its own, every
    /// namespace in scope on it declared on it (its value may use them), its content as sent.
    public static func standalone(_ element: Element, in body: String) -> String {
        let content = String(body[element.content])
        var declarations = ""
        var prefix = "p"
        while element.namespaces[prefix] != nil { prefix += "p" }
        for (key, uri) in element.namespaces.sorted(by: { $0.key < $1.key }) where !key.isEmpty {
            declarations += " xmlns:\(key)=\"\(escape(uri))\""
        }
        if element.name.namespace.isEmpty {
            return "<\(element.name.local) xmlns=\"\"\(declarations)>\(content)</\(element.name.local)>"
        }
        if let uri = element.namespaces[""] { declarations += " xmlns=\"\(escape(uri))\"" }
        return
            "<\(prefix):\(element.name.local) xmlns:\(prefix)=\"\(escape(element.name.namespace))\"\(declarations)>\(content)</\(prefix):\(element.name.local)>"
    }

    /// `text` with XML's five markup characters escaped, scalar by scalar (``MarkupText``).
    public static func escape(_ text: String) -> String { MarkupText.escaped(text) }

    /// The scalars the scanner looks for, each compared as a `Character`.
    static let markupScalars: Set<Unicode.Scalar> = [
        "<", ">", "&", "\"", "'", "=", "/", "?", "!", "-", ":", ";", " ", "\t", "\n", "\r"
    ]

    /// Refuses text in which a markup scalar shares a `Character` with another scalar (a
    /// combining mark after `<`, a prepending mark before it): the scanner, which reads by
    /// `Character`, would miss a tag that an XML parser sees.
    static func checkMarkupStandsAlone(_ text: String) throws {
        for character in text where character.unicodeScalars.count > 1 && character != "\r\n" {
            if character.unicodeScalars.contains(where: markupScalars.contains) {
                throw XferError(
                    .badRequest,
                    "the request body is not well-formed XML as WebDAV reads it: a markup character combined with a mark"
                )
            }
        }
    }

    /// `text` with the five entities ``escape(_:)`` writes read back (character references
    /// are left as they are).
    /// The five entities XML knows without a DOCTYPE, and what each stands for.
    static let entities: [(name: String, scalar: Unicode.Scalar)] = [
        ("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&apos;", "'"), ("&amp;", "&")
    ]

    /// `text` with the five entities read back, scalar by scalar, in one pass (`&amp;lt;` is `&lt;`).
    public static func unescape(_ text: String) -> String {
        guard text.utf8.contains(UInt8(ascii: "&")) else { return text }
        var out = String.UnicodeScalarView()
        var rest = text.unicodeScalars[...]
        while let first = rest.first {
            if first == "&", let entity = entities.first(where: { rest.starts(with: $0.name.unicodeScalars) }) {
                out.append(entity.scalar)
                rest = rest.dropFirst(entity.name.unicodeScalars.count)
            } else {
                out.append(first)
                rest = rest.dropFirst()
            }
        }
        return String(out)
    }

    /// An empty element of `name` (its namespace declared on it unless it is DAV:).
    public static func empty(_ name: Name) -> String {
        if name.namespace == dav { return "<D:\(name.local)/>" }
        if name.namespace.isEmpty { return "<\(name.local) xmlns=\"\"/>" }
        return "<X:\(name.local) xmlns:X=\"\(escape(name.namespace))\"/>"
    }

    /// One `response` of a multistatus: the found properties (already XML) under 200, the
    /// missing ones under 404.
    public static func response(href: String, found: [String], missing: [Name]) -> String {
        var out = "<D:response><D:href>\(escape(href))</D:href>"
        if !found.isEmpty {
            out +=
                "<D:propstat><D:prop>" + found.joined() + "</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>"
        }
        if !missing.isEmpty {
            out +=
                "<D:propstat><D:prop>" + missing.map(empty).joined()
                + "</D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat>"
        }
        return out + "</D:response>"
    }

    /// What a multistatus body begins with.
    public static let head = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:multistatus xmlns:D=\"DAV:\">"
    /// What a multistatus body ends with.
    public static let tail = "</D:multistatus>\n"

    /// An HTTP date (RFC 9110 §5.6.7) of `nanoseconds` since 1970.
    public static func httpDate(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "Thu, 01 Jan 1970 00:00:00 GMT" }
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return
            "\(days[Int(parts.tm_wday) % 7]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon) % 12]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
