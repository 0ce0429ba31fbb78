import Foundation
import XferCore

/// WebDAV's `If` header (RFC 4918 §10.4): lists of conditions, each list on the request's own
/// resource or on the one its tag names. The header holds when some list holds; a list holds
/// when every one of its conditions does; a condition names a lock's state token or an entity
/// tag, maybe negated (`Not`). Every state token it names is submitted with the request (§7.5):
/// what lets a write through a lock.
public struct DavIf: Equatable, Sendable {
    /// One condition of a list.
    public struct Condition: Equatable, Sendable {
        /// Whether the condition is negated (`Not`).
        public var not: Bool
        /// A state token (`urn:uuid:…`, or `DAV:no-lock`, which no lock has).
        public var token: String?
        /// An entity tag, as sent (quotes kept, `W/` dropped).
        public var etag: String?
    }

    /// One list of conditions, all of which must hold.
    public struct List: Equatable, Sendable {
        /// The tagged resource's URL (absolute or a path), or `nil` for the request's own.
        public var resource: String?
        public var conditions: [Condition]
    }

    /// The lists, in the header's order.
    public var lists: [List]

    /// Conditions one header may hold: evaluating it reads a resource per tag, no more.
    public static let maximumConditions = 64

    /// Every state token the header names.
    public var tokens: Set<String> { Set(lists.flatMap(\.conditions).compactMap(\.token)) }

    /// Reads the header.
    /// - Parameter header: The `If` header's value.
    /// - Returns: Its lists.
    /// - Throws: `bad_request` for a header outside the grammar, or past ``maximumConditions``.
    public static func parse(_ header: String) throws -> DavIf {
        var scanner = IfScanner(bytes: Array(header.utf8))
        var lists: [List] = []
        var tag: String? = nil
        var tagged = false
        while true {
            scanner.skipSpace()
            guard let byte = scanner.current else { break }
            switch byte {
            case UInt8(ascii: "<"):
                guard lists.isEmpty || tagged else {
                    throw IfScanner.malformed("a resource tag after an untagged list")
                }
                tag = try scanner.enclosed(UInt8(ascii: ">"))
                tagged = true
                scanner.skipSpace()
                guard scanner.current == UInt8(ascii: "(") else {
                    throw IfScanner.malformed("a resource tag without a list")
                }
            case UInt8(ascii: "("):
                lists.append(List(resource: tag, conditions: try scanner.list()))
            default:
                throw IfScanner.malformed("expected a ( or a <")
            }
        }
        guard !lists.isEmpty else { throw IfScanner.malformed("no list") }
        return DavIf(lists: lists)
    }

    /// Whether the header holds, given what each named resource is now: its entity tag (nil
    /// for none, or for a resource that does not exist) and the tokens of the locks on it.
    /// `state` is asked once per resource.
    public func holds(_ state: (String?) async throws -> (etag: String?, tokens: Set<String>)) async throws -> Bool {
        var known: [String: (etag: String?, tokens: Set<String>)] = [:]
        for list in lists {
            let key = list.resource ?? ""
            let current: (etag: String?, tokens: Set<String>)
            if let seen = known[key] {
                current = seen
            } else {
                current = try await state(list.resource)
                known[key] = current
            }
            let holds = list.conditions.allSatisfy { condition in
                let matches =
                    condition.token.map { current.tokens.contains($0) }
                    ?? (condition.etag != nil && condition.etag == current.etag)
                return matches != condition.not
            }
            if holds { return true }
        }
        return false
    }
}

/// Reads an `If` header's bytes for ``DavIf/parse(_:)``: where it is, and the conditions read
/// so far (at most ``DavIf/maximumConditions``).
private struct IfScanner {
    let bytes: [UInt8]
    var index = 0
    var count = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    static func malformed(_ why: String) -> XferError { XferError(.badRequest, "the If header is malformed: \(why)") }

    /// The byte at `index`, or `nil` at the end.
    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    mutating func skipSpace() {
        while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
            index += 1
        }
    }

    /// The text up to `close` (past the opening byte, which `index` is on); quotes in an
    /// entity tag may hold the closing byte.
    mutating func enclosed(_ close: UInt8) throws -> String {
        index += 1
        let start = index
        var quoted = false
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\"") { quoted.toggle() }
            if bytes[index] == close && !quoted {
                defer { index += 1 }
                return String(decoding: bytes[start..<index], as: UTF8.self)
            }
            index += 1
        }
        throw Self.malformed("a \(Character(UnicodeScalar(close))) is missing")
    }

    /// One list's conditions, `index` on its `(`.
    mutating func list() throws -> [DavIf.Condition] {
        index += 1
        var conditions: [DavIf.Condition] = []
        while true {
            skipSpace()
            guard index < bytes.count else { throw Self.malformed("a ) is missing") }
            if bytes[index] == UInt8(ascii: ")") {
                index += 1
                break
            }
            conditions.append(try condition())
            count += 1
            guard count <= DavIf.maximumConditions else {
                throw Self.malformed("more than \(DavIf.maximumConditions) conditions")
            }
        }
        guard !conditions.isEmpty else { throw Self.malformed("an empty list") }
        return conditions
    }

    /// One condition: `Not` maybe, then a `<state token>` or an `[entity tag]`.
    mutating func condition() throws -> DavIf.Condition {
        var not = false
        if bytes.count - index >= 3, String(decoding: bytes[index..<index + 3], as: UTF8.self).lowercased() == "not" {
            not = true
            index += 3
            skipSpace()
        }
        guard index < bytes.count else { throw Self.malformed("a condition is missing") }
        switch bytes[index] {
        case UInt8(ascii: "<"):
            return DavIf.Condition(not: not, token: try enclosed(UInt8(ascii: ">")), etag: nil)
        case UInt8(ascii: "["):
            var etag = try enclosed(UInt8(ascii: "]")).trimmingCharacters(in: .whitespaces)
            if etag.hasPrefix("W/") { etag = String(etag.dropFirst(2)) }
            return DavIf.Condition(not: not, token: nil, etag: etag)
        default:
            throw Self.malformed("a condition is a <state token> or an [entity tag]")
        }
    }
}
