import Foundation
import XferCore
import XferProtocol

/// One thing sync removed or replaced here, kept in the synced directory's trash.
public struct TrashEntry: Codable, Sendable, Hashable {
    /// The entry's name in the trash (`xfer trash restore` takes it, or the path).
    public var id: String
    /// The document path it had.
    public var path: String
    /// When it went to the trash, nanoseconds since 1970.
    public var trashedNs: Int64
    /// Why: `deleted on the server`, `replaced by version N`, `evicted` ….
    public var reason: String
}

/// The synced directory's trash, `DIR/.xfer-trash/`: every local file or package that sync
/// deletes or replaces goes here first (a rename on the same file system: nothing is copied),
/// so no rule of the sync engine can destroy a file for good. Entries are kept
/// ``SyncOptions/trashDays`` days, then removed at the start of a pass.
///
/// Each entry is a directory `ID/` holding the document at its relative path, beside a small
/// `ID.json` that says which path it was, when and why. The engine never syncs the trash (its
/// name is one the engine ignores).
public struct Trash: Sendable {
    /// The trash directory's name inside a synced directory.
    public static let directoryName = ".xfer-trash"

    let root: ConfinedDirectory

    /// The trash of the synced directory opened as `root`.
    public init(root: ConfinedDirectory) {
        self.root = root
    }

    /// Moves `name` out of `parent` (a directory opened beneath the root) into a new entry.
    /// - Parameters:
    ///   - name: The file, symlink or package to keep.
    ///   - parent: Where it is.
    ///   - path: Its document path (for the entry's record and a restore).
    ///   - reason: Why it goes.
    ///   - hardLink: Keep a hard link and leave the file in place (for a file about to be
    ///     replaced by a rename over it).
    /// - Returns: The entry, or `nil` if there was nothing to keep.
    ///   - leaf: The name it is kept under, when it is not `name` (a replaced package's old
    ///     tree sits under its staging name).
    @discardableResult
    func keep(
        _ name: String, in parent: ConfinedDirectory, path: DocumentPath, reason: String, hardLink: Bool = false,
        as leaf: String? = nil
    ) throws -> TrashEntry? {
        guard let kind = parent.kind(name) else { return nil }
        let now = Int64(Date().timeIntervalSince1970 * 1e9)
        var random = SystemRandomNumberGenerator()
        let id = "\(now)-\(String(random.next() % 1_000_000, radix: 36))"
        let holder = try root.directory(
            [Self.directoryName, id] + path.components.dropLast().map(String.init), create: true)
        let kept = leaf ?? String(path.components.last!)
        if hardLink && kind == S_IFREG {
            try parent.link(name, to: holder, as: kept)
        } else {
            try parent.rename(name, to: holder, as: kept)
        }
        let entry = TrashEntry(id: id, path: path.value, trashedNs: now, reason: reason)
        let record = try root.directory([Self.directoryName], create: false)
        let fd = try record.openFile(id + ".json", flags: O_WRONLY | O_CREAT | O_TRUNC)
        defer { close(fd) }
        let bytes = WireJSON.encode(entry)
        try bytes.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: 0, path: record.describe(id + ".json")) }
        return entry
    }

    /// Every entry, oldest first.
    public func entries() throws -> [TrashEntry] {
        guard let trash = try? root.directory([Self.directoryName], create: false) else { return [] }
        var entries: [TrashEntry] = []
        for name in try trash.names() where name.hasSuffix(".json") {
            let fd = try trash.openFile(name, flags: O_RDONLY)
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 64 << 10)
            let count = try buffer.withUnsafeMutableBytes {
                try Syscall.pread(fd, into: $0, at: 0, path: trash.describe(name))
            }
            if let entry = try? WireJSON.decode(TrashEntry.self, from: buffer[..<count]) { entries.append(entry) }
        }
        return entries.sorted { ($0.trashedNs, $0.id) < ($1.trashedNs, $1.id) }
    }

    /// Puts an entry back at its path (or at `destination`, a document path).
    /// - Throws: `conflict` if something is at that path now (move it away first), `not_found`.
    public func restore(_ entry: TrashEntry, as destination: DocumentPath? = nil) throws {
        let path = try DocumentPath(entry.path)
        let target = destination ?? path
        let holder = try root.directory(
            [Self.directoryName, entry.id] + path.components.dropLast().map(String.init), create: false)
        let name = String(path.components.last!)
        guard holder.kind(name) != nil else { throw XferError(.notFound, "the trash entry \(entry.id) holds nothing") }
        let parent = try root.directory(target.components.dropLast(), create: true)
        let targetName = String(target.components.last!)
        guard parent.kind(targetName) == nil else {
            throw XferError(
                .conflict, "\(parent.describe(targetName)) exists; move it away first, or restore to another path")
        }
        try holder.rename(name, to: parent, as: targetName)
        try remove(entry)
    }

    /// Removes an entry for good.
    public func remove(_ entry: TrashEntry) throws {
        let trash = try root.directory([Self.directoryName], create: false)
        try trash.remove(entry.id)
        try trash.remove(entry.id + ".json")
    }

    /// Removes entries trashed before `cutoffNs` (nanoseconds since 1970); all with `nil`.
    /// - Returns: How many went.
    @discardableResult
    public func empty(trashedBefore cutoffNs: Int64? = nil) throws -> Int {
        var removed = 0
        for entry in try entries() where cutoffNs.map({ entry.trashedNs < $0 }) ?? true {
            try remove(entry)
            removed += 1
        }
        return removed
    }
}
