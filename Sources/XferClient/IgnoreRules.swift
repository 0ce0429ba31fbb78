import XferCore

/// Which paths of a tree are never synced or pushed: gitignore(5) rules from `.xferignore`
/// files, `--exclude` patterns and built-in defaults. Pure: reading the files is
/// `IgnoreRules+Files.swift`'s job.
///
/// Precedence, lowest first (the last matching pattern decides, so a later `!` re-includes):
/// the built-in defaults; the root's `.xferignore`; root-level extras (`--exclude`); then each
/// deeper directory's `.xferignore`, which applies to its directory and below. A path inside an
/// ignored directory is ignored whatever any `!` says (git's rule: a file cannot be
/// re-included if a parent directory is excluded). xfer's own staging and state names are
/// always ignored, `!` or not.
public struct IgnoreRules: Sendable {
    /// The name of the per-directory rules file.
    public static let fileName = ".xferignore"

    /// The built-in patterns: editor swap, backup and lock files, desktop metadata.
    public static let defaultPatterns = [
        "*.swp", "*.swx", "*~", ".#*", "\\#*#", "4913",
        ".DS_Store", "Thumbs.db", "desktop.ini", "._*"
    ]

    /// The defaults alone.
    public static let defaults = IgnoreRules()

    /// Where a layer of patterns comes from; ranks layers of the same directory.
    enum Source: Int, Sendable {
        case defaults, file, extra
    }

    /// The patterns of one source, applying to `base` (relative, "" for the root) and below.
    struct Layer: Sendable {
        var base: String
        var depth: Int
        var source: Source
        var patterns: [IgnorePattern]
    }

    /// Layers in precedence order, lowest first.
    private(set) var layers: [Layer] = []

    /// The built-in defaults (unless `defaults` is false) and root-level extra patterns.
    /// - Parameters:
    ///   - exclude: Patterns (gitignore syntax) relative to the root, as `--exclude` gives them;
    ///     blank ones and comments are skipped.
    ///   - defaults: Whether the built-in patterns apply.
    public init(exclude: [String] = [], defaults: Bool = true) {
        if defaults {
            insert(
                Layer(
                    base: "", depth: 0, source: .defaults, patterns: Self.defaultPatterns.compactMap(IgnorePattern.init)
                ))
        }
        if !exclude.isEmpty {
            insert(Layer(base: "", depth: 0, source: .extra, patterns: exclude.compactMap(IgnorePattern.init)))
        }
    }

    /// Adds the rules of the `.xferignore` file of `directory`.
    /// - Parameters:
    ///   - contents: The file's text.
    ///   - directory: Its directory relative to the root (`/`-separated, "" for the root).
    public mutating func add(_ contents: String, in directory: String) {
        let lines = contents.split(separator: "\n", omittingEmptySubsequences: false)
        insert(
            Layer(
                base: directory, depth: Self.depth(of: directory), source: .file,
                patterns: lines.compactMap { IgnorePattern(String($0)) }))
    }

    /// Ignores everything in `directory` and below (its rules file exists but cannot be read:
    /// better to leave its files alone than to sync what the user meant to keep out).
    /// - Parameter directory: A directory relative to the root.
    public mutating func ignoreEverything(in directory: String) {
        insert(Layer(base: directory, depth: Self.depth(of: directory), source: .file, patterns: [IgnorePattern("*")!]))
    }

    /// Checks one `--exclude` pattern.
    /// - Parameter pattern: A pattern in gitignore syntax.
    /// - Throws: `invalid_configuration` if it can match nothing (blank, a comment, a lone
    ///   trailing backslash).
    public static func validate(_ pattern: String) throws {
        guard IgnorePattern(pattern) != nil else {
            throw XferError(
                .invalidConfiguration,
                "--exclude \"\(pattern)\" matches nothing (blank, a # comment or a trailing \\); escape a leading # as \\#"
            )
        }
    }

    /// Whether xfer never syncs a path with this component, whatever the rules: its staging
    /// copies and state (names starting with "." that contain ".xfer-", and `.xfer`).
    /// - Parameter name: One path component.
    /// - Returns: Whether it is the engine's own.
    public static func isEngineName(_ name: some StringProtocol) -> Bool {
        name == ".xfer" || (name.hasPrefix(".") && name.contains(".xfer-"))
    }

    /// Whether `path` is ignored: it or one of its parent directories is.
    /// - Parameters:
    ///   - path: Relative to the root, `/`-separated, without leading or trailing `/`.
    ///   - isDirectory: Whether the path is a directory (parents always are).
    /// - Returns: Whether it is left out.
    public func isIgnored(_ path: String, isDirectory: Bool) -> Bool {
        var parent = path.startIndex
        while let slash = path[parent...].firstIndex(of: "/") {
            if isIgnoredItself(String(path[..<slash]), isDirectory: true) { return true }
            parent = path.index(after: slash)
        }
        return isIgnoredItself(path, isDirectory: isDirectory)
    }

    /// Whether `path` is ignored by its own rules, its parent directories taken as not ignored:
    /// what a walk that never enters an ignored directory asks of each entry.
    /// - Parameters:
    ///   - path: Relative to the root, `/`-separated.
    ///   - isDirectory: Whether the path is a directory.
    /// - Returns: Whether it is left out.
    public func isIgnoredItself(_ path: String, isDirectory: Bool) -> Bool {
        let name = path.lastIndex(of: "/").map { path[path.index(after: $0)...] } ?? path[...]
        if Self.isEngineName(name) { return true }
        let whole = Array(path.unicodeScalars)
        for layer in layers.reversed() {
            let relative: [Unicode.Scalar]
            if layer.base.isEmpty {
                relative = whole
            } else if path.hasPrefix(layer.base + "/") {
                relative = Array(whole.dropFirst(layer.base.unicodeScalars.count + 1))
            } else {
                continue
            }
            if let pattern = layer.patterns.last(where: { $0.matches(relative, isDirectory: isDirectory) }) {
                return !pattern.negated
            }
        }
        return false
    }

    private mutating func insert(_ layer: Layer) {
        let index =
            layers.firstIndex { ($0.depth, $0.source.rawValue) > (layer.depth, layer.source.rawValue) }
            ?? layers.endIndex
        layers.insert(layer, at: index)
    }

    private static func depth(of directory: String) -> Int {
        directory.isEmpty ? 0 : directory.split(separator: "/").count
    }
}
