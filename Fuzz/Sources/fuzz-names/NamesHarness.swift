import FuzzSupport
import XferCore

/// Sealed names of an end-to-end encrypted container, as a hostile server hands them to a
/// client: `NameSealing.open` of a component and of a path, `EndToEndKeys.openingNames(in:)`
/// over a server's message, and `open(value:serverKey:)` of a sealed key-value value.
///
/// The input is a parent path, a zero byte, and the rest (a sealed name, a message, a value).
/// A sealed name that opens has the form `isSealed` checks and re-seals to itself (SIV is
/// deterministic: one name in one folder, one sealed form); the rest taken as a plain name seals
/// to a name of that form which opens back to it, and not under another parent.
enum NamesHarness {
    static let keys = EndToEndKeys(key: try! ContainerKey(bytes: Array(0..<32)))

    static func run(_ bytes: [UInt8]) {
        let cut = bytes.firstIndex(of: 0)
        let parent = String(decoding: bytes[..<(cut ?? 0)], as: UTF8.self)
        let rest = Array(bytes[(cut.map { $0 + 1 } ?? 0)...])
        let text = String(decoding: rest, as: UTF8.self)
        let names = keys.names

        if case .success(let plain) = Fuzz.outcome("NameSealing.open", { try names.open(text, parent: parent) }) {
            Fuzz.check(NameSealing.isSealed(path: text), "\(text.prefix(80)) opens but is not of a sealed name's form")
            Fuzz.check(Fuzz.must("re-sealing an opened name") { try names.seal(plain, parent: parent) } == text, "an opened name re-seals otherwise")
        }
        if case .success(let plain) = Fuzz.outcome("NameSealing.open(path:)", { try names.open(path: text) }) {
            Fuzz.check(NameSealing.isSealed(path: text), "the path \(text.prefix(80)) opens but is not of a sealed path's form")
            Fuzz.check(plain.split(separator: "/", omittingEmptySubsequences: false).count >= text.split(separator: "/", omittingEmptySubsequences: false).count,
                       "a sealed path opens to fewer components")
        }
        if text.utf8.count <= NameSealing.maximumComponentBytes {
            let sealed = Fuzz.must("sealing a name") { try names.seal(text, parent: parent) }
            Fuzz.check(NameSealing.isSealed(path: sealed), "a sealed name is not of the sealed form")
            Fuzz.check(Fuzz.must("opening a name just sealed") { try names.open(sealed, parent: parent) } == text, "a sealed name opens to another")
            Fuzz.check((try? names.open(sealed, parent: parent + "/x")) == nil, "a sealed name opens under another parent")
        }
        let message = keys.openingNames(in: text)
        if !text.utf8.contains(where: { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }) {
            Fuzz.check(message == text, "a message with no sealed name in it is changed")
        }
        if case .success(let value) = Fuzz.outcome("EndToEndKeys.open(value:serverKey:)", { try keys.open(value: rest, serverKey: parent) }) {
            let resealed = keys.seal(value: value, serverKey: parent)
            Fuzz.check(Fuzz.must("opening a value re-sealed") { try keys.open(value: resealed, serverKey: parent) } == value, "a value re-sealed opens to another")
        }
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        let names = keys.names
        func seed(_ parent: String, _ rest: String) -> [UInt8] { Array(parent.utf8) + [0] + Array(rest.utf8) }
        let key = keys.serverKey("theme")
        return [
            ("component", seed("", try names.seal("notes.txt", parent: ""))),
            ("nested-component", seed("Documents/Caf\u{e9}", try names.seal("\u{1F600} plan.md", parent: "Documents/Caf\u{e9}"))),
            ("long-component", seed("a", try names.seal(String(repeating: "x", count: NameSealing.maximumComponentBytes), parent: "a"))),
            ("path", seed("", try names.seal(path: "Documents/projects/2026/report.pdf"))),
            ("message", seed("", "version 3 of \(try names.seal(path: "Documents/a.txt")) is in conflict with version 4")),
            ("plain", seed("Documents", "a plain name")),
            ("value", Array(key.utf8) + [0] + keys.seal(value: Array(#"{"dark":true}"#.utf8), serverKey: key)),
        ]
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(NamesHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    NamesHarness.run(Fuzz.bytes(data, size))
    return 0
}
