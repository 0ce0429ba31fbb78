/// The raw bytes of several arrays at once.
package enum RawBuffers {
    /// Calls `body` with the bytes of every array in `arrays`, in order, each valid for the call.
    package static func with<T>(_ arrays: [[UInt8]], _ body: ([UnsafeRawBufferPointer]) throws -> T) rethrows -> T {
        var buffers: [UnsafeRawBufferPointer] = []
        buffers.reserveCapacity(arrays.count)
        return try gather(arrays[...], into: &buffers, body)
    }

    /// Nests one `withUnsafeBytes` an array, so every pointer stays valid while `body` runs.
    private static func gather<T>(
        _ arrays: ArraySlice<[UInt8]>, into buffers: inout [UnsafeRawBufferPointer],
        _ body: ([UnsafeRawBufferPointer]) throws -> T
    ) rethrows -> T {
        guard let first = arrays.first else { return try body(buffers) }
        return try first.withUnsafeBytes { raw in
            buffers.append(raw)
            return try gather(arrays.dropFirst(), into: &buffers, body)
        }
    }
}
