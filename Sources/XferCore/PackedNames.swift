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

    /// A name's UTF-8 bytes, read in place.
    public typealias Bytes = Slice<SpillArray<UInt8>>

    /// Name `index`'s UTF-8 bytes, read in place.
    public subscript(index: Int) -> Bytes { bytes[range(index)] }

    /// Name `index` as a string (made now).
    public func string(at index: Int) -> String {
        bytes.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range(index)]), as: UTF8.self) }
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
        var low = 0, high = count
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
