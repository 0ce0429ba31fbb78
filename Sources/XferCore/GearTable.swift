/// The 256 random 64-bit values of the Gear rolling hash.
///
/// Procedure (format version 1, see docs/FORMAT.md): SplitMix64 seeded with the ASCII bytes
/// "xfergear" read as a big-endian integer (`0x7866_6572_6765_6172`); entry `i` is the
/// `(i+1)`-th output. Changing this table moves every chunk boundary and breaks dedup
/// against every existing store, so tests pin its digest.
public enum GearTable {
    /// The SplitMix64 seed: "xfergear" in ASCII, big-endian.
    public static let seed: UInt64 = 0x7866_6572_6765_6172

    /// The table, computed once.
    public static let values: [UInt64] = {
        var generator = SplitMix64(seed: seed)
        return (0..<256).map { _ in generator.next() }
    }()
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fully specified 64-bit generator.
///
/// Used for the Gear table and for seeded test inputs, so that both are reproducible from a
/// one-line description.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator.
    /// - Parameter seed: The initial state.
    public init(seed: UInt64) { state = seed }

    /// The next 64-bit output.
    /// - Returns: A pseudo-random value.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
