import Foundation

/// Paths packed end to end in one buffer, with where each ends: what a manifest's entries and
/// a walked tree hold of their names. A path of 40 bytes costs 44 here; as a `String` it costs
/// 16 inline and an allocation of about 64 more.
public struct PackedNames: Sendable, Hashable {
    private(set) var bytes = SpillArray<UInt8>()
    private(set) var ends = SpillArray<UInt32>()
    /// Set when the bytes passed 4 GiB (more than any valid manifest or tree holds): whoever
    /// fills it refuses it as `too_large` rather than store a wrapped offset.
    private(set) var overflowed = false

    /// No names.
    public init() {}

    /// How many names.
    public var count: Int { ends.count }

    /// All names' bytes together.
    var totalBytes: Int { bytes.count }

    /// Where name `index` lies in the buffer.
    @inline(__always)
    func range(_ index: Int) -> Range<Int> { (index == 0 ? 0 : Int(ends[index - 1]))..<Int(ends[index]) }

    /// Name `index`'s UTF-8 bytes, read in place.
    public subscript(index: Int) -> Bytes { Bytes(storage: bytes, range: range(index)) }

    /// Name `index` as a string (made now).
    public func string(at index: Int) -> String {
        bytes.withUnsafeBufferPointer {
            String(decoding: UnsafeBufferPointer(rebasing: $0[range(index)]), as: UTF8.self)
        }
    }

    mutating func reserve(count: Int, bytes: Int) {
        ends.reserveCapacity(count)
        self.bytes.reserveCapacity(bytes)
    }

    /// Appends a name.
    public mutating func append(_ name: some Collection<UInt8>) {
        bytes.append(contentsOf: name)
        if bytes.count > Int(UInt32.max) {
            overflowed = true
            bytes.removeLast(name.count)
        }
        ends.append(UInt32(bytes.count))
    }

    /// Whether every name comes after the one before it, bytewise (so none repeats).
    var isInOrder: Bool {
        count < 2 || (1..<count).allSatisfy { self[$0 - 1].lexicographicallyPrecedes(self[$0]) }
    }

    /// The index of `name`, by binary search (the names must be in bytewise order).
    public func index(of name: some Collection<UInt8>) -> Int? {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            let candidate = self[middle]
            if candidate.lexicographicallyPrecedes(name) {
                low = middle + 1
            } else if candidate.elementsEqual(name) {
                return middle
            } else {
                high = middle
            }
        }
        return nil
    }
}

extension PackedNames {
    /// A name's UTF-8 bytes, read in place. Compared with other bytes held contiguously (another
    /// name's, a string's) by `memcmp` rather than byte by byte: walks along two sorted lists of
    /// paths compare hundreds of thousands of them.
    public struct Bytes: RandomAccessCollection, Sendable {
        let storage: SpillArray<UInt8>
        public let startIndex: Int
        public let endIndex: Int

        init(storage: SpillArray<UInt8>, range: Range<Int>) {
            self.storage = storage
            startIndex = range.lowerBound
            endIndex = range.upperBound
        }

        public subscript(position: Int) -> UInt8 {
            precondition(position >= startIndex && position < endIndex, "index out of range")
            return storage[position]
        }

        public func withContiguousStorageIfAvailable<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R?
        {
            try storage.withUnsafeBufferPointer { try body(UnsafeBufferPointer(rebasing: $0[startIndex..<endIndex])) }
        }

        /// Whether these bytes come before `other`'s, bytewise (a prefix comes first).
        public func lexicographicallyPrecedes(_ other: some Sequence<UInt8>) -> Bool {
            compared(with: other) { $0 < 0 } ?? elementwise.lexicographicallyPrecedes(other)
        }

        /// Whether these bytes are `other`'s.
        public func elementsEqual(_ other: some Sequence<UInt8>) -> Bool {
            compared(with: other) { $0 == 0 } ?? elementwise.elementsEqual(other)
        }

        /// The bytes as a plain collection (the generic algorithms, element by element).
        private var elementwise: Slice<SpillArray<UInt8>> { storage[startIndex..<endIndex] }

        /// `test` of the three-way comparison with `other`, if `other` is held contiguously.
        private func compared(with other: some Sequence<UInt8>, _ test: (Int) -> Bool) -> Bool? {
            withContiguousStorageIfAvailable { mine in
                other.withContiguousStorageIfAvailable { theirs in test(Self.compare(mine, theirs)) }
            } ?? nil
        }

        private static func compare(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Int {
            let common = Swift.min(a.count, b.count)
            if common > 0 {
                let order = memcmp(a.baseAddress!, b.baseAddress!, common)
                if order != 0 { return Int(order) }
            }
            return a.count < b.count ? -1 : a.count > b.count ? 1 : 0
        }
    }
}
