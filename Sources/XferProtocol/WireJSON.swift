import Foundation
import XferCore

/// The JSON coders of the wire format: snake_case keys, sorted output.
public enum WireJSON {
    /// Encodes a message.
    /// - Parameter value: Any wire message.
    /// - Returns: UTF-8 JSON.
    public static func encode(_ value: some Encodable) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Wire messages hold only strings, numbers and arrays: encoding cannot fail.
        return Array(try! encoder.encode(value))
    }

    /// Decodes a message, turning any decoding failure into `bad_request`.
    /// - Parameters:
    ///   - type: The message type.
    ///   - bytes: UTF-8 JSON.
    /// - Returns: The message.
    /// - Throws: `XferError` `bad_request` saying which field is wrong, or the field's own
    ///   error (`invalid_path` for a bad document path).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Sequence<UInt8>) throws -> T {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            return try decoder.decode(type, from: Data(bytes))
        } catch let error as XferError {
            throw error
        } catch DecodingError.keyNotFound(let key, _) {
            throw XferError(.badRequest, "request body lacks \"\(key.stringValue.snakeCased)\"")
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            throw XferError(.badRequest, "request body field \"\(context.codingPath.map(\.stringValue.snakeCased).joined(separator: "."))\" has the wrong type")
        } catch DecodingError.dataCorrupted(let context) {
            if let underlying = context.underlyingError as? XferError { throw underlying }
            throw XferError(.badRequest, "request body is not valid JSON for this route")
        } catch {
            throw XferError(.badRequest, "request body is not valid JSON for this route")
        }
    }
}

/// Base64 for binary fields inside JSON.
public enum Base64 {
    /// Encodes bytes as standard base64.
    public static func encode(_ bytes: [UInt8]) -> String {
        // Read in place: a manifest delta may be megabytes, and a copy of it would only be dropped.
        bytes.withUnsafeBytes { raw in
            guard let base = raw.baseAddress else { return "" }
            return Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: base), count: raw.count, deallocator: .none).base64EncodedString()
        }
    }

    /// Decodes standard base64.
    /// - Throws: `bad_request` if the text is not base64.
    public static func decode(_ text: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text) else { throw XferError(.badRequest, "a base64 field is not valid base64") }
        return Array(data)
    }
}

/// An account's name: 1–64 characters of `A-Z a-z 0-9 . _ -`, starting with a letter or digit.
public struct AccountName: Hashable, Sendable, CustomStringConvertible {
    /// The validated name.
    public let value: String

    /// Validates a name.
    /// - Throws: `bad_request` saying what is allowed.
    public init(_ raw: String) throws {
        let allowed = raw.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F || b == 0x2D
        }
        guard (1...64).contains(raw.utf8.count), allowed, let first = raw.utf8.first, first != 0x2E, first != 0x5F, first != 0x2D else {
            throw XferError(.badRequest, "account name \"\(raw.prefix(80))\" must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit")
        }
        value = raw
    }

    public var description: String { value }
}

extension String {
    fileprivate var snakeCased: String {
        var out = ""
        for character in self {
            if character.isUppercase {
                out += "_" + character.lowercased()
            } else {
                out.append(character)
            }
        }
        return out
    }
}
