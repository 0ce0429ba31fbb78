import XferCore
import XferProtocol

/// What a mount shows, as inodes: the container's documents as the sync folder lays them out
/// (`Documents/…`, `Data/…`), directories implied by the documents below them, and each
/// package's entries once its manifest is known. Pure: the file system asks it and tells it
/// what the server said; it does no I/O.
///
/// An inode's number stays with its path for the mount's life, so a document replaced by a
/// newer version keeps its number and the kernel is told to drop what it cached
/// (``Invalidation``).
public struct MountTree: Sendable {
    /// The root directory's inode (FUSE's).
    public static let root: UInt64 = 1

    /// What a node is to the kernel.
    public enum Kind: Sendable, Hashable {
        case directory, file, symlink
    }

    /// Where a node's content comes from.
    public enum Origin: Sendable, Hashable {
        /// The root, or a directory there only because documents lie below it.
        case implied
        /// A document's current version: a file or symlink (content in its manifest), a package
        /// (entries in its manifest) or a directory document.
        case document(DocumentInfo)
        /// Entry `index` of the manifest of the package at inode `package`.
        case entry(package: UInt64, index: Int)
    }

    /// One file, directory or symlink.
    public struct Node: Sendable, Hashable {
        public var name: String
        public var parent: UInt64
        public var kind: Kind
        public var mode: UInt32
        public var size: Int64
        public var mtimeNanoseconds: Int64
        public var origin: Origin
        /// A directory's children by name.
        public var children: [String: UInt64] = [:]
    }

    /// Something the kernel may have cached that changed.
    public enum Invalidation: Sendable, Hashable {
        /// The name `name` in directory `parent` (added, removed or now another inode).
        case entry(parent: UInt64, name: String)
        /// An inode's attributes and cached data.
        case inode(UInt64)
    }

    public private(set) var nodes: [UInt64: Node]
    /// Every path ever shown, with its inode number.
    private var numbers: [String: UInt64] = ["": MountTree.root]
    private var nextNumber = MountTree.root + 1
    /// The newest version seen of each document path (deletions included), so a listing read
    /// before a change cannot undo it.
    private var versions: [String: Int64] = [:]
    /// The manifests of packages whose entries are shown, by the package's inode.
    public private(set) var manifests: [UInt64: Manifest] = [:]
    /// The time implied directories show.
    let mountedAt: Int64

    /// An empty tree: the root alone.
    public init(mountedAtNanoseconds: Int64) {
        mountedAt = mountedAtNanoseconds
        nodes = [
            Self.root: Node(
                name: "", parent: Self.root, kind: .directory, mode: 0o755, size: 0,
                mtimeNanoseconds: mountedAtNanoseconds, origin: .implied)
        ]
    }

    /// The node at `number`.
    public subscript(number: UInt64) -> Node? { nodes[number] }

    /// The child `name` of directory `parent`.
    public func lookup(_ parent: UInt64, _ name: String) -> (number: UInt64, node: Node)? {
        guard let number = nodes[parent]?.children[name], let node = nodes[number] else { return nil }
        return (number, node)
    }

    /// A directory's children in name order.
    public func children(of directory: UInt64) -> [(name: String, number: UInt64, kind: Kind)] {
        guard let node = nodes[directory] else { return [] }
        return node.children.sorted { PathOrder.precedes($0.key, $1.key) }.compactMap { name, number in
            nodes[number].map { (name, number, $0.kind) }
        }
    }

    /// The path of a node, from the root.
    public func path(of number: UInt64) -> String {
        var parts: [String] = []
        var current = number
        while current != Self.root, let node = nodes[current] {
            parts.append(node.name)
            current = node.parent
        }
        return parts.reversed().joined(separator: "/")
    }

    /// Whether `number` is a package whose entries are not shown yet.
    public func needsManifest(_ number: UInt64) -> DocumentInfo? {
        guard let node = nodes[number], case .document(let info) = node.origin, info.kind == .package,
            manifests[number] == nil
        else { return nil }
        return info
    }

    // MARK: Changes

    /// Takes what the server says of a document (a listing's row or a change): a current
    /// version shows (replacing an older one), a deletion removes it; an older version than one
    /// seen, and versions that are not current (uploads, conflicts, superseded), change nothing.
    @discardableResult
    public mutating func apply(_ info: DocumentInfo) -> [Invalidation] {
        let path = info.path.value
        guard info.version > versions[path] ?? 0 else { return [] }
        switch info.state {
        case .current:
            versions[path] = info.version
            return show(info)
        case .deleted:
            versions[path] = info.version
            return remove(path)
        default:
            return []
        }
    }

    /// Shows the entries of package `number`'s manifest, if it is still the version `version`.
    /// - Returns: `false` if the package changed meanwhile (the manifest is not taken).
    @discardableResult
    public mutating func fill(_ number: UInt64, with manifest: Manifest, version: Int64) -> Bool {
        guard let node = nodes[number], case .document(let info) = node.origin, info.kind == .package,
            info.version == version
        else { return false }
        manifests[number] = manifest
        let base = path(of: number)
        for index in manifest.entries.indices {
            let entryPath = manifest.entries.path(at: index)
            let kind = manifest.entries.kind(at: index)
            let parent = directory(base + "/" + Self.parentPath(entryPath), implied: node.mtimeNanoseconds)
            let size = kind == .directory ? 0 : manifest.entries.size(at: index)
            place(
                Node(
                    name: Self.lastName(entryPath), parent: parent, kind: Self.kind(kind),
                    mode: manifest.entries.mode(at: index), size: size,
                    mtimeNanoseconds: manifest.entries.mtimeNanoseconds(at: index),
                    origin: .entry(package: number, index: index)), at: base + "/" + entryPath)
        }
        return true
    }

    private mutating func show(_ info: DocumentInfo) -> [Invalidation] {
        let path = info.path.value
        let parent = directory(Self.parentPath(path), implied: info.mtimeNs)
        let number = numbers[path]
        let old = number.flatMap { nodes[$0] }
        if let number, old != nil, old?.kind != Self.kind(info) || Self.isPackage(old) {
            // Another kind of node, or a package's new version: what was below goes.
            removeChildren(of: number)
        }
        let placed = place(
            Node(
                name: Self.lastName(path), parent: parent, kind: Self.kind(info),
                mode: info.mode == 0 ? Self.defaultMode(info) : info.mode, size: info.kind == .file ? info.size : 0,
                mtimeNanoseconds: info.mtimeNs, origin: .document(info),
                children: info.kind == .directory ? old?.children ?? [:] : [:]), at: path)
        guard old != nil else { return [.entry(parent: parent, name: Self.lastName(path))] }
        return [.inode(placed), .entry(parent: parent, name: Self.lastName(path))]
    }

    private mutating func remove(_ path: String) -> [Invalidation] {
        guard let number = numbers[path], let node = nodes[number] else { return [] }
        var invalidations: [Invalidation] = [.entry(parent: node.parent, name: node.name), .inode(number)]
        if node.kind == .directory, case .document = node.origin, !node.children.isEmpty {
            // A directory document with documents still below it stays, as an implied directory.
            nodes[number]?.origin = .implied
            return [.inode(number)]
        }
        removeChildren(of: number)
        nodes[number] = nil
        nodes[node.parent]?.children[node.name] = nil
        invalidations += pruneImplied(node.parent)
        return invalidations
    }

    /// Removes implied directories left empty, upwards from `number`.
    private mutating func pruneImplied(_ number: UInt64) -> [Invalidation] {
        var invalidations: [Invalidation] = []
        var current = number
        while current != Self.root, let node = nodes[current], node.children.isEmpty, node.origin == .implied {
            nodes[current] = nil
            nodes[node.parent]?.children[node.name] = nil
            invalidations.append(.entry(parent: node.parent, name: node.name))
            current = node.parent
        }
        return invalidations
    }

    private mutating func removeChildren(of number: UInt64) {
        manifests[number] = nil
        guard let children = nodes[number]?.children else { return }
        for child in children.values {
            removeChildren(of: child)
            nodes[child] = nil
        }
        nodes[number]?.children = [:]
    }

    /// The directory at `path`, made (as implied, with `mtime`) with its parents if missing.
    private mutating func directory(_ path: String, implied mtime: Int64) -> UInt64 {
        let path = path.hasSuffix("/") ? String(path.dropLast()) : path
        if let number = numbers[path], let node = nodes[number], node.kind == .directory { return number }
        let parent = directory(Self.parentPath(path), implied: mtime)
        return place(
            Node(
                name: Self.lastName(path), parent: parent, kind: .directory, mode: 0o755, size: 0,
                mtimeNanoseconds: mtime, origin: .implied), at: path)
    }

    /// Puts `node` at `path` (keeping the path's number), under its parent.
    @discardableResult
    private mutating func place(_ node: Node, at path: String) -> UInt64 {
        let number = numbers[path] ?? nextNumber
        if numbers[path] == nil {
            numbers[path] = number
            nextNumber += 1
        }
        var node = node
        if node.kind == .directory, node.children.isEmpty, let old = nodes[number], old.kind == .directory,
            !Self.isPackage(old)
        {
            node.children = old.children
        }
        nodes[number] = node
        nodes[node.parent]?.children[node.name] = number
        return number
    }

    // MARK: Rules

    private static func isPackage(_ node: Node?) -> Bool {
        guard case .document(let info)? = node?.origin else { return false }
        return info.kind == .package
    }

    /// A file document with content but no chunks is a symlink (its target is its content).
    static func kind(_ info: DocumentInfo) -> Kind {
        switch info.kind {
        case .package, .directory: return .directory
        case .file: return info.chunks == 0 && info.size > 0 ? .symlink : .file
        }
    }

    static func kind(_ kind: EntryKind) -> Kind {
        switch kind {
        case .file: return .file
        case .directory: return .directory
        case .symlink: return .symlink
        }
    }

    static func defaultMode(_ info: DocumentInfo) -> UInt32 {
        kind(info) == .file ? 0o644 : 0o755
    }

    static func parentPath(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    static func lastName(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }
}
