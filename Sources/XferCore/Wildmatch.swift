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
            let wholeComponent = end - p >= 2 && (p == 0 || pattern[p - 1] == "/")
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
                  let (matched, next) = Self.matchClass(pattern, from: p, text[t]), matched else { return false }
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
    ///   class (git: the pattern never matches).
    public static func matchClass(_ pattern: [Unicode.Scalar], from start: Int, _ c: Unicode.Scalar) -> (Bool, Int)? {
        var i = start + 1
        var negate = false
        if i < pattern.count && (pattern[i] == "!" || pattern[i] == "^") {
            negate = true
            i += 1
        }
        var matched = false
        var first = true
        while i < pattern.count {
            var low = pattern[i]
            if low == "]" && !first { return (matched != negate, i + 1) }
            first = false
            if low == "[" && i + 1 < pattern.count && pattern[i + 1] == ":" {
                // [:name:]
                if let close = (i + 2..<pattern.count).first(where: { pattern[$0] == ":" && $0 + 1 < pattern.count && pattern[$0 + 1] == "]" }) {
                    let name = String(String.UnicodeScalarView(pattern[(i + 2)..<close]))
                    guard let test = posixClasses[name] else { return nil }  // git: an unknown class never matches
                    if test(c) { matched = true }
                    i = close + 2
                    continue
                }
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
            if low.value <= c.value && c.value <= high.value { matched = true }
            i += 1
        }
        return nil
    }

    /// The POSIX character classes git's wildmatch knows (ASCII, as in the C locale).
    static let posixClasses: [String: @Sendable (Unicode.Scalar) -> Bool] = [
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
        "xdigit": { ("0"..."9").contains($0) || ("a"..."f").contains($0) || ("A"..."F").contains($0) },
    ]
}
