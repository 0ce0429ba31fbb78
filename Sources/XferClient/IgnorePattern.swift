import XferCore

/// One line of a `.xferignore` file (or one `--exclude`), parsed as git parses a line of
/// `.gitignore` (gitignore(5)): `!` negates, a trailing `/` matches directories only, a slash
/// anywhere else anchors the pattern to its file's directory, and the rest is a wildmatch glob
/// (`*`, `?`, `[…]`, `**`, `\` escapes).
public struct IgnorePattern: Sendable, Hashable, CustomStringConvertible {
    /// The line as written (without its line ending).
    public let line: String
    /// `!pattern`: a match re-includes the path.
    public let negated: Bool
    /// `pattern/`: matches directories only.
    public let directoryOnly: Bool
    /// The pattern has a slash other than at its end: it is matched against the whole path
    /// relative to its file's directory, not against the last component.
    public let anchored: Bool
    /// The glob, without `!`, leading and trailing `/`.
    let glob: [Unicode.Scalar]
    /// For a glob that is `*` then plain characters (`*.swp`): those characters, matched as a
    /// suffix without the general matcher (most patterns are of this shape).
    private let suffix: [Unicode.Scalar]?
    /// For a glob of plain characters only (`.DS_Store`): the name itself.
    private let literal: [Unicode.Scalar]?

    /// Parses one line.
    /// - Parameter line: A line of a `.xferignore` file, without its newline.
    /// - Returns: `nil` for a line that matches nothing: blank, a `#` comment, only `!` or `/`,
    ///   or ending in a lone `\` (which git treats as never matching).
    public init?(_ line: String) {
        self.line = line
        var scalars = Array(line.unicodeScalars)
        if scalars.last == "\r" { scalars.removeLast() }
        guard let first = scalars.first, first != "#" else { return nil }
        guard let trimmed = Self.trimmingTrailingSpaces(scalars) else { return nil }
        scalars = trimmed
        negated = scalars.first == "!"
        if negated { scalars.removeFirst() }
        directoryOnly = scalars.last == "/"
        if directoryOnly { scalars.removeLast() }
        anchored = scalars.contains("/")
        if scalars.first == "/" { scalars.removeFirst() }
        guard !scalars.isEmpty else { return nil }
        glob = scalars
        let special: Set<Unicode.Scalar> = ["*", "?", "[", "\\", "/"]
        literal = scalars.contains(where: special.contains) ? nil : scalars
        suffix =
            scalars.first == "*" && !scalars.dropFirst().contains(where: special.contains)
            ? Array(scalars.dropFirst()) : nil
    }

    public var description: String { line }

    /// Drops unescaped trailing spaces (`foo\ ` keeps its escaped space).
    /// - Returns: `nil` if the pattern ends in a lone backslash.
    static func trimmingTrailingSpaces(_ scalars: [Unicode.Scalar]) -> [Unicode.Scalar]? {
        var end = 0
        var index = 0
        while index < scalars.count {
            if scalars[index] == "\\" {
                guard index + 1 < scalars.count else { return nil }
                index += 2
                end = index
                continue
            }
            if scalars[index] != " " { end = index + 1 }
            index += 1
        }
        return Array(scalars[..<end])
    }

    /// Whether the pattern matches a path (ignoring `negated`).
    /// - Parameters:
    ///   - path: The path relative to the pattern's file's directory, `/`-separated.
    ///   - isDirectory: Whether the path is a directory.
    /// - Returns: Whether it matches.
    public func matches(_ path: String, isDirectory: Bool) -> Bool {
        matches(Array(path.unicodeScalars), isDirectory: isDirectory)
    }

    /// The same, for a path already split into scalars (one split serves every pattern).
    func matches(_ scalars: [Unicode.Scalar], isDirectory: Bool) -> Bool {
        if directoryOnly && !isDirectory { return false }
        let start = anchored ? 0 : (scalars.lastIndex(of: "/").map { $0 + 1 } ?? 0)
        let name = scalars[start...]
        if let literal { return name.elementsEqual(literal) }
        if let suffix { return name.count >= suffix.count && name.suffix(suffix.count).elementsEqual(suffix) }
        var matcher = Wildmatch(pattern: glob, text: Array(name))
        return matcher.matches()
    }
}
