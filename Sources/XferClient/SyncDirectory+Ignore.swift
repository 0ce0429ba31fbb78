import XferCore

extension SyncDirectory {
    /// Whether a path of the directory is ignored by the rules on disk now: the defaults,
    /// ``SyncOptions/exclude`` and every `.xferignore` from the root down to the path's
    /// parent. Reads those files each time (the watcher asks once per event).
    /// - Parameters:
    ///   - path: Relative to the directory, `/`-separated.
    ///   - isDirectory: Whether it is a directory.
    /// - Returns: Whether a change there is of no interest to sync.
    public func isIgnored(_ path: String, isDirectory: Bool) -> Bool {
        var rules = IgnoreRules(exclude: options.exclude)
        rules.load(along: path, under: directory)
        return rules.isIgnored(path, isDirectory: isDirectory)
    }
}
