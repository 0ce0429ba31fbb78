import CXferShims
import Foundation

/// Where the large arrays of a transfer go once they outgrow memory: a file in a directory on
/// disk, mapped, whose pages the process gives back as it goes (``SpillArray``).
///
/// A push or pull of a tree holds a few arrays whose size grows with its number of files (its
/// paths, chunk lists and records: about 250 bytes a small file). In memory they would make the
/// process's peak grow without bound; in a file, what is resident is what was touched in the
/// last moments, and the kernel writes the rest to the disk only when memory is short (the file
/// is unnamed and goes when the transfer ends, so a transfer that finishes first writes nothing).
/// A program sets the directory once (``use(directory:)``; the `xfer` command uses its state
/// directory); without one, arrays stay in memory.
public enum Spill {
    /// The bytes an array holds in memory before it moves to a file.
    public static let threshold = 1 << 20

    private static let directory = Locked<String?>(nil)

    /// Keeps arrays that pass ``threshold`` in unnamed files in `path` (on disk: a directory on
    /// a file system kept in memory, as `tmpfs` is, is refused: a file there saves nothing), or
    /// in memory with `nil`.
    public static func use(directory path: String?) {
        directory.withLock { $0 = path }
    }

    /// The directory set, if any.
    public static var currentDirectory: String? { directory.value }

    /// A new unnamed file in the directory set, its blocks for `bytes` reserved; `nil` if none
    /// is set, it is kept in memory, or the file cannot be made (the array then stays in memory).
    static func openFile(reserving bytes: Int) -> Int32? {
        guard let path = currentDirectory else { return nil }
        var inMemory: Int32 = 0
        let fd = cxfer_open_spill_file(path, &inMemory)
        guard fd >= 0 else { return nil }
        guard inMemory == 0, cxfer_reserve_file(fd, 0, Int64(bytes)) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}

/// An array of plain values (no references) that moves to a mapped file once it passes
/// ``Spill/threshold`` bytes, where the process keeps resident only the pages it touched last
/// (``SpillPager``). Below that, or without a spill directory, it is an ordinary buffer in
/// memory. A value type with copy-on-write, as `Array` is.
///
/// The file's blocks are reserved before they are mapped (`fallocate`), so a full disk makes
/// the array stay in memory rather than fault on a write.
public struct SpillArray<Element: BitwiseCopyable>: RandomAccessCollection, MutableCollection, Sendable {
    @usableFromInline var storage: SpillStorage<Element>

    /// No elements.
    @inlinable public init() { storage = SpillStorage() }

    /// `count` copies of `value`.
    public init(repeating value: Element, count: Int) {
        storage = SpillStorage()
        reserveCapacity(count)
        for _ in 0..<count { storage.appendUnchecked(value) }
    }

    /// The elements of `elements`, in order.
    public init(_ elements: some Sequence<Element>) {
        storage = SpillStorage()
        append(contentsOf: elements)
    }

    @inlinable public var startIndex: Int { 0 }
    @inlinable public var endIndex: Int { storage.count }
    @inlinable public var count: Int { storage.count }

    @inlinable public subscript(position: Int) -> Element {
        get {
            precondition(position >= 0 && position < storage.count, "index out of range")
            return storage.base.unsafelyUnwrapped[position]
        }
        set {
            precondition(position >= 0 && position < storage.count, "index out of range")
            makeUnique()
            storage.base.unsafelyUnwrapped[position] = newValue
        }
    }

    /// Whether it moved to a file.
    public var isSpilled: Bool { storage.file >= 0 }

    @inlinable mutating func makeUnique() {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy(capacity: storage.count) }
    }

    /// Makes room for `minimumCapacity` elements in all.
    public mutating func reserveCapacity(_ minimumCapacity: Int) {
        if !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy(capacity: Swift.max(minimumCapacity, storage.count))
        } else if minimumCapacity > storage.capacity {
            storage.grow(to: minimumCapacity)
        }
    }

    /// Appends `element`.
    @inlinable public mutating func append(_ element: Element) {
        if !isKnownUniquelyReferenced(&storage) || storage.count == storage.capacity { growForAppend(1) }
        storage.appendUnchecked(element)
    }

    @usableFromInline mutating func growForAppend(_ more: Int) {
        let needed = storage.count + more
        let wanted = Swift.max(needed, storage.capacity * 2, 16)
        if !isKnownUniquelyReferenced(&storage) {
            storage = storage.copy(capacity: wanted)
        } else if needed > storage.capacity {
            storage.grow(to: wanted)
        }
    }

    /// Appends the elements of `elements`, in order.
    public mutating func append(contentsOf elements: some Sequence<Element>) {
        let copied: Bool? = elements.withContiguousStorageIfAvailable { buffer in
            guard !buffer.isEmpty else { return true }
            growForAppend(buffer.count)
            (storage.base.unsafelyUnwrapped + storage.count).initialize(from: buffer.baseAddress!, count: buffer.count)
            storage.count += buffer.count
            return true
        }
        if copied == nil {
            growForAppend(elements.underestimatedCount)
            for element in elements { append(element) }
        }
    }

    /// Removes the last `k` elements.
    public mutating func removeLast(_ k: Int) {
        precondition(k >= 0 && k <= storage.count, "cannot remove more elements than there are")
        makeUnique()
        storage.count -= k
    }

    /// Removes every element (the memory or file goes too).
    public mutating func removeAll() { storage = SpillStorage() }

    /// Calls `body` with the elements in place.
    public func withUnsafeBufferPointer<R>(_ body: (UnsafeBufferPointer<Element>) throws -> R) rethrows -> R {
        try withExtendedLifetime(storage) {
            try body(UnsafeBufferPointer(start: storage.base, count: storage.count))
        }
    }

    /// Calls `body` with the elements in place, to change them.
    public mutating func withUnsafeMutableBufferPointer<R>(_ body: (UnsafeMutableBufferPointer<Element>) throws -> R)
        rethrows -> R
    {
        makeUnique()
        return try body(UnsafeMutableBufferPointer(start: storage.base, count: storage.count))
    }

    /// Appends `count` copies of `value`.
    public mutating func append(repeating value: Element, count: Int) {
        guard count > 0 else { return }
        growForAppend(count)
        (storage.base.unsafelyUnwrapped + storage.count).initialize(repeating: value, count: count)
        storage.count += count
    }

    public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<Element>) throws -> R) rethrows -> R? {
        try withUnsafeBufferPointer(body)
    }
}

extension SpillArray: ContiguousBytes {
    /// Calls `body` with the elements' bytes in place.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBufferPointer { try body(UnsafeRawBufferPointer($0)) }
    }
}

extension SpillArray: ExpressibleByArrayLiteral {
    public init(arrayLiteral elements: Element...) { self.init(elements) }
}

extension SpillArray: Equatable where Element: Equatable {
    public static func == (a: SpillArray, b: SpillArray) -> Bool {
        a.storage === b.storage || a.elementsEqual(b)
    }
}

extension SpillArray: Hashable where Element: Hashable {
    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        for element in self { hasher.combine(element) }
    }
}

/// A ``SpillArray``'s elements: in allocated memory, or in a mapped file.
@usableFromInline
final class SpillStorage<Element: BitwiseCopyable>: @unchecked Sendable {
    // (No dynamic exclusivity checks: every read of an element reads these, and a storage is
    // changed only by the one array that holds it uniquely, as `Array`'s is.)
    @exclusivity(unchecked) @usableFromInline var base: UnsafeMutablePointer<Element>?
    @exclusivity(unchecked) @usableFromInline var count = 0
    @exclusivity(unchecked) @usableFromInline var capacity = 0
    /// The mapped file, or -1 in memory.
    var file: Int32 = -1
    var mappedBytes = 0

    @usableFromInline init() {}

    deinit { free() }

    private func free() {
        if file >= 0, let base {
            SpillPager.unmap(UnsafeMutableRawPointer(base), bytes: mappedBytes)
            close(file)
        } else {
            base?.deallocate()
        }
        base = nil
        file = -1
    }

    @inlinable func appendUnchecked(_ element: Element) {
        (base.unsafelyUnwrapped + count).initialize(to: element)
        count += 1
    }

    /// A storage holding these elements, with room for `capacity` (at least `count`).
    @usableFromInline func copy(capacity: Int) -> SpillStorage {
        let copy = SpillStorage()
        copy.grow(to: Swift.max(capacity, count))
        if let base, count > 0 { copy.base.unsafelyUnwrapped.initialize(from: base, count: count) }
        copy.count = count
        return copy
    }

    /// Room for `capacity` elements: in a file once that passes the threshold, else in memory.
    @usableFromInline func grow(to capacity: Int) {
        guard capacity > self.capacity else { return }
        let stride = MemoryLayout<Element>.stride
        let bytes = capacity * stride
        if file >= 0 || bytes >= Spill.threshold, growMapped(bytes: bytes) { return }
        let fresh = UnsafeMutablePointer<Element>.allocate(capacity: capacity)
        if let base, count > 0 { fresh.initialize(from: base, count: count) }
        free()
        base = fresh
        self.capacity = capacity
    }

    /// Grows the mapping (or makes it) to hold `bytes`; `false` if the file could not be
    /// made or grown (then the elements are where they were).
    private func growMapped(bytes wanted: Int) -> Bool {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let bytes = (wanted + page - 1) / page * page
        if file >= 0 {
            guard cxfer_reserve_file(file, Int64(mappedBytes), Int64(bytes - mappedBytes)) == 0,
                let moved = SpillPager.remap(file, UnsafeMutableRawPointer(base!), from: mappedBytes, to: bytes)
            else { return false }
            base = moved.bindMemory(to: Element.self, capacity: bytes / MemoryLayout<Element>.stride)
        } else {
            guard let fd = Spill.openFile(reserving: bytes) else { return false }
            guard let mapped = SpillPager.map(fd, bytes: bytes) else {
                close(fd)
                return false
            }
            let typed = mapped.bindMemory(to: Element.self, capacity: bytes / MemoryLayout<Element>.stride)
            if let base, count > 0 { typed.initialize(from: base, count: count) }
            base?.deallocate()
            base = typed
            file = fd
        }
        mappedBytes = bytes
        capacity = bytes / MemoryLayout<Element>.stride
        return true
    }
}

/// Gives back, every few tens of milliseconds, the resident pages of every spilled array's
/// mapping (`madvise(MADV_DONTNEED)` on a shared file mapping: the bytes stay in the file and in
/// the page cache, and the next access maps them again without reading the disk). So what a
/// process holds resident of its spilled arrays is what it touched since the last pass, however
/// large they are. Mappings are made, moved and unmapped under the same lock as the passes, so
/// a pass never advises an address that is no longer a spilled array's.
enum SpillPager {
    private static let regions = Locked<[UInt: Int]>([:])
    private static let started = Locked(false)
    /// Time between passes.
    static let interval = 0.01

    static func map(_ fd: Int32, bytes: Int) -> UnsafeMutableRawPointer? {
        startOnce()
        return regions.withLock { regions in
            guard let address = cxfer_map_file(fd, bytes) else { return nil }
            regions[UInt(bitPattern: address)] = bytes
            return address
        }
    }

    static func remap(_ fd: Int32, _ address: UnsafeMutableRawPointer, from old: Int, to new: Int)
        -> UnsafeMutableRawPointer?
    {
        regions.withLock { regions in
            guard let moved = cxfer_remap_file(fd, address, old, new) else { return nil }
            regions[UInt(bitPattern: address)] = nil
            regions[UInt(bitPattern: moved)] = new
            return moved
        }
    }

    static func unmap(_ address: UnsafeMutableRawPointer, bytes: Int) {
        regions.withLock { regions in
            regions[UInt(bitPattern: address)] = nil
            munmap(address, bytes)
        }
    }

    /// Callers of ``holdingPasses(_:)`` under way: the timed passes wait while any is.
    private static let held = Locked(0)

    /// Runs `body` with no timed pass meanwhile (a check of what is resident).
    static func holdingPasses<R>(_ body: () throws -> R) rethrows -> R {
        held.withLock { $0 += 1 }
        defer { held.withLock { $0 -= 1 } }
        return try body()
    }

    /// One pass: every spilled array's pages given back.
    static func releaseAll() {
        regions.withLock { regions in
            for (address, bytes) in regions {
                _ = cxfer_release_mapped(UnsafeMutableRawPointer(bitPattern: address), bytes)
            }
        }
    }

    private static func startOnce() {
        let first = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard first else { return }
        let thread = Thread {
            while true {
                Thread.sleep(forTimeInterval: interval)
                if held.value == 0 { releaseAll() }
            }
        }
        thread.name = "xfer.spill-pager"
        thread.start()
    }
}
