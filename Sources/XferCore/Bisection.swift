extension RandomAccessCollection {
    /// The first index whose element is not `before` the one sought (every element before it
    /// is), by bisection: the elements must be ordered so that those `before` come first.
    @inlinable
    package func partitioningIndex(where before: (Element) throws -> Bool) rethrows -> Index {
        var low = startIndex
        var count = self.count
        while count > 0 {
            let half = count / 2
            let middle = index(low, offsetBy: half)
            if try before(self[middle]) {
                low = index(after: middle)
                count -= half + 1
            } else {
                count = half
            }
        }
        return low
    }
}
