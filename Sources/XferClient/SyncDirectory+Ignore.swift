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

    /// A package that holds ignored files is not removed for a remote deletion: its ignored
    /// files (never pushed, so on no server) would go with it. It stays, pending, until they
    /// are moved away.
    /// - Parameter plan: A document's plan.
    /// - Returns: The plan, with a local removal of such a package turned into nothing.
    func keepingIgnoredFiles(_ plan: Plan) -> Plan {
        guard [.deleteLocal, .exclude].contains(plan.action), let local = plan.local, local.kind == .package else {
            return plan
        }
        let everything = (try? DirectoryWalker.walk(local.path).count) ?? 0
        let synced = (try? IgnoreRules.walk(local.path).count) ?? 0
        guard everything != synced else { return plan }
        var kept = plan
        kept.action = .none
        return kept
    }
}
