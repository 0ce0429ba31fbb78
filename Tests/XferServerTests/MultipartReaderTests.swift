import Foundation
import Testing
import XferCore

@testable import XferServer

/// The web view's multipart reader: the same parts however the body is split, and a clear
/// refusal of what is not multipart.
@Suite struct MultipartReaderTests {
    static let boundary = "----b0undary"

    static func body(_ parts: [(String, String?, [UInt8])]) -> [UInt8] {
        var body = Array("preamble is ignored\r\n".utf8)
        for (name, filename, bytes) in parts {
            let disposition = "form-data; name=\"\(name)\"" + (filename.map { "; filename=\"\($0)\"" } ?? "")
            body +=
                Array("--\(boundary)\r\nContent-Disposition: \(disposition)\r\nContent-Type: text/plain\r\n\r\n".utf8)
                + bytes + [13, 10]
        }
        return body + Array("--\(boundary)--\r\nepilogue".utf8)
    }

    /// The parts read back: name, filename, bytes.
    static func read(_ body: [UInt8], piece: Int) throws -> [(String, String?, [UInt8])] {
        var reader = try #require(MultipartReader(contentType: "multipart/form-data; boundary=\"\(boundary)\""))
        var parts: [(String, String?, [UInt8])] = []
        var offset = 0
        while offset < body.count {
            let end = min(body.count, offset + piece)
            for event in try reader.feed(body[offset..<end]) {
                switch event {
                case .begin(let name, let filename): parts.append((name, filename, []))
                case .data(let bytes): parts[parts.count - 1].2 += bytes
                case .end: break
                }
            }
            offset = end
        }
        try reader.finish()
        return parts
    }

    @Test func partsAreTheSameHoweverTheBodyIsSplit() throws {
        // Bytes that look like a delimiter, but are not one, inside a part.
        let tricky =
            Array("\r\n--\(Self.boundary.dropLast())x\r\n-".utf8)
            + (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let parts: [(String, String?, [UInt8])] = [
            ("csrf", nil, Array("abc".utf8)), ("file", "a \"q\".bin", tricky),
            ("file", "empty", []), ("folder", nil, Array("Documents/".utf8))
        ]
        let body = Self.body(parts.map { ($0.0, $0.1?.replacingOccurrences(of: "\"", with: "%22"), $0.2) })
        for piece in [1, 2, 3, 7, 64, 1000, body.count] {
            let got = try Self.read(body, piece: piece)
            #expect(got.map(\.0) == parts.map(\.0), "piece \(piece)")
            #expect(got.map(\.1) == parts.map(\.1), "piece \(piece)")
            #expect(got.map(\.2) == parts.map(\.2), "piece \(piece)")
        }
    }

    @Test func whatIsNotMultipartIsRefused() throws {
        #expect(MultipartReader(contentType: "application/x-www-form-urlencoded") == nil)
        #expect(MultipartReader(contentType: "multipart/form-data") == nil)
        #expect(
            MultipartReader(contentType: "multipart/form-data; boundary=" + String(repeating: "x", count: 71)) == nil)
        // Cut short: no closing delimiter.
        let body = Self.body([("a", nil, [1, 2, 3])])
        #expect(throws: XferError.self) { _ = try Self.read(Array(body.prefix(body.count - 20)), piece: 5) }
        // Endless headers.
        var reader = try #require(MultipartReader(contentType: "multipart/form-data; boundary=\(Self.boundary)"))
        _ = try reader.feed(Array("--\(Self.boundary)\r\n".utf8))
        #expect(throws: XferError.self) {
            _ = try reader.feed([UInt8](repeating: 65, count: MultipartReader.maximumHeaderBytes + 10))
        }
        // A part without a name.
        var nameless = try #require(MultipartReader(contentType: "multipart/form-data; boundary=\(Self.boundary)"))
        #expect(throws: XferError.self) {
            _ = try nameless.feed(Array("--\(Self.boundary)\r\nContent-Type: x\r\n\r\n".utf8))
        }
    }
}
