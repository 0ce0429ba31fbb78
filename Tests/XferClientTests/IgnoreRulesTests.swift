import Foundation
import Testing
import XferClient
import XferCore

/// The `.xferignore` matcher: gitignore(5)'s documented examples, nesting, the defaults, and
/// properties that hold for any rules.
@Suite struct IgnoreRulesTests {
    /// Rules from a root `.xferignore`, one path, and whether it is ignored.
    struct Case: CustomTestStringConvertible, Sendable {
        var rules: [String]
        var path: String
        var isDirectory = false
        var ignored: Bool

        var testDescription: String { "\(rules) \(path)\(isDirectory ? "/" : "") → \(ignored ? "ignored" : "kept")" }
    }

    static func root(_ rules: [String], defaults: Bool = false) -> IgnoreRules {
        var result = IgnoreRules(defaults: defaults)
        result.add(rules.joined(separator: "\n"), in: "")
        return result
    }

    static let cases: [Case] = [
        // A leading slash anchors; without one the name matches at any depth.
        Case(rules: ["/foo"], path: "foo", ignored: true),
        Case(rules: ["/foo"], path: "a/foo", ignored: false),
        Case(rules: ["foo"], path: "foo", ignored: true),
        Case(rules: ["foo"], path: "a/b/foo", isDirectory: true, ignored: true),
        // A slash in the middle anchors too.
        Case(rules: ["doc/frotz/"], path: "doc/frotz", isDirectory: true, ignored: true),
        Case(rules: ["doc/frotz/"], path: "a/doc/frotz", isDirectory: true, ignored: false),
        Case(rules: ["doc/frotz/"], path: "doc/frotz", ignored: false),
        Case(rules: ["doc/frotz/"], path: "doc/frotz/x.txt", ignored: true),
        Case(rules: ["doc/*.txt"], path: "x/doc/a.txt", ignored: false),
        // A trailing slash: directories only, at any depth.
        Case(rules: ["frotz/"], path: "frotz", isDirectory: true, ignored: true),
        Case(rules: ["frotz/"], path: "a/frotz", isDirectory: true, ignored: true),
        Case(rules: ["frotz/"], path: "a/frotz", ignored: false),
        // `*` and `?` never cross a slash.
        Case(rules: ["foo/*"], path: "foo/test.json", ignored: true),
        Case(rules: ["foo/*"], path: "foo/bar", isDirectory: true, ignored: true),
        Case(rules: ["a/*.c"], path: "a/b/x.c", ignored: false),
        Case(rules: ["a/*.c"], path: "a/x.c", ignored: true),
        Case(rules: ["x/a?c"], path: "x/abc", ignored: true),
        Case(rules: ["x/a?c"], path: "x/a/c", ignored: false),
        Case(rules: ["*.txt"], path: "d/e/x.txt", ignored: true),
        // `**`: leading, trailing, middle; elsewhere a plain `*`.
        Case(rules: ["**/foo"], path: "foo", ignored: true),
        Case(rules: ["**/foo"], path: "a/b/foo", ignored: true),
        Case(rules: ["**/foo/bar"], path: "x/foo/bar", ignored: true),
        Case(rules: ["**/foo/bar"], path: "foo/bar", ignored: true),
        Case(rules: ["**/foo/bar"], path: "foo/x/bar", ignored: false),
        Case(rules: ["abc/**"], path: "abc/x", ignored: true),
        Case(rules: ["abc/**"], path: "abc/x/y", ignored: true),
        Case(rules: ["abc/**"], path: "abc", isDirectory: true, ignored: false),
        Case(rules: ["a/**/b"], path: "a/b", ignored: true),
        Case(rules: ["a/**/b"], path: "a/x/b", ignored: true),
        Case(rules: ["a/**/b"], path: "a/x/y/b", ignored: true),
        Case(rules: ["a/**/b"], path: "a/xb", ignored: false),
        Case(rules: ["a/**/b"], path: "ab", ignored: false),
        Case(rules: ["a**b"], path: "axyb", ignored: true),
        Case(rules: ["x/a**b"], path: "x/a/b", ignored: false),
        // Negation: the last match wins…
        Case(rules: ["*.log", "!keep.log"], path: "keep.log", ignored: false),
        Case(rules: ["*.log", "!keep.log"], path: "d/x.log", ignored: true),
        Case(rules: ["!keep.log", "*.log"], path: "keep.log", ignored: true),
        // …but nothing comes back out of an excluded directory.
        Case(rules: ["build/", "!build/keep.o"], path: "build/keep.o", ignored: true),
        Case(rules: ["build", "!build/sub/"], path: "build/sub", isDirectory: true, ignored: true),
        Case(rules: ["build/*", "!build/keep.o"], path: "build/keep.o", ignored: false),
        Case(rules: ["build/*", "!build/keep.o"], path: "build/other.o", ignored: true),
        Case(rules: ["build/", "!build/"], path: "build/x", ignored: false),
        // Comments, escapes, trailing spaces.
        Case(rules: ["#notes"], path: "#notes", ignored: false),
        Case(rules: ["\\#notes"], path: "#notes", ignored: true),
        Case(rules: ["\\!important"], path: "!important", ignored: true),
        Case(rules: ["foo  "], path: "foo", ignored: true),
        Case(rules: ["foo\\ "], path: "foo ", ignored: true),
        Case(rules: ["foo\\ "], path: "foo", ignored: false),
        Case(rules: ["a\\*"], path: "a*", ignored: true),
        Case(rules: ["a\\*"], path: "ab", ignored: false),
        Case(rules: ["foo\\"], path: "foo", ignored: false),
        Case(rules: ["", "   ", "!", "/"], path: "foo", ignored: false),
        Case(rules: ["*.o\r"], path: "x.o", ignored: true),
        // Classes.
        Case(rules: ["[abc].txt"], path: "a.txt", ignored: true),
        Case(rules: ["[abc].txt"], path: "d.txt", ignored: false),
        Case(rules: ["[a-c]x"], path: "bx", ignored: true),
        Case(rules: ["[a-c]x"], path: "dx", ignored: false),
        Case(rules: ["[!a]x"], path: "bx", ignored: true),
        Case(rules: ["[!a]x"], path: "ax", ignored: false),
        Case(rules: ["[^a]x"], path: "ax", ignored: false),
        Case(rules: ["[]]x"], path: "]x", ignored: true),
        Case(rules: ["[a-]x"], path: "-x", ignored: true),
        Case(rules: ["[[:digit:]]*"], path: "1a", ignored: true),
        Case(rules: ["[[:digit:]]*"], path: "a1", ignored: false),
        Case(rules: ["[abc"], path: "a", ignored: false),
        Case(rules: ["x[/]y"], path: "x/y", ignored: false),
        Case(rules: ["*.TXT"], path: "a.txt", ignored: false)
    ]

    @Test(arguments: cases)
    func gitignoreSemantics(_ c: Case) {
        #expect(Self.root(c.rules).isIgnored(c.path, isDirectory: c.isDirectory) == c.ignored)
    }

    static let defaultCases: [(String, Bool)] = [
        (".notes.txt.swp", true), ("a/b/x.swx", true), ("report.doc~", true), (".#report.doc", true),
        ("#report.doc#", true), ("4913", true), ("a/.DS_Store", true), ("Thumbs.db", true), ("desktop.ini", true),
        ("._photo.jpg", true), (".photo.jpg.xfer-3.partial", true), (".xfer", true), ("a/.x.xfer-trash", true),
        ("notes.txt", false), ("#notes", false), ("a4913", false), (".xferignore", false), (".profile", false)
    ]

    @Test(arguments: defaultCases)
    func defaultsIgnoreEditorAndDesktopDebrisAndTheEnginesOwnFiles(_ path: String, _ ignored: Bool) {
        #expect(IgnoreRules().isIgnored(path, isDirectory: false) == ignored)
        #expect(SyncDirectory.isIgnored(String(path.split(separator: "/").last!)) == ignored)
    }

    @Test func aUserCanUnIgnoreADefaultButNotTheEnginesOwnNames() {
        let rules = Self.root(["!*.swp", "!.*"], defaults: true)
        #expect(!rules.isIgnored("a/.notes.swp", isDirectory: false))
        #expect(!rules.isIgnored(".DS_Store", isDirectory: false))
        #expect(rules.isIgnored(".notes.txt.xfer-2.partial", isDirectory: false))
        #expect(rules.isIgnored(".xfer/state", isDirectory: false))
        #expect(Self.root(["!.DS_Store"], defaults: true).isIgnored(".DS_Store", isDirectory: false) == false)
    }

    @Test func deeperFilesTakePrecedenceWithinTheirDirectory() {
        var rules = IgnoreRules(exclude: ["*.tmp", "!root.log"])
        rules.add("*.log\n/only-root\n!x.tmp\n", in: "")
        rules.add("!debug.log\n/here\nsub\n!y.tmp\n", in: "sub")
        rules.add("*.log\n", in: "sub/deeper")
        let expectations: [(String, Bool, Bool)] = [
            ("debug.log", false, true),
            ("other/debug.log", false, true),
            ("sub/debug.log", false, false),  // sub's `!` beats the root's `*.log`
            ("sub/x/debug.log", false, false),  // and applies below sub
            ("sub/deeper/debug.log", false, true),  // deeper still wins
            ("subway/debug.log", false, true),  // sub's rules are not subway's
            ("sub/here", false, true),  // anchored to sub
            ("sub/x/here", false, false),
            ("here", false, false),
            ("only-root", false, true),
            ("sub/only-root", false, false),
            ("sub", true, false),  // a file cannot ignore its own directory
            ("sub/sub", true, true),
            ("x.tmp", false, true),  // --exclude comes after the root file
            ("root.log", false, false),
            ("sub/y.tmp", false, false)  // a deeper file beats --exclude
        ]
        for (path, isDirectory, ignored) in expectations {
            #expect(rules.isIgnored(path, isDirectory: isDirectory) == ignored, "\(path)")
        }
        // The order the files are added in does not matter.
        var reversed = IgnoreRules(exclude: ["*.tmp", "!root.log"])
        reversed.add("*.log\n", in: "sub/deeper")
        reversed.add("!debug.log\n/here\nsub\n!y.tmp\n", in: "sub")
        reversed.add("*.log\n/only-root\n!x.tmp\n", in: "")
        for (path, isDirectory, ignored) in expectations {
            #expect(reversed.isIgnored(path, isDirectory: isDirectory) == ignored, "\(path)")
        }
    }

    @Test(arguments: ["", "   ", "# a comment", "trailing\\"])
    func anExcludeThatMatchesNothingIsRefused(_ pattern: String) {
        #expect { try IgnoreRules.validate(pattern) } throws: { ($0 as? XferError)?.code == .invalidConfiguration }
    }

    @Test func aPathologicalPatternStaysFast() {
        let text = String(repeating: "a", count: 200)
        let started = ContinuousClock.now
        #expect(!Self.root(["*a*a*a*a*a*a*a*a*a*b"]).isIgnored(text, isDirectory: false))
        #expect(
            !Self.root(["**/**/**/**/**/b"]).isIgnored(
                Array(repeating: "a", count: 60).joined(separator: "/"), isDirectory: false))
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    // MARK: Properties

    static let pool = [
        "*.o", "build/", "!keep.o", "a/**/b", "**/tmp", "/x", "x/*", "!x/y", "[ab]*", "?", "c/", "!c/",
        "d/**", "!d/e", "!*", "e", "!a", "b/c", "**", "!b/**", "*.c", "!/a", "y/"
    ]
    static let names = ["a", "b", "c", "d", "e", "x", "y", "tmp", "build", "keep.o", "m.o", "n.c"]

    static func randomRules(_ generator: inout SplitMix64) -> [String: String] {
        var files: [String: String] = [:]
        for directory in ["", "a", "x", "a/b"] where generator.next() % 2 == 0 || directory.isEmpty {
            let count = Int(generator.next() % 5)
            files[directory] = (0..<count).map { _ in pool[Int(generator.next() % UInt64(pool.count))] }.joined(
                separator: "\n")
        }
        return files
    }

    static func randomPath(_ generator: inout SplitMix64) -> String {
        (0...Int(generator.next() % 4)).map { _ in names[Int(generator.next() % UInt64(names.count))] }.joined(
            separator: "/")
    }

    @Test(arguments: 0..<20)
    func nothingInAnIgnoredDirectoryIsKept(seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        var rules = IgnoreRules()
        for (directory, text) in Self.randomRules(&generator) { rules.add(text, in: directory) }
        for _ in 0..<200 {
            let path = Self.randomPath(&generator)
            let child = path + "/" + Self.names[Int(generator.next() % UInt64(Self.names.count))]
            if rules.isIgnored(path, isDirectory: true) {
                #expect(rules.isIgnored(child, isDirectory: generator.next() % 2 == 0), "\(child)")
            }
            // An anchored rule in the path's own directory, added last, has the last word; its
            // `!` re-includes the path unless a parent directory is ignored.
            let parent = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? ""
            let name = String(path.split(separator: "/").last!)
            var last = rules
            last.add("/" + name, in: parent)
            #expect(last.isIgnored(path, isDirectory: false), "\(path)")
            var unignore = rules
            unignore.add("!/" + name, in: parent)
            #expect(
                unignore.isIgnored(path, isDirectory: false)
                    == (!parent.isEmpty && rules.isIgnored(parent, isDirectory: true)), "\(path)")
        }
    }

    @Test(arguments: 0..<8)
    func theWalkKeepsExactlyWhatTheRulesDoNotIgnore(seed: UInt64) throws {
        var generator = SplitMix64(seed: seed)
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-ignore-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        for _ in 0..<40 { try Files.write(root + "/" + Self.randomPath(&generator) + ".f", [1]) }
        let files = Self.randomRules(&generator)
        for (directory, text) in files {
            try Files.write(root + "/" + (directory.isEmpty ? "" : directory + "/") + ".xferignore", Array(text.utf8))
        }
        let exclude = [Self.pool[Int(generator.next() % UInt64(Self.pool.count))]]
        // The rules as a whole, from every rules file (present or inside an ignored directory).
        var rules = IgnoreRules(exclude: exclude)
        for (directory, text) in files { rules.add(text, in: directory) }
        let expected = try DirectoryWalker.walk(root).filter {
            !rules.isIgnored($0.relativePath, isDirectory: $0.kind == .directory)
        }
        #expect(Array(try IgnoreRules.walk(root, rules: IgnoreRules(exclude: exclude))) == expected)
    }
}
