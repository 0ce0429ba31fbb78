import Foundation
import FuzzSupport
import XferCore
import XferDav

/// `DavIf.parse`, WebDAV's `If` header (what lets a write through a lock).
///
/// A header that parses has at least one list, none empty, at most 64 conditions in all, and
/// names exactly the state tokens of its conditions; written back out in the grammar it parses
/// to the same lists (the parse loses nothing it acts on).
enum DavIfHarness {
    static func run(_ bytes: [UInt8]) {
        let header = String(decoding: bytes, as: UTF8.self)
        guard case .success(let parsed) = Fuzz.outcome("DavIf.parse", { try DavIf.parse(header) }) else { return }
        let conditions = parsed.lists.flatMap(\.conditions)
        Fuzz.check(!parsed.lists.isEmpty && parsed.lists.allSatisfy { !$0.conditions.isEmpty }, "an empty list, or none")
        Fuzz.check(conditions.count <= DavIf.maximumConditions, "\(conditions.count) conditions, over the limit")
        Fuzz.check(conditions.allSatisfy { ($0.token == nil) != ($0.etag == nil) }, "a condition that is both or neither a token and an entity tag")
        Fuzz.check(parsed.tokens == Set(conditions.compactMap(\.token)), "the tokens are not the conditions' tokens")
        let written = write(parsed)
        let again = Fuzz.must("the parse of \(written.prefix(200))") { try DavIf.parse(written) }
        Fuzz.check(again == parsed, "\(header.prefix(200)) written back as \(written.prefix(200)) parses otherwise")
    }

    /// The header in the grammar: each list with its tag, if any. An entity tag the parse
    /// left starting with a space (after the `W/` it drops) or with `W/` is written after a `W/`
    /// (the parse trims the tag, then drops one `W/`, a prefix of whole `Character`s).
    static func write(_ header: DavIf) -> String {
        func tag(_ etag: String) -> String {
            let weak = etag.hasPrefix("W/") || etag.unicodeScalars.first.map(CharacterSet.whitespaces.contains) == true
            return weak ? "[W/\(etag)]" : "[\(etag)]"
        }
        return header.lists.map { list in
            let conditions = list.conditions.map { condition in
                (condition.not ? "Not " : "") + (condition.token.map { "<\($0)>" } ?? tag(condition.etag ?? ""))
            }
            return (list.resource.map { "<\($0)> " } ?? "") + "(" + conditions.joined(separator: " ") + ")"
        }.joined(separator: " ")
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        let headers: [(String, String)] = [
            ("untagged", #"(<urn:uuid:181d4fae-7d8c-11d0-a765-00a0c91e6bf2> ["I am an ETag"]) (["I am another ETag"])"#),
            ("not", #"(Not <urn:uuid:181d4fae-7d8c-11d0-a765-00a0c91e6bf2> <urn:uuid:58f202ac-22cf-11d1-b12d-002035b29092>)"#),
            ("no-lock", #"(<urn:uuid:181d4fae-7d8c-11d0-a765-00a0c91e6bf2>) (Not <DAV:no-lock>)"#),
            ("tagged", #"<http://www.example.com/specs/> (<urn:uuid:181d4fae-7d8c-11d0-a765-00a0c91e6bf2>) </dav/c/b> ([W/"x]y"])"#),
            ("weak", #"([W/"A weak ETag"]) (["strong ETag"])"#),
            ("tabs", "\t(<urn:uuid:a>)\t(\tnot\t[\"e\"])"),
        ]
        return headers.map { ($0.0, Array($0.1.utf8)) }
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(DavIfHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    DavIfHarness.run(Fuzz.bytes(data, size))
    return 0
}
