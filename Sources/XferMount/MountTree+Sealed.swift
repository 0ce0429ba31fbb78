import XferCore
import XferProtocol

/// Documents of an end-to-end encrypted container: the server holds their sizes, modes and
/// times sealed (its listing gives the stored size, mode 0600 and no time), and cannot tell a
/// symlink from a file. Each shows with defaults until the kernel first looks it up; then its
/// manifest (one request, no chunk) says what it is.
extension MountTree {
    /// Document `info` before its manifest is read: a directory (a package or a directory
    /// document) as an implied one would show, a file empty.
    func sealedNode(_ info: DocumentInfo, parent: UInt64) -> Node {
        var node = Node(
            name: Self.lastName(info.path.value), parent: parent, kind: info.kind == .file ? .file : .directory,
            mode: info.kind == .file ? 0o644 : 0o755, size: 0, mtimeNanoseconds: mountedAt, origin: .document(info))
        node.revealed = false
        return node
    }

    /// The document whose manifest node `number` waits for, if it waits for one.
    public func needsAttributes(_ number: UInt64) -> DocumentInfo? {
        guard let node = nodes[number], !node.revealed, case .document(let info) = node.origin else { return nil }
        return info
    }

    /// Shows node `number` as `manifest` (of version `version` of its document) says: a
    /// single-file document's kind, size, mode and time; a directory document's mode and time.
    /// A package keeps the defaults (its manifest holds its entries, not the package itself).
    /// - Returns: `false` if the node is another version by now (nothing is taken).
    @discardableResult
    public mutating func reveal(_ number: UInt64, from manifest: Manifest, version: Int64) -> Bool {
        guard var node = nodes[number], case .document(let info) = node.origin, info.version == version else {
            return false
        }
        node.revealed = true
        let kind = manifest.entries.count == 1 ? Self.kind(manifest.entries.kind(at: 0)) : .directory
        // A package keeps the defaults, and so does a manifest of the other kind (a lie).
        if info.kind != .package, manifest.entries.count == 1, manifest.entries.path(at: 0).isEmpty,
            (kind == .directory) == (node.kind == .directory)
        {
            node.kind = kind
            node.mode = manifest.entries.mode(at: 0) & 0o7777
            node.size = kind == .directory ? 0 : manifest.entries.size(at: 0)
            node.mtimeNanoseconds = manifest.entries.mtimeNanoseconds(at: 0)
        }
        nodes[number] = node
        return true
    }
}
