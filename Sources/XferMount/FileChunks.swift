import XferCore

/// The chunks of one file version and where each begins: which of them a read covers, and
/// the read's bytes cut from them. Pure.
public struct FileChunks: Sendable {
    /// The chunks in file order.
    public let references: [Manifest.ChunkReference]
    /// Where chunk `i` begins; the last element is the file's size.
    private let starts: [Int64]

    /// The chunks of a file, in order.
    public init(_ references: [Manifest.ChunkReference]) {
        self.references = references
        var starts: [Int64] = [0]
        starts.reserveCapacity(references.count + 1)
        for reference in references { starts.append(starts.last! + Int64(reference.length)) }
        self.starts = starts
    }

    /// The file's size.
    public var size: Int64 { starts.last! }

    /// The chunks that hold bytes `offset ..< offset + length` (clamped to the file).
    public func covering(offset: Int64, length: Int) -> Range<Int> {
        let end = min(size, offset + Int64(length))
        guard offset >= 0, offset < end else { return 0..<0 }
        return index(of: offset)..<(index(of: end - 1) + 1)
    }

    /// The chunks after `range` that hold the next `bytes` bytes: what a sequential reader
    /// reads next.
    public func following(_ range: Range<Int>, bytes: Int) -> Range<Int> {
        var end = range.upperBound
        var total = 0
        while end < references.count, total < bytes {
            total += references[end].length
            end += 1
        }
        return range.upperBound..<end
    }

    /// The bytes chunks `range` hold.
    public func bytes(in range: Range<Int>) -> Int64 {
        range.isEmpty ? 0 : starts[range.upperBound] - starts[range.lowerBound]
    }

    /// Bytes `offset ..< offset + length` (clamped), cut from the plain chunks of
    /// ``covering(offset:length:)`` given in order.
    public func bytes(offset: Int64, length: Int, from plains: [[UInt8]]) -> [UInt8] {
        Array(pieces(offset: offset, length: length, from: plains).joined())
    }

    /// ``bytes(offset:length:from:)`` as the pieces of each chunk, copying nothing.
    public func pieces(offset: Int64, length: Int, from plains: [[UInt8]]) -> [ArraySlice<UInt8>] {
        let range = covering(offset: offset, length: length)
        precondition(plains.count == range.count)
        let end = min(size, offset + Int64(length))
        return zip(range, plains).map { index, plain in
            let from = max(offset, starts[index]) - starts[index]
            let to = min(end, starts[index + 1]) - starts[index]
            return plain[Int(from)..<Int(to)]
        }
    }

    /// The chunk that holds byte `offset` (which lies in the file).
    private func index(of offset: Int64) -> Int {
        var low = 0
        var high = references.count - 1
        while low < high {
            let middle = (low + high + 1) / 2
            if starts[middle] <= offset { low = middle } else { high = middle - 1 }
        }
        return low
    }
}
