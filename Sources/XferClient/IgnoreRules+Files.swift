import Foundation
import XferCore

/// Reading `.xferignore` files from disk into ``IgnoreRules``, and walking a tree with them.
extension IgnoreRules {
    /// Adds the rules of `absolute/.xferignore`, if that is a regular file (a symlink is not
    /// followed, as git no longer follows a symlinked `.gitignore`). A rules file that exists
    /// but cannot be read ignores everything in its directory: nothing there is synced or removed.
    /// - Parameters:
    ///   - absolute: The directory on disk.
    ///   - relative: The same directory relative to the root ("" for the root).
    public mutating func load(directory absolute: String, as relative: String) {
        let path = absolute + "/" + Self.fileName
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno != ENOENT && errno != ENOTDIR { ignoreEverything(in: relative) }
            return
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else { return }
        guard let data = FileManager.default.contents(atPath: path) else {
            ignoreEverything(in: relative)
            return
        }
        add(String(decoding: data, as: UTF8.self), in: relative)
    }

    /// Adds the rules files of `root` and of every directory between it and `path`: all
    /// the files that can decide about `path`.
    /// - Parameters:
    ///   - path: A path relative to `root`.
    ///   - root: The directory the rules are relative to.
    public mutating func load(along path: String, under root: String) {
        load(directory: root, as: "")
        var relative = ""
        for component in path.split(separator: "/").dropLast() {
            relative = relative.isEmpty ? String(component) : relative + "/" + component
            load(directory: root + "/" + relative, as: relative)
        }
    }

    /// Lists the tree under `root` without what the rules ignore: ignored directories are not
    /// entered, and each entered directory's `.xferignore` joins the rules.
    /// - Parameters:
    ///   - root: A directory.
    ///   - rules: The rules to start from (the defaults, `--exclude` patterns).
    /// - Returns: The entries kept, in the order of ``DirectoryWalker/walk(_:)``.
    /// - Throws: `not_found` or `io` from the walk.
    public static func walk(_ root: String, rules: IgnoreRules = .defaults) throws -> TreeEntries {
        var rules = rules
        rules.load(directory: root, as: "")
        let base = root.hasSuffix("/") && root.count > 1 ? String(root.dropLast()) : root
        return try DirectoryWalker.walk(root) { entry in
            let isDirectory = entry.kind == .directory
            guard !rules.isIgnoredItself(entry.relativePath, isDirectory: isDirectory) else { return false }
            if isDirectory { rules.load(directory: base + "/" + entry.relativePath, as: entry.relativePath) }
            return true
        }
    }
}
