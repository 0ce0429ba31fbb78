/// Chunk size limits for FastCDC with normalized chunking.
///
/// Every chunk but a file's last is at least ``minimumSize`` and at most ``maximumSize``
/// bytes; sizes cluster around ``averageSize``, which must be a power of two.
public struct ChunkerConfiguration: Hashable, Sendable, CustomStringConvertible {
    /// The smallest chunk, except a file's last.
    public let minimumSize: Int
    /// The target average, a power of two.
    public let averageSize: Int
    /// The largest chunk.
    public let maximumSize: Int
    /// How many bits the normalization moves the mask by (FastCDC's "NC level").
    public let normalizationLevel: Int

    /// The default: 16 KiB / 64 KiB / 256 KiB, normalization level 2.
    public static let `default` = try! ChunkerConfiguration(
        minimumSize: 16 << 10, averageSize: 64 << 10, maximumSize: 256 << 10)

    /// The largest maximum size allowed: 16 MiB.
    public static let maximumAllowedSize = 16 << 20

    /// Creates a configuration.
    /// - Parameters:
    ///   - minimumSize: Smallest chunk (at least 64 bytes).
    ///   - averageSize: Target average, a power of two above `minimumSize`.
    ///   - maximumSize: Largest chunk, above `averageSize`, at most 16 MiB.
    ///   - normalizationLevel: Mask shift for normalized chunking, 0...3.
    /// - Throws: `XferError` with code `invalid_configuration` if the sizes are inconsistent.
    public init(minimumSize: Int, averageSize: Int, maximumSize: Int, normalizationLevel: Int = 2) throws {
        guard minimumSize >= 64 else {
            throw XferError(.invalidConfiguration, "minimum chunk size \(minimumSize) is below 64 bytes")
        }
        guard averageSize > minimumSize, averageSize.nonzeroBitCount == 1 else {
            throw XferError(
                .invalidConfiguration,
                "average chunk size \(averageSize) must be a power of two above the minimum \(minimumSize)")
        }
        guard maximumSize > averageSize, maximumSize <= Self.maximumAllowedSize else {
            throw XferError(
                .invalidConfiguration,
                "maximum chunk size \(maximumSize) must be above the average \(averageSize) and at most \(Self.maximumAllowedSize)"
            )
        }
        let bits = averageSize.trailingZeroBitCount
        guard (0...3).contains(normalizationLevel), bits - normalizationLevel >= 1, bits + normalizationLevel <= 48
        else {
            throw XferError(
                .invalidConfiguration,
                "normalization level \(normalizationLevel) is out of range for average \(averageSize)")
        }
        self.minimumSize = minimumSize
        self.averageSize = averageSize
        self.maximumSize = maximumSize
        self.normalizationLevel = normalizationLevel
    }

    /// The mask tested below the average size: more bits, so cuts are rarer.
    var smallMask: UInt64 { Self.topBits(averageSize.trailingZeroBitCount + normalizationLevel) }
    /// The mask tested from the average size on: fewer bits, so cuts are likelier.
    var largeMask: UInt64 { Self.topBits(averageSize.trailingZeroBitCount - normalizationLevel) }

    /// A mask of the `count` most significant bits: those bits of a Gear hash depend on the
    /// most bytes (bit 63 on the last 64), which gives the widest window.
    static func topBits(_ count: Int) -> UInt64 { ~UInt64(0) << UInt64(64 - count) }

    public var description: String {
        "min \(minimumSize) / avg \(averageSize) / max \(maximumSize) (NC \(normalizationLevel))"
    }
}
