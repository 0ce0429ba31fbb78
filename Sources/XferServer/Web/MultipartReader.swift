import Foundation
import XferCore

/// Reads a `multipart/form-data` body (RFC 7578) as it arrives: part headers, then each
/// part's bytes in pieces, never the whole body in memory. A part's headers may be at most
/// ``maximumHeaderBytes``; anything malformed is a `bad_request`.
struct MultipartReader {
    enum Event: Equatable {
        /// A part begins: its form field name and, for a file, the file name the browser sent.
        case begin(name: String, filename: String?)
        /// Bytes of the current part.
        case data([UInt8])
        /// The current part ended.
        case end
    }

    static let maximumHeaderBytes = 8192

    private enum State { case preamble, afterDelimiter, headers, body, done }

    private let delimiter: [UInt8]
    private var pending: [UInt8]
    private var state = State.preamble

    /// A reader for the boundary named in `contentType`; `nil` if it names none or is not
    /// `multipart/form-data`.
    init?(contentType: String) {
        let parts = contentType.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard parts.first?.lowercased() == "multipart/form-data",
            let parameter = parts.dropFirst().first(where: { $0.lowercased().hasPrefix("boundary=") })
        else { return nil }
        var boundary = String(parameter.dropFirst("boundary=".count))
        if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 {
            boundary = String(boundary.dropFirst().dropLast())
        }
        guard (1...70).contains(boundary.utf8.count) else { return nil }
        delimiter = Array("\r\n--\(boundary)".utf8)
        // The body opens with the delimiter less its CRLF: supplied, so one search fits all.
        pending = [13, 10]
    }

    var isDone: Bool { state == .done }

    /// Reads the next bytes of the body.
    mutating func feed(_ bytes: some Collection<UInt8>) throws -> [Event] {
        pending.append(contentsOf: bytes)
        var events: [Event] = []
        var index = 0
        defer { pending.removeFirst(index) }
        loop: while true {
            switch state {
            case .preamble:
                guard let found = find(delimiter, from: index) else {
                    index = max(index, pending.count - delimiter.count + 1)
                    break loop
                }
                index = found + delimiter.count
                state = .afterDelimiter
            case .afterDelimiter:
                guard pending.count - index >= 2 else { break loop }
                let next = (pending[index], pending[index + 1])
                index += 2
                if next == (45, 45) {  // "--": the last part is over
                    state = .done
                } else if next == (13, 10) {
                    state = .headers
                } else {
                    throw XferError(.badRequest, "the form's body is not multipart/form-data as its Content-Type says")
                }
            case .headers:
                guard let end = find([13, 10, 13, 10], from: index) else {
                    guard pending.count - index <= Self.maximumHeaderBytes else {
                        throw XferError(
                            .badRequest, "a part of the form has more than \(Self.maximumHeaderBytes) bytes of headers")
                    }
                    break loop
                }
                guard end - index <= Self.maximumHeaderBytes else {
                    throw XferError(
                        .badRequest, "a part of the form has more than \(Self.maximumHeaderBytes) bytes of headers")
                }
                let text = String(decoding: pending[index..<end], as: UTF8.self)
                events.append(try Self.begin(text))
                index = end + 4
                state = .body
            case .body:
                if let found = find(delimiter, from: index) {
                    if found > index { events.append(.data(Array(pending[index..<found]))) }
                    events.append(.end)
                    index = found + delimiter.count
                    state = .afterDelimiter
                } else {
                    // All but what could be the start of a delimiter split across reads.
                    let safe = pending.count - delimiter.count + 1
                    if safe > index {
                        events.append(.data(Array(pending[index..<safe])))
                        index = safe
                    }
                    break loop
                }
            case .done:
                index = pending.count  // the epilogue is ignored
                break loop
            }
        }
        return events
    }

    /// The body ended: it must have ended with the closing delimiter.
    func finish() throws {
        guard state == .done else { throw XferError(.badRequest, "the form's body ended before its last part did") }
    }

    private func find(_ needle: [UInt8], from start: Int) -> Int? {
        guard pending.count - start >= needle.count else { return nil }
        let first = needle[0]
        var i = start
        let last = pending.count - needle.count
        while i <= last {
            if pending[i] == first {
                var j = 1
                while j < needle.count && pending[i + j] == needle[j] { j += 1 }
                if j == needle.count { return i }
            }
            i += 1
        }
        return nil
    }

    /// A part's `Content-Disposition: form-data; name="…"; filename="…"`.
    static func begin(_ headers: String) throws -> Event {
        for line in headers.split(separator: "\r\n") {
            let pieces = line.split(separator: ":", maxSplits: 1)
            guard pieces.count == 2,
                pieces[0].trimmingCharacters(in: .whitespaces).lowercased() == "content-disposition"
            else { continue }
            let parameters = parameters(String(pieces[1]))
            guard let name = parameters["name"] else { break }
            return .begin(name: name, filename: parameters["filename"])
        }
        throw XferError(.badRequest, "a part of the form has no Content-Disposition naming its field")
    }

    /// `form-data; name="a"; filename="b"`: quoted values may hold `;` and `\"`.
    static func parameters(_ value: String) -> [String: String] {
        var result: [String: String] = [:]
        var scalars = Substring(value)
        func skipSpaces() { while scalars.first == " " || scalars.first == "\t" { scalars.removeFirst() } }
        // The disposition type.
        while let c = scalars.first, c != ";" { scalars.removeFirst() }
        while scalars.first == ";" {
            scalars.removeFirst()
            skipSpaces()
            var key = ""
            while let c = scalars.first, c != "=", c != ";" {
                key.append(c)
                scalars.removeFirst()
            }
            guard scalars.first == "=" else { continue }
            scalars.removeFirst()
            var item = ""
            if scalars.first == "\"" {
                scalars.removeFirst()
                // Browsers send `"`, CR and LF in a name as %22, %0D, %0A (the HTML standard's
                // form encoding) and a backslash as it is.
                while let c = scalars.first {
                    scalars.removeFirst()
                    if c == "\"" { break }
                    item.append(c)
                }
                item = item.replacingOccurrences(of: "%22", with: "\"").replacingOccurrences(of: "%0D", with: "\r")
                    .replacingOccurrences(of: "%0A", with: "\n")
            } else {
                while let c = scalars.first, c != ";" {
                    item.append(c)
                    scalars.removeFirst()
                }
            }
            result[key.trimmingCharacters(in: .whitespaces).lowercased()] = item
            skipSpaces()
        }
        return result
    }
}
