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

    /// Encodes a message whose string field `field` is empty, with that field holding the
    /// base64 of `bytes`, written straight into the result: a commit's manifest delta may be
    /// megabytes, and a base64 string of it, then the encoder's copy, then an array of that,
    /// would hold it three times over.
    /// - Parameters:
    ///   - value: A wire message whose `field` (its wire name) encodes as `""`.
    ///   - bytes: What `field` carries.
    /// - Returns: UTF-8 JSON, as ``encode(_:)`` with the field set.
    public static func encode(_ value: some Encodable, base64 bytes: some Collection<UInt8>, in field: String)
        -> SpillArray<UInt8>
    {
        let empty = encode(value)
        // Inside a JSON string every quote is escaped, so `"field":""` is only ever the key.
        let mark = Array("\"\(field)\":\"".utf8)
        guard let start = empty.indices.first(where: { empty[$0...].starts(with: mark) }),
            empty.count > start + mark.count, empty[start + mark.count] == UInt8(ascii: "\"")
        else {
            preconditionFailure("\(type(of: value)) has no empty field \(field)")
        }
        var json = SpillArray<UInt8>()
        json.reserveCapacity(empty.count + Base64.encodedCount(bytes.count))
        json.append(contentsOf: empty[..<(start + mark.count)])
        Base64.append(bytes, to: &json)
        json.append(contentsOf: empty[(start + mark.count)...])
        return json
    }

    /// Decodes a message, turning any decoding failure into `bad_request`.
    /// - Parameters:
    ///   - type: The message type.
    ///   - bytes: UTF-8 JSON.
    /// - Returns: The message.
    /// - Throws: `XferError` `bad_request` saying which field is wrong, or the field's own
    ///   error (`invalid_path` for a bad document path).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Sequence<UInt8>) throws -> T {
        try decode(type, from: bytes, snakeCase: true)
    }

    /// ``decode(_:from:)`` with keys as written (`snakeCase` false: the records routes, whose
    /// keys are CloudKit's camelCase, ``RecordJSON``).
    static func decode<T: Decodable>(_ type: T.Type, from bytes: some Sequence<UInt8>, snakeCase: Bool) throws -> T {
        let decoder = JSONDecoder()
        if snakeCase { decoder.keyDecodingStrategy = .convertFromSnakeCase }
        let name = { (key: any CodingKey) in snakeCase ? key.stringValue.snakeCased : key.stringValue }
        do {
            return try decoder.decode(type, from: Data(bytes))
        } catch let error as XferError {
            throw error
        } catch DecodingError.keyNotFound(let key, _) {
            throw XferError(.badRequest, "request body lacks \"\(name(key))\"")
        } catch DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context) {
            throw XferError(
                .badRequest,
                "request body field \"\(context.codingPath.map(name).joined(separator: "."))\" has the wrong type")
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
        var text: [UInt8] = []
        text.reserveCapacity(encodedCount(bytes.count))
        append(bytes, to: &text)
        return String(decoding: text, as: UTF8.self)
    }

    /// The length of `count` bytes in base64 (padded).
    public static func encodedCount(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Appends the standard (padded) base64 of `bytes` to `output`.
    public static func append(_ bytes: some Collection<UInt8>, to output: inout [UInt8]) {
        let start = output.count
        output.append(contentsOf: repeatElement(UInt8(ascii: "="), count: encodedCount(bytes.count)))
        output.withUnsafeMutableBufferPointer { write(bytes, into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
    }

    /// Appends the base64 of `bytes` to `output`.
    public static func append(_ bytes: some Collection<UInt8>, to output: inout SpillArray<UInt8>) {
        let start = output.count
        output.append(repeating: UInt8(ascii: "="), count: encodedCount(bytes.count))
        output.withUnsafeMutableBufferPointer { write(bytes, into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
    }

    /// Writes the base64 of `bytes` at the start of `out`, whose padding is already `=`.
    private static func write(_ bytes: some Collection<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) {
        guard bytes.withContiguousStorageIfAvailable({ write($0, into: out) }) != nil else {
            return Array(bytes).withUnsafeBufferPointer { write($0, into: out) }
        }
    }

    private static func write(_ input: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) {
        let alphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        alphabet.withUTF8Buffer { table in
            var o = 0
            var i = 0
            while i + 3 <= input.count {
                let word = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                out[o] = table[Int(word >> 18 & 63)]
                out[o + 1] = table[Int(word >> 12 & 63)]
                out[o + 2] = table[Int(word >> 6 & 63)]
                out[o + 3] = table[Int(word & 63)]
                i += 3
                o += 4
            }
            let rest = input.count - i  // 0, 1 or 2 bytes, padded with "="
            if rest > 0 {
                let word = UInt32(input[i]) << 16 | (rest == 2 ? UInt32(input[i + 1]) << 8 : 0)
                out[o] = table[Int(word >> 18 & 63)]
                out[o + 1] = table[Int(word >> 12 & 63)]
                if rest == 2 { out[o + 2] = table[Int(word >> 6 & 63)] }
            }
        }
    }

    /// Decodes standard base64.
    /// - Throws: `bad_request` if the text is not base64.
    public static func decode(_ text: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text) else {
            throw XferError(.badRequest, "a base64 field is not valid base64")
        }
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
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2E || b == 0x5F
                || b == 0x2D
        }
        guard (1...64).contains(raw.utf8.count), allowed, let first = raw.utf8.first, first != 0x2E, first != 0x5F,
            first != 0x2D
        else {
            throw XferError(
                .badRequest,
                "account name \"\(raw.prefix(80))\" must be 1-64 characters of A-Z a-z 0-9 . _ - starting with a letter or digit"
            )
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
