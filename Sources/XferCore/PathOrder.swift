/// Bytewise path order: the order of a manifest's entries, of the client state's rows (SQLite's
/// BINARY collation compares UTF-8 bytes) and of listings. Lists kept in it are matched by
/// walking them together instead of through maps of paths.
public enum PathOrder {
    /// Whether `a` comes before `b`.
    @inlinable
    public static func precedes(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

    /// `items` in path order, as they are if they already are (a walk's usual output).
    @inlinable
    public static func sorted<T>(_ items: [T], by path: (T) -> String) -> [T] {
        let inOrder = zip(items, items.dropFirst()).allSatisfy { precedes(path($0), path($1)) }
        return inOrder ? items : items.sorted { precedes(path($0), path($1)) }
    }

    /// Moves `cursor` past the paths before `path` in a list of `count` paths in path order
    /// (`pathAt` gives each).
    /// - Returns: Whether the path it stops at is `path`, byte for byte.
    @inlinable
    public static func seek(_ cursor: inout Int, count: Int, to path: String, pathAt: (Int) -> String) -> Bool {
        while cursor < count && precedes(pathAt(cursor), path) { cursor += 1 }
        return cursor < count && pathAt(cursor).utf8.elementsEqual(path.utf8)
    }

    /// ``seek(_:count:to:pathAt:)`` over paths read as bytes in place (a packed list's).
    @inlinable
    public static func seek(
        _ cursor: inout Int, count: Int, to path: some Collection<UInt8>,
        bytesAt: (Int) -> PackedNames.Bytes
    ) -> Bool {
        while cursor < count && bytesAt(cursor).lexicographicallyPrecedes(path) { cursor += 1 }
        return cursor < count && bytesAt(cursor).elementsEqual(path)
    }
}
