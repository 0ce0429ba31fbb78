import Foundation
import XferCore

/// A document's path inside a container, validated once where it enters (a request, the
/// command line) and trusted everywhere after.
///
/// Rules: the manifest path rules (``DocumentPathRules``: relative, `/`-separated, no empty,
/// `.` or `..` component, at most 4096 bytes, components at most 255, no control, separator
/// or bidirectional formatting character), and
/// Unicode in NFC: the path is normalized, so "é" typed precomposed or decomposed names the
/// same document.
public struct DocumentPath: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The normalized path.
    public let value: String

    /// Validates and normalizes a path.
    /// - Parameter raw: The path as received.
    /// - Throws: `XferError` `invalid_path` saying which rule it breaks.
    public init(_ raw: String) throws {
        // ASCII is already in NFC: only other text goes through Foundation's (slow) mapping.
        let normalized = raw.utf8.allSatisfy { $0 < 0x80 } ? raw : raw.precomposedStringWithCanonicalMapping
        try DocumentPathRules.validate(normalized)
        value = normalized
    }

    /// The path's components.
    public var components: [Substring] { value.split(separator: "/") }

    /// The paths that would contain this one, outermost first: "a", "a/b" for "a/b/c".
    ///
    /// The document namespace is a tree: a live document may have no other live document
    /// among its ancestors or below it (docs/PROTOCOL.md, "Names"), so no file is ever synced
    /// *inside* a file or a symlink. The one exception is a `directory` document
    /// (``DocumentKind/holdsDocuments``): documents may lie below it.
    public var ancestors: [String] {
        var result: [String] = []
        var index = value.startIndex
        while let slash = value[index...].firstIndex(of: "/") {
            result.append(String(value[..<slash]))
            index = value.index(after: slash)
        }
        return result
    }

    /// Every path below this one, as a bytewise half-open range: from `PATH/` up to `PATH0`
    /// ("0" is the byte after "/").
    public var descendantRange: (low: String, high: String) { (value + "/", value + "0") }

    /// The error for a document that would live inside another, or contain one.
    /// - Parameters:
    ///   - other: The live document in the way.
    public func namespaceConflict(with other: String) -> XferError {
        if other.utf8.count < value.utf8.count {
            return XferError(
                .conflict,
                "\(other) is a document (a file, symlink or package), not a directory, so \(value) cannot be one inside it; delete \(other) first or choose another name"
            )
        }
        return XferError(
            .conflict,
            "\(value) holds the document \(other), so it cannot itself be a document; delete what is inside it first or choose another name"
        )
    }

    public var description: String { value }

    public static func < (lhs: DocumentPath, rhs: DocumentPath) -> Bool {
        lhs.value.utf8.lexicographicallyPrecedes(rhs.value.utf8)
    }

    public init(from decoder: any Decoder) throws {
        try self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}

/// The name of a container, like an iCloud ubiquity container: `com.example.notes`.
///
/// 1 to 128 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit. Another
/// account's container shared with this one is named `OWNER/NAME` (``owner``); in a URL's
/// path, where a slash would split it, `OWNER:NAME` (``pathSegment``).
public struct ContainerName: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The name: `NAME`, or `OWNER/NAME` for a container another account shares.
    public let value: String
    /// The account that owns the container, when the name says (`OWNER/NAME`).
    public let owner: AccountName?
    /// The container's name in its owner's account: ``value`` without the owner.
    public var name: ContainerName {
        owner == nil ? self : ContainerName(plain: String(value.split(separator: "/")[1]))
    }
    /// The name as one segment of a URL's path: `NAME` or `OWNER:NAME`.
    public var pathSegment: String { value.replacingOccurrences(of: "/", with: ":") }

    /// The container used when none is given.
    public static let `default` = try! ContainerName("default")

    /// Validates a name.
    /// - Parameter raw: The name as received.
    /// - Throws: `XferError` `invalid_path` if it breaks the rules.
    public init(_ raw: String) throws {
        if let separator = raw.firstIndex(where: { $0 == "/" || $0 == ":" }) {
            let owner = try AccountName(String(raw[..<separator]))
            let name = try ContainerName(String(raw[raw.index(after: separator)...]))
            guard name.owner == nil else {
                throw XferError(.invalidPath, "container name \"\(raw)\" names more than one owner; write OWNER/NAME")
            }
            self.owner = owner
            value = "\(owner.value)/\(name.value)"
            return
        }
        let bytes = Array(raw.utf8)
        let allowed = { (b: UInt8) in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F
                || b == 0x2D
        }
        guard (1...128).contains(bytes.count), bytes.allSatisfy(allowed),
            let first = bytes.first, first != 0x2E, first != 0x5F, first != 0x2D
        else {
            throw XferError(
                .invalidPath,
                "container name \"\(raw)\" must be 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"
            )
        }
        value = raw
        owner = nil
    }

    /// A name already checked, without an owner.
    private init(plain: String) {
        value = plain
        owner = nil
    }

    /// The name `OWNER/NAME` of `name` in `owner`'s account, as another account names it.
    public init(owner: AccountName, name: ContainerName) {
        self.owner = owner
        value = "\(owner.value)/\(name.name.value)"
    }

    public var description: String { value }

    public static func < (lhs: ContainerName, rhs: ContainerName) -> Bool { lhs.value < rhs.value }

    public init(from decoder: any Decoder) throws {
        try self.init(try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value)
    }
}
