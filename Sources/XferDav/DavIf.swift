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
        let bytes = Array(header.utf8)
        var index = 0
        func malformed(_ why: String) -> XferError { XferError(.badRequest, "the If header is malformed: \(why)") }
        func skipSpace() {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") {
                index += 1
            }
        }
        /// The text up to `close` (past the opening byte, which `index` is on); quotes in an
        /// entity tag may hold the closing byte.
        func enclosed(_ close: UInt8) throws -> String {
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
            throw malformed("a \(Character(UnicodeScalar(close))) is missing")
        }
        var lists: [List] = []
        var tag: String? = nil
        var tagged = false
        var count = 0
        while true {
            skipSpace()
            guard index < bytes.count else { break }
            switch bytes[index] {
            case UInt8(ascii: "<"):
                guard lists.isEmpty || tagged else { throw malformed("a resource tag after an untagged list") }
                tag = try enclosed(UInt8(ascii: ">"))
                tagged = true
                skipSpace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "(") else {
                    throw malformed("a resource tag without a list")
                }
            case UInt8(ascii: "("):
                index += 1
                var conditions: [Condition] = []
                while true {
                    skipSpace()
                    guard index < bytes.count else { throw malformed("a ) is missing") }
                    if bytes[index] == UInt8(ascii: ")") {
                        index += 1
                        break
                    }
                    var not = false
                    if bytes.count - index >= 3,
                        String(decoding: bytes[index..<index + 3], as: UTF8.self).lowercased() == "not"
                    {
                        not = true
                        index += 3
                        skipSpace()
                    }
                    guard index < bytes.count else { throw malformed("a condition is missing") }
                    switch bytes[index] {
                    case UInt8(ascii: "<"):
                        conditions.append(Condition(not: not, token: try enclosed(UInt8(ascii: ">")), etag: nil))
                    case UInt8(ascii: "["):
                        var etag = try enclosed(UInt8(ascii: "]")).trimmingCharacters(in: .whitespaces)
                        if etag.hasPrefix("W/") { etag = String(etag.dropFirst(2)) }
                        conditions.append(Condition(not: not, token: nil, etag: etag))
                    default:
                        throw malformed("a condition is a <state token> or an [entity tag]")
                    }
                    count += 1
                    guard count <= maximumConditions else {
                        throw malformed("more than \(maximumConditions) conditions")
                    }
                }
                guard !conditions.isEmpty else { throw malformed("an empty list") }
                lists.append(List(resource: tag, conditions: conditions))
            default:
                throw malformed("expected a ( or a <")
            }
        }
        guard !lists.isEmpty else { throw malformed("no list") }
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
