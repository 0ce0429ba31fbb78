import Foundation
import XferCore

/// A document's path inside a container, validated once where it enters (a request, the
/// command line) and trusted everywhere after.
///
/// Rules: the manifest path rules (relative, `/`-separated, no empty, `.` or `..` component,
/// no NUL, at most 4096 bytes, components at most 255), no other control characters, and
/// Unicode in NFC: the path is normalized, so "é" typed precomposed or decomposed names the
/// same document.
public struct DocumentPath: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The normalized path.
    public let value: String

    /// Validates and normalizes a path.
    /// - Parameter raw: The path as received.
    /// - Throws: `XferError` `invalid_path` saying which rule it breaks.
    public init(_ raw: String) throws {
        let normalized = raw.precomposedStringWithCanonicalMapping
        try DocumentPathRules.validate(normalized)
        if let control = normalized.unicodeScalars.first(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw XferError(.invalidPath, "path contains the control character U+\(String(control.value, radix: 16, uppercase: true))")
        }
        value = normalized
    }

    /// The path's components.
    public var components: [Substring] { value.split(separator: "/") }

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
/// 1 to 128 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
public struct ContainerName: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// The name.
    public let value: String

    /// The container used when none is given.
    public static let `default` = try! ContainerName("default")

    /// Validates a name.
    /// - Parameter raw: The name as received.
    /// - Throws: `XferError` `invalid_path` if it breaks the rules.
    public init(_ raw: String) throws {
        let bytes = Array(raw.utf8)
        let allowed = { (b: UInt8) in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F || b == 0x2D
        }
        guard (1...128).contains(bytes.count), bytes.allSatisfy(allowed),
              let first = bytes.first, first != 0x2E, first != 0x5F, first != 0x2D else {
            throw XferError(.invalidPath,
                            "container name \"\(raw)\" must be 1-128 characters of A-Z a-z 0-9 . _ - starting with a letter or digit")
        }
        value = raw
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
