import CXferShims

/// Process-wide memory settings, for a program's entry point (a library leaves them to the
/// program that embeds it).
public enum ProcessMemory {
    /// Allocations of at least this size are mapped alone and unmapped when freed.
    public static let largeBlock = 256 << 10

    /// Makes freed large blocks go back to the system. By default glibc raises its mmap
    /// threshold to the size of each large block freed (up to 32 MiB), so the growing arrays of
    /// a tree of many files, once freed, stay resident in the heap: a push of 200,000 files
    /// peaked 60 MiB higher that way (docs/PERFORMANCE.md).
    public static func returnLargeBlocks() {
        _ = cxfer_fix_mmap_threshold(Int32(largeBlock))
    }
}
