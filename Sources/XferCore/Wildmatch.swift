// git's wildmatch, shared by `.xferignore` patterns (XferClient) and document queries
// (XferProtocol), so a glob means the same wherever it is matched.

/// git's wildmatch with `WM_PATHNAME`: `*`, `?` and classes never match `/`; `**` as a whole
/// component matches any number of components (`**/x`, `x/**`, `x/**/y`); elsewhere `**` is `*`.
/// Memoised on (pattern index, text index), so no pattern costs more than their product.
public struct Wildmatch {
    let pattern: [Unicode.Scalar]
    let text: [Unicode.Scalar]
    private var memo: [Int8]

    public init(pattern: [Unicode.Scalar], text: [Unicode.Scalar]) {
        self.pattern = pattern
        self.text = text
        memo = Array(repeating: -1, count: (pattern.count + 1) * (text.count + 1))
    }

    public mutating func matches() -> Bool { match(0, 0) }

    private mutating func match(_ p: Int, _ t: Int) -> Bool {
        let key = p * (text.count + 1) + t
        if memo[key] >= 0 { return memo[key] == 1 }
        let result = compute(p, t)
        memo[key] = result ? 1 : 0
        return result
    }

    private mutating func compute(_ p: Int, _ t: Int) -> Bool {
        guard p < pattern.count else { return t == text.count }
        switch pattern[p] {
        case "*":
            var end = p
            while end < pattern.count && pattern[end] == "*" { end += 1 }
            let wholeComponent =
                end - p >= 2 && (p == 0 || pattern[p - 1] == "/")
                && (end == pattern.count || pattern[end] == "/")
            if wholeComponent {
                if end == pattern.count { return true }  // `x/**`: everything below
                // `**/`: zero components, or any run of text that ends just before a `/`.
                if match(end + 1, t) { return true }
                for k in t..<text.count where text[k] == "/" && match(end + 1, k + 1) { return true }
                return false
            }
            // A plain `*`: any run without `/`.
            var k = t
            while true {
                if match(end, k) { return true }
                guard k < text.count, text[k] != "/" else { return false }
                k += 1
            }
        case "?":
            guard t < text.count, text[t] != "/" else { return false }
            return match(p + 1, t + 1)
        case "[":
            guard t < text.count, text[t] != "/",
                let (matched, next) = Self.matchClass(pattern, from: p, text[t]), matched
            else { return false }
            return match(next, t + 1)
        case "\\":
            guard p + 1 < pattern.count, t < text.count, text[t] == pattern[p + 1] else { return false }
            return match(p + 2, t + 1)
        default:
            guard t < text.count, text[t] == pattern[p] else { return false }
            return match(p + 1, t + 1)
        }
    }

    /// Matches `c` against the class that opens at `pattern[start]` (`[`).
    /// - Returns: Whether it matched and the index after the class; `nil` for an unterminated
    ///   class or an unknown `[:name:]` (git: the pattern never matches).
    public static func matchClass(_ pattern: [Unicode.Scalar], from start: Int, _ c: Unicode.Scalar) -> (Bool, Int)? {
        GlobClass.parse(pattern, from: start).map { ($0.class.contains(c), $0.next) }
    }

    /// The POSIX character classes git's wildmatch knows (ASCII, as in the C locale).
    public static let posixClasses: [String: @Sendable (Unicode.Scalar) -> Bool] = [
        "alnum": { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) },
        "alpha": { $0.isASCII && $0.properties.isAlphabetic },
        "blank": { $0 == " " || $0 == "\t" },
        "cntrl": { $0.value < 0x20 || $0.value == 0x7f },
        "digit": { ("0"..."9").contains($0) },
        "graph": { $0.value > 0x20 && $0.value < 0x7f },
        "lower": { ("a"..."z").contains($0) },
        "print": { $0.value >= 0x20 && $0.value < 0x7f },
        "punct": { $0.value > 0x20 && $0.value < 0x7f && !$0.properties.isAlphabetic && !("0"..."9").contains($0) },
        "space": { [" ", "\t", "\n", "\r", "\u{0B}", "\u{0C}"].contains($0) },
        "upper": { ("A"..."Z").contains($0) },
        "xdigit": { ("0"..."9").contains($0) || ("a"..."f").contains($0) || ("A"..."F").contains($0) }
    ]
}

/// One bracket expression of a glob (`[a-c]`, `[!x]`, `[[:digit:]_]`), read as git's wildmatch
/// reads it: `!` or `^` first negates, a `]` first is a member, `\\` escapes, `a-z` is a range,
/// `[:name:]` a POSIX class, a `[:` with no `:` just before the next `]` a plain `[`.
public struct GlobClass: Sendable {
    public var negated = false
    var ranges: [ClosedRange<UInt32>] = []
    var named: [@Sendable (Unicode.Scalar) -> Bool] = []

    /// Whether `c` is in the class (after negation).
    public func contains(_ c: Unicode.Scalar) -> Bool {
        let member = ranges.contains { $0.contains(c.value) } || named.contains { $0(c) }
        return member != negated
    }

    /// Reads the class that opens at `pattern[start]` (`[`).
    /// - Returns: The class and the index after its `]`; `nil` for an unterminated class or an
    ///   unknown `[:name:]`, which git's wildmatch takes as a pattern that never matches.
    public static func parse(_ pattern: [Unicode.Scalar], from start: Int) -> (class: GlobClass, next: Int)? {
        var result = GlobClass()
        var i = start + 1
        if i < pattern.count && (pattern[i] == "!" || pattern[i] == "^") {
            result.negated = true
            i += 1
        }
        var first = true
        while i < pattern.count {
            var low = pattern[i]
            if low == "]" && !first { return (result, i + 1) }
            first = false
            if low == "[" && i + 1 < pattern.count && pattern[i + 1] == ":" {
                // As git: up to the next `]`; a `:` just before it makes a class name.
                guard let close = (i + 2..<pattern.count).first(where: { pattern[$0] == "]" }) else { return nil }
                if close - 1 >= i + 2 && pattern[close - 1] == ":" {
                    let name = String(String.UnicodeScalarView(pattern[(i + 2)..<(close - 1)]))
                    guard let test = Wildmatch.posixClasses[name] else { return nil }
                    result.named.append(test)
                    i = close + 1
                    continue
                }
                result.ranges.append(low.value...low.value)  // a plain `[`; the `:` is read next
                i += 1
                continue
            }
            if low == "\\" {
                i += 1
                guard i < pattern.count else { return nil }
                low = pattern[i]
            }
            var high = low
            if i + 2 < pattern.count && pattern[i + 1] == "-" && pattern[i + 2] != "]" {
                i += 2
                high = pattern[i]
                if high == "\\" {
                    i += 1
                    guard i < pattern.count else { return nil }
                    high = pattern[i]
                }
            }
            if low.value <= high.value { result.ranges.append(low.value...high.value) }
            i += 1
        }
        return nil
    }
}
