import Foundation
import Testing
import XferCore
import XferProtocol

@Suite struct DocumentPathTests {
    @Test(arguments: ["a", "Documents/notes.txt", "Data/x/y/z.bin", "名前/ファイル", "with space/and-dash_1.txt"])
    func acceptsRelativePaths(path: String) throws {
        #expect(try DocumentPath(path).value == path)
    }

    @Test(arguments: [
        "", "/etc/passwd", "../up", "a/../../b", "a/./b", "a//b", "a/", "nul\u{0}byte", "tab\there",
        "del\u{7F}", String(repeating: "x", count: 256), String(repeating: "a/", count: 2048) + "a"
    ])
    func refusesEscapingAndMalformedPaths(path: String) {
        #expect { try DocumentPath(path) } throws: { ($0 as? XferError)?.code == .invalidPath }
    }

    /// Characters that make a printed name lie: controls (C0, DEL, C1), separators and bidi
    /// formatting. The same rule holds for package entries (the manifest's rule).
    @Test(arguments: [
        "evil\u{202E}txt.exe", "line\u{2028}break", "next\u{0085}line", "esc\u{1B}[2J", "new\nline",
        "csi\u{9B}", "isolate\u{2066}x", "mark\u{200F}", "para\u{2029}"
    ])
    func refusesControlSeparatorAndBidiCharacters(path: String) throws {
        #expect { try DocumentPath("Documents/" + path) } throws: { ($0 as? XferError)?.code == .invalidPath }
        #expect {
            try Manifest(
                kind: .package, chunker: .default,
                entries: [
                    Manifest.Entry(path: path, kind: .directory, mode: 0o755, mtimeNanoseconds: 0)
                ])
        } throws: { ($0 as? XferError)?.code == .invalidPath }
    }

    @Test func normalizesToNFC() throws {
        let decomposed = "Cafe\u{301}/menu"
        let precomposed = "Caf\u{E9}/menu"
        #expect(Array(decomposed.utf8) != Array(precomposed.utf8))
        let a = try DocumentPath(decomposed)
        let b = try DocumentPath(precomposed)
        #expect(a == b)
        #expect(Array(a.value.utf8) == Array(precomposed.utf8))
    }

    @Test func decodingValidatesToo() throws {
        let decoded = try JSONDecoder().decode([DocumentPath].self, from: Data(#"["ok/path"]"#.utf8))
        #expect(decoded.map(\.value) == ["ok/path"])
        #expect(throws: (any Error).self) {
            try JSONDecoder().decode([DocumentPath].self, from: Data(#"["../x"]"#.utf8))
        }
    }

    @Test func containerNames() throws {
        for good in ["com.example.notes", "default", "A1", String(repeating: "a", count: 128)] {
            #expect(try ContainerName(good).value == good)
        }
        for bad in [
            "", ".hidden", "-x", "a/b/c", "a:b:c", "/b", "a/", ".a/b", "a/.b", "a b", "é",
            String(repeating: "a", count: 129),
            ".."
        ] {
            #expect(throws: XferError.self, "\(bad)") { try ContainerName(bad) }
        }
    }

    /// Another account's container: `OWNER/NAME`, or `OWNER:NAME` as a URL's path carries it.
    @Test func sharedContainerNamesCarryTheirOwner() throws {
        let slash = try ContainerName("alice/team")
        let colon = try ContainerName("alice:team")
        #expect(slash == colon && slash.value == "alice/team" && slash.pathSegment == "alice:team")
        let team = try ContainerName("team")
        #expect(slash.owner?.value == "alice" && slash.name == team && slash.name.owner == nil)
        #expect(try ContainerName("team").pathSegment == "team")
        #expect(ContainerName(owner: try AccountName("bob"), name: slash).value == "bob/team")
    }
}
