/// A walked tree's entries, packed: every path's bytes in one buffer (``PackedNames``) and a
/// 40-byte record an entry (kind, mode, size, times, inode), where ``TreeEntry`` values took a
/// 72-byte entry and a string of their own (about 150 bytes a file in all; about 85 here).
///
/// It is a collection of ``TreeEntry`` values, each made when it is read; hot loops read the
/// parts they need (``pathBytes(at:)``, ``kind(at:)``, ``stamp(at:)``), which make nothing.
public struct TreeEntries: RandomAccessCollection, Sendable {
    struct Record: Sendable {
        var size: Int64
        var mtimeNanoseconds: Int64
        var inode: UInt64
        var ctimeNanoseconds: Int64
        var mode: UInt32
        var kind: EntryKind
    }

    private(set) var names = PackedNames()
    private var records = SpillArray<Record>()
    /// Symlink targets by entry index (symlinks are few).
    private var targets: [Int: String] = [:]

    /// No entries.
    public init() {}

    /// These entries, in their order.
    public init(_ entries: some Sequence<TreeEntry>) {
        for entry in entries { append(entry) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { records.count }

    /// Entry `index`, made now (its path a new string).
    public subscript(index: Int) -> TreeEntry {
        let record = records[index]
        return TreeEntry(
            relativePath: names.string(at: index), kind: record.kind, mode: record.mode, size: record.size,
            mtimeNanoseconds: record.mtimeNanoseconds, symlinkTarget: targets[index], inode: record.inode,
            ctimeNanoseconds: record.ctimeNanoseconds)
    }

    /// The paths, packed (a manifest of this tree can share them: ``Manifest/Builder/init(kind:chunker:names:chunks:)``).
    public var packedNames: PackedNames { names }

    /// All paths' bytes together.
    public var nameBytes: Int { names.totalBytes }

    /// Entry `index`'s path relative to the root.
    public func relativePath(at index: Int) -> String { names.string(at: index) }

    /// Entry `index`'s path as UTF-8 bytes, read in place.
    public func pathBytes(at index: Int) -> PackedNames.Bytes { names[index] }

    /// Entry `index`'s kind.
    public func kind(at index: Int) -> EntryKind { records[index].kind }

    /// Entry `index`'s permission bits.
    public func mode(at index: Int) -> UInt32 { records[index].mode }

    /// Entry `index`'s size (see ``TreeEntry/size``).
    public func size(at index: Int) -> Int64 { records[index].size }

    /// Entry `index`'s modification time.
    public func mtimeNanoseconds(at index: Int) -> Int64 { records[index].mtimeNanoseconds }

    /// Entry `index`'s symlink target (symlinks only).
    public func symlinkTarget(at index: Int) -> String? { targets[index] }

    /// The stamp the walk saw for entry `index` (see ``TreeEntry/stamp``).
    public func stamp(at index: Int) -> FileStamp {
        let record = records[index]
        return FileStamp(
            size: record.size, mtimeNanoseconds: record.mtimeNanoseconds, inode: record.inode,
            ctimeNanoseconds: record.ctimeNanoseconds)
    }

    /// Appends an entry.
    public mutating func append(_ entry: TreeEntry) {
        names.append(entry.relativePath.utf8)
        if let target = entry.symlinkTarget { targets[records.count] = target }
        records.append(
            Record(
                size: entry.size, mtimeNanoseconds: entry.mtimeNanoseconds, inode: entry.inode,
                ctimeNanoseconds: entry.ctimeNanoseconds, mode: entry.mode, kind: entry.kind))
    }

    /// The same entries in bytewise path order: these if they already are (a walk's usual
    /// output), else a sorted copy.
    public func sortedByPath() -> TreeEntries {
        guard !names.isInOrder else { return self }
        var sorted = TreeEntries()
        sorted.names.reserve(count: count, bytes: names.totalBytes)
        sorted.records.reserveCapacity(count)
        for index in indices.sorted(by: { names[$0].lexicographicallyPrecedes(names[$1]) }) {
            sorted.names.append(names[index])
            if let target = targets[index] { sorted.targets[sorted.records.count] = target }
            sorted.records.append(records[index])
        }
        return sorted
    }
}
