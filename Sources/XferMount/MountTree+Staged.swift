import XferCore
import XferProtocol

/// Files written through the mount: shown as written (``Origin/staged(base:)``) until their
/// upload settles them; renames under their own inode.
extension MountTree {
    /// Shows a file written here at `path` (made, or an existing file or staged file updated,
    /// keeping its inode) until its upload settles it.
    /// - Returns: Its inode, and what the kernel should forget (nothing, for an update).
    @discardableResult
    public mutating func stage(_ path: String, mode: UInt32, size: Int64, mtimeNanoseconds: Int64) -> (
        number: UInt64, invalidations: [Invalidation]
    ) {
        let old = numbers[path].flatMap { nodes[$0] }
        var base: Int64? = nil
        switch old?.origin {
        case .document(let info)?: base = info.version
        case .staged(let staged)?: base = staged
        default: break
        }
        if let number = numbers[path], old?.kind != .file { retire(number, path: path) }
        let parent = directory(Self.parentPath(path), implied: mtimeNanoseconds)
        let number = place(
            Node(
                name: Self.lastName(path), parent: parent, kind: .file, mode: mode, size: size,
                mtimeNanoseconds: mtimeNanoseconds, origin: .staged(base: base)), at: path)
        return (number, old?.kind == .file ? [] : [.entry(parent: parent, name: Self.lastName(path))])
    }

    /// Shows a directory or symlink (`kind`; a symlink's `size` is its target's length) made
    /// here at `path` until its upload settles it.
    @discardableResult
    public mutating func made(_ path: String, kind: Kind, mode: UInt32, size: Int64, mtimeNanoseconds: Int64)
        -> [Invalidation]
    {
        let parent = directory(Self.parentPath(path), implied: mtimeNanoseconds)
        place(
            Node(
                name: Self.lastName(path), parent: parent, kind: kind, mode: mode, size: size,
                mtimeNanoseconds: mtimeNanoseconds, origin: .staged(base: nil)), at: path)
        return [.entry(parent: parent, name: Self.lastName(path))]
    }

    /// Shows what an earlier mount queued while it could not reach the server: its deletions
    /// (unless the server has another version by now, which the deletion will not take), and
    /// the directories and symlinks it made and the directories' modes it changed.
    mutating func replay(removals: [StagedFiles.Removal], made: [StagedFiles.Made]) {
        for removal in removals where base(of: removal.path) == removal.base { removeHere(removal.path) }
        for made in made {
            guard let number = number(of: made.path) else {
                self.made(
                    made.path, kind: made.target == nil ? .directory : .symlink, mode: made.mode,
                    size: Int64(made.target?.utf8.count ?? 0), mtimeNanoseconds: made.queuedNs)
                continue
            }
            if made.target == nil, self[number]?.kind == .directory { setMode(number, made.mode) }
        }
    }

    /// A directory whose mode was changed here, shown so until its upload settles it.
    public mutating func setMode(_ number: UInt64, _ mode: UInt32) {
        nodes[number]?.mode = mode
    }

    /// Settles a staged file with what its upload made: its version shows under the same inode
    /// (the bytes are the ones written here); if another version is current (the upload became
    /// a conflict version), that one shows, as a new inode.
    @discardableResult
    public mutating func settle(_ info: DocumentInfo, current: DocumentInfo) -> [Invalidation] {
        let path = info.path.value
        guard let number = numbers[path], let node = nodes[number], case .staged = node.origin else {
            return apply(current)
        }
        let current = newest(path, current)
        guard current.version == info.version, current.state == .current else {
            retire(number, path: path)
            let gone = [MountTree.Invalidation.entry(parent: node.parent, name: node.name)] + pruneImplied(node.parent)
            return (current.state == .current ? show(current) : gone) + [.inode(number)]
        }
        nodes[number]?.origin = .document(info)
        // Sealed, the server's size is the stored one; the staged file's attributes are the file's.
        if !sealedAttributes { nodes[number]?.size = info.size }
        return [.inode(number)]
    }

    /// The newer of `current` (what an upload of `path` was told) and what the server said
    /// while it was staged; the version is noted as seen.
    mutating func newest(_ path: String, _ current: DocumentInfo) -> DocumentInfo {
        versions[path] = max(versions[path] ?? 0, current.version)
        guard let held = heldBack.removeValue(forKey: path), held.version > current.version else { return current }
        return held
    }

    /// A staged file whose version `version` was uploaded while it was open for writing again:
    /// its next upload is based on that version.
    public mutating func rebase(_ path: String, on version: Int64) {
        guard let number = numbers[path], case .staged? = nodes[number]?.origin else { return }
        nodes[number]?.origin = .staged(base: version)
        versions[path] = max(versions[path] ?? 0, version)
    }

    /// A staged file (or one in a package changed here) written up to `end` at `time`.
    public mutating func grow(_ number: UInt64, to end: Int64, at time: Int64) {
        guard nodes[number]?.isWritten == true else { return }
        nodes[number]!.size = max(nodes[number]!.size, end)
        nodes[number]!.mtimeNanoseconds = time
    }

    /// A staged file's attributes (or those of one in a package changed here) as its staging
    /// file now has them.
    public mutating func restat(_ number: UInt64, mode: UInt32?, size: Int64, mtimeNanoseconds: Int64) {
        guard nodes[number]?.isWritten == true else { return }
        if let mode { nodes[number]!.mode = mode }
        nodes[number]!.size = size
        nodes[number]!.mtimeNanoseconds = mtimeNanoseconds
    }

    /// The inode at `path`, if shown.
    public func number(of path: String) -> UInt64? {
        numbers[path].flatMap { nodes[$0] == nil ? nil : $0 }
    }

    /// Moves the file at `from` to `to` under its own inode (as the kernel expects of a rename),
    /// staged on `base` (the version of what was at `to`); what was at `to` is retired.
    /// - Returns: The directories left empty that go.
    @discardableResult
    public mutating func move(_ from: String, to: String, base: Int64?) -> [Invalidation] {
        guard let number = numbers[from], var node = nodes[number] else { return [] }
        if let target = numbers[to], target != number { retire(target, path: to) }
        let oldParent = node.parent
        nodes[oldParent]?.children[node.name] = nil
        numbers[from] = nil
        let parent = directory(Self.parentPath(to), implied: node.mtimeNanoseconds)
        node.name = Self.lastName(to)
        node.parent = parent
        node.origin = .staged(base: base)
        nodes[number] = node
        numbers[to] = number
        nodes[parent]?.children[node.name] = number
        return pruneImplied(oldParent)
    }

    /// The version a document shown at `path` is, or is staged on (`nil`: none, or a new file).
    public func base(of path: String) -> Int64? {
        switch numbers[path].flatMap({ nodes[$0] })?.origin {
        case .document(let info)?: return info.version
        case .staged(let base)?: return base
        default: return nil
        }
    }

    /// Removes the node at `path` that this mount removed (a file unlinked here, a staged file
    /// dropped): as a deletion from the server would.
    @discardableResult
    public mutating func removeHere(_ path: String) -> [Invalidation] {
        heldBack[path] = nil
        return remove(path)
    }
}
