import XferCore
import XferProtocol

/// Packages changed through the mount: shown as their staging directory holds them
/// (``Origin/stagedPackage(base:)`` above ``Origin/local`` nodes) until their upload settles
/// them; a package is one document, so everything inside it goes up together.
extension MountTree {
    /// One file, directory or symlink a package's staging directory holds.
    public struct LocalEntry: Sendable, Hashable {
        /// Its path inside the package.
        public var path: String
        public var kind: Kind
        public var mode: UInt32
        public var size: Int64
        public var mtimeNanoseconds: Int64

        public init(path: String, kind: Kind, mode: UInt32, size: Int64, mtimeNanoseconds: Int64) {
            self.path = path
            self.kind = kind
            self.mode = mode
            self.size = size
            self.mtimeNanoseconds = mtimeNanoseconds
        }
    }

    /// The package `number` is or lies inside, shown from the server or changed here.
    public func package(containing number: UInt64) -> UInt64? {
        var current = number
        while current != Self.root, let node = nodes[current] {
            if Self.isPackage(node) { return current }
            if case .stagedPackage = node.origin { return current }
            current = node.parent
        }
        return nil
    }

    /// The version package `number` is changed here on (`nil`: it is not being changed here).
    public func packageBase(_ number: UInt64) -> Int64? {
        guard case .stagedPackage(let base)? = nodes[number]?.origin else { return nil }
        return base
    }

    /// Shows package `number` as its staging directory holds it (`entries`, any order), based
    /// on version `base`. A path shown before with the same kind keeps its inode (a file open
    /// stays that file); the rest go, and what is new is added.
    @discardableResult
    public mutating func stagePackage(_ number: UInt64, base: Int64, entries: [LocalEntry]) -> [Invalidation] {
        guard nodes[number]?.kind == .directory else { return [] }
        let root = path(of: number)
        let wanted = Dictionary(entries.map { ($0.path, $0.kind) }, uniquingKeysWith: { first, _ in first })
        var invalidations: [Invalidation] = []
        for (inside, child) in descendants(of: number) where wanted[inside] != nodes[child]?.kind {
            guard let old = nodes[child] else { continue }  // below one that went already
            invalidations.append(.entry(parent: old.parent, name: old.name))
            retire(child, path: root + "/" + inside)
        }
        manifests[number] = nil
        nodes[number]?.origin = .stagedPackage(base: base)
        for entry in entries.sorted(by: { $0.path < $1.path }) {  // a directory before what is in it
            let (placed, _) = addLocal(
                root + "/" + entry.path, kind: entry.kind, mode: entry.mode, size: entry.size,
                mtimeNanoseconds: entry.mtimeNanoseconds)
            invalidations.append(.inode(placed))
        }
        return invalidations
    }

    /// Shows a file, directory or symlink made at `path` inside a package changed here.
    /// - Returns: Its inode, and the name the kernel should look up again.
    @discardableResult
    public mutating func addLocal(_ path: String, kind: Kind, mode: UInt32, size: Int64, mtimeNanoseconds: Int64)
        -> (number: UInt64, invalidations: [Invalidation])
    {
        let parent = directory(Self.parentPath(path), implied: mtimeNanoseconds)
        let number = place(
            Node(
                name: Self.lastName(path), parent: parent, kind: kind, mode: mode, size: kind == .directory ? 0 : size,
                mtimeNanoseconds: mtimeNanoseconds, origin: .local), at: path)
        return (number, [.entry(parent: parent, name: Self.lastName(path))])
    }

    /// Moves what is at `from` (with what is below it) to `to`, inside a package changed here,
    /// under its own inodes; what was at `to` goes.
    @discardableResult
    public mutating func moveLocal(_ from: String, to: String) -> [Invalidation] {
        guard let number = numbers[from], var node = nodes[number] else { return [] }
        let below = descendants(of: number)
        if let target = numbers[to], target != number { retire(target, path: to) }
        let old = Invalidation.entry(parent: node.parent, name: node.name)
        nodes[node.parent]?.children[node.name] = nil
        numbers[from] = nil
        for (inside, _) in below { numbers[from + "/" + inside] = nil }
        node.parent = directory(Self.parentPath(to), implied: node.mtimeNanoseconds)
        node.name = Self.lastName(to)
        nodes[number] = node
        numbers[to] = number
        for (inside, child) in below { numbers[to + "/" + inside] = child }
        nodes[node.parent]?.children[node.name] = number
        return [old, .entry(parent: node.parent, name: node.name)]
    }

    /// Settles a package changed here with what its upload made (`ours`): the server's current
    /// version shows (ours; the other if ours became a conflict version; a newer one the feed
    /// told of meanwhile), its entries read anew from its manifest.
    @discardableResult
    public mutating func settlePackage(_ ours: DocumentInfo, current: DocumentInfo) -> [Invalidation] {
        let path = ours.path.value
        guard let number = numbers[path], case .stagedPackage? = nodes[number]?.origin else { return apply(current) }
        let current = newest(path, current)
        guard current.state == .current else { return remove(path) }
        return show(current)
    }

    /// A package changed here whose version `version` was uploaded while it changed again: its
    /// next upload is based on that version.
    public mutating func rebasePackage(_ path: String, on version: Int64) {
        guard let number = numbers[path], case .stagedPackage? = nodes[number]?.origin else { return }
        nodes[number]?.origin = .stagedPackage(base: version)
        versions[path] = max(versions[path] ?? 0, version)
    }

    /// Every node below directory `number`, by its path relative to it, parents first.
    func descendants(of number: UInt64) -> [(path: String, number: UInt64)] {
        var found: [(path: String, number: UInt64)] = []
        var pending: [(String, UInt64)] = [("", number)]
        while let (prefix, directory) = pending.popLast() {
            for (name, child) in nodes[directory]?.children ?? [:] {
                let inside = prefix.isEmpty ? name : prefix + "/" + name
                found.append((inside, child))
                if nodes[child]?.kind == .directory { pending.append((inside, child)) }
            }
        }
        return found
    }
}
