import XferCore
import XferProtocol

/// What a mount shows, as inodes: the container's documents as the sync folder lays them out
/// (`Documents/…`, `Data/…`), directories implied by the documents below them, and each
/// package's entries once its manifest is known. Pure: the file system asks it and tells it
/// what the server said; it does no I/O.
///
/// A directory's inode number stays with its path for the mount's life. A file's stays with its
/// version: a new version is a new inode, as a pull's atomic replace makes one, so a reader that
/// opened the old one keeps reading it, page cache and all, while the name shows the new one.
/// Replaced and removed nodes are kept (``retired``) until the kernel forgets them, and the
/// kernel is told which names changed (``Invalidation``).
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
        /// A file written here whose version is not on the server yet (``stage(_:mode:size:mtimeNanoseconds:)``),
        /// based on version `base` (`nil`: a new document).
        case staged(base: Int64?)
        /// A package being changed here (MountTree+Packages), based on version `base`: what is
        /// below it is ``local`` until its upload settles it.
        case stagedPackage(base: Int64)
        /// A file, directory or symlink inside a package being changed here: it is in the
        /// package's staging directory.
        case local
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
        /// Whether kind, size, mode and time are the document's own; `false` until its
        /// manifest is read in an end-to-end encrypted container (``sealedAttributes``).
        public var revealed = true

        /// Whether it was written here and is not on the server yet.
        public var isStaged: Bool {
            switch origin {
            case .staged, .stagedPackage: return true
            default: return false
            }
        }

        /// Whether its bytes are written here: a staged file, or one in a package changed here.
        public var isWritten: Bool {
            switch origin {
            case .staged, .local: return true
            default: return false
            }
        }
    }

    /// Something the kernel may have cached that changed.
    public enum Invalidation: Sendable, Hashable {
        /// The name `name` in directory `parent` (added, removed or now another inode).
        case entry(parent: UInt64, name: String)
        /// An inode's attributes and cached data.
        case inode(UInt64)
    }

    public internal(set) var nodes: [UInt64: Node]
    /// Nodes no longer in the tree that the kernel may still hold (an open file, a cached inode).
    public private(set) var retired: [UInt64: Node] = [:]
    /// Every path ever shown, with its inode number.
    var numbers: [String: UInt64] = ["": MountTree.root]
    private var nextNumber = MountTree.root + 1
    /// The newest version seen of each document path (deletions included), so a listing read
    /// before a change cannot undo it.
    var versions: [String: Int64] = [:]
    /// What the server said of a document while it was staged here: its upload settles it with
    /// the newer of this and what the upload was told (``newest(_:_:)``).
    var heldBack: [String: DocumentInfo] = [:]
    /// The manifests of packages whose entries are shown, by the package's inode.
    public internal(set) var manifests: [UInt64: Manifest] = [:]
    /// The time implied directories show.
    let mountedAt: Int64
    /// Whether the listing seals each document's size, mode, time and whether it is a symlink
    /// (an end-to-end encrypted container): its manifest says them, read the first time the
    /// kernel asks (MountTree+Sealed).
    public var sealedAttributes = false

    /// An empty tree: the root alone.
    public init(mountedAtNanoseconds: Int64) {
        mountedAt = mountedAtNanoseconds
        nodes = [
            Self.root: Node(
                name: "", parent: Self.root, kind: .directory, mode: 0o755, size: 0,
                mtimeNanoseconds: mountedAtNanoseconds, origin: .implied)
        ]
    }

    /// The node at `number`, in the tree or retired.
    public subscript(number: UInt64) -> Node? { nodes[number] ?? retired[number] }

    /// The kernel dropped inode `number`: a retired node goes for good.
    public mutating func forget(_ number: UInt64) {
        retired[number] = nil
    }

    /// The child `name` of directory `parent`.
    public func lookup(_ parent: UInt64, _ name: String) -> (number: UInt64, node: Node)? {
        guard let number = nodes[parent]?.children[name], let node = nodes[number] else { return nil }
        return (number, node)
    }

    /// A directory's children in name order.
    /// A directory's children in path order; `kind` is `nil` where it is not known yet (a
    /// document of an end-to-end encrypted container whose manifest was not read).
    public func children(of directory: UInt64) -> [(name: String, number: UInt64, kind: Kind?)] {
        guard let node = nodes[directory] else { return [] }
        return node.children.sorted { PathOrder.precedes($0.key, $1.key) }.compactMap { name, number in
            nodes[number].map { (name, number, $0.revealed ? $0.kind : nil) }
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
    /// A file written here and not uploaded yet stays as it is (its upload settles it,
    /// ``settle(_:)``), the version noted.
    @discardableResult
    public mutating func apply(_ info: DocumentInfo) -> [Invalidation] {
        let path = info.path.value
        guard info.version > versions[path] ?? 0 else { return [] }
        if let number = numbers[path], nodes[number]?.isStaged == true {
            if info.state == .current || info.state == .deleted {
                versions[path] = info.version
                heldBack[path] = info
            }
            return []
        }
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

    mutating func show(_ info: DocumentInfo) -> [Invalidation] {
        let path = info.path.value
        let parent = directory(Self.parentPath(path), implied: sealedAttributes ? mountedAt : info.mtimeNs)
        let old = numbers[path].flatMap { nodes[$0] }
        var invalidations: [Invalidation] = []
        if let number = numbers[path], let old {
            if old.kind != .directory || Self.kind(info) != .directory {
                retire(number, path: path)  // a file's new version, or another kind: a new inode
            } else if Self.isPackage(old) || info.kind == .package {
                // A package's new version: its entries come anew, under new numbers.
                invalidations = old.children.keys.map { .entry(parent: number, name: $0) }
                removeChildren(of: number)
            }
        }
        let placed = place(sealedAttributes ? sealedNode(info, parent: parent) : node(info, parent: parent), at: path)
        let name = Invalidation.entry(parent: parent, name: Self.lastName(path))
        let kept = old?.kind == .directory && Self.kind(info) == .directory
        return invalidations + (kept ? [.inode(placed), name] : [name])
    }

    /// Document `info` as the listing shows it.
    func node(_ info: DocumentInfo, parent: UInt64) -> Node {
        Node(
            name: Self.lastName(info.path.value), parent: parent, kind: Self.kind(info),
            mode: info.mode == 0 ? Self.defaultMode(info) : info.mode, size: info.kind == .file ? info.size : 0,
            mtimeNanoseconds: info.kind == .directory && info.mtimeNs == 0 ? mountedAt : info.mtimeNs,
            origin: .document(info))
    }

    mutating func remove(_ path: String) -> [Invalidation] {
        guard let number = numbers[path], let node = nodes[number] else { return [] }
        if node.kind == .directory, case .document(let info) = node.origin, info.kind == .directory,
            !node.children.isEmpty
        {
            // A directory document with documents still below it stays, as an implied directory.
            nodes[number]?.origin = .implied
            return [.inode(number)]
        }
        retire(number, path: path)
        return [.entry(parent: node.parent, name: node.name)] + pruneImplied(node.parent)
    }

    /// Takes node `number` at `path` (and what is below it) out of the tree, kept as retired
    /// until the kernel forgets it; its path gets a new number when shown again.
    mutating func retire(_ number: UInt64, path: String) {
        guard let node = nodes[number] else { return }
        removeChildren(of: number)
        retired[number] = node
        nodes[number] = nil
        numbers[path] = nil
        nodes[node.parent]?.children[node.name] = nil
    }

    /// Removes implied directories left empty, upwards from `number`.
    mutating func pruneImplied(_ number: UInt64) -> [Invalidation] {
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

    /// Retires what is below directory `number`.
    mutating func removeChildren(of number: UInt64) {
        manifests[number] = nil
        guard let children = nodes[number]?.children else { return }
        let base = path(of: number)
        for (name, child) in children { retire(child, path: base + "/" + name) }
    }

    /// The directory at `path`, made (as implied, with `mtime`) with its parents if missing.
    mutating func directory(_ path: String, implied mtime: Int64) -> UInt64 {
        let path = path.hasSuffix("/") ? String(path.dropLast()) : path
        if let number = numbers[path], let node = nodes[number] {
            if node.kind == .directory { return number }
            // A file where a directory must be (a server naming a document below a file): the
            // file goes, as a new version would replace it, and the directory gets a number of its own.
            retire(number, path: path)
        }
        let parent = directory(Self.parentPath(path), implied: mtime)
        return place(
            Node(
                name: Self.lastName(path), parent: parent, kind: .directory, mode: 0o755, size: 0,
                mtimeNanoseconds: mtime, origin: .implied), at: path)
    }

    /// Puts `node` at `path` (keeping the path's number), under its parent.
    @discardableResult
    mutating func place(_ node: Node, at path: String) -> UInt64 {
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

    static func isPackage(_ node: Node?) -> Bool {
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
