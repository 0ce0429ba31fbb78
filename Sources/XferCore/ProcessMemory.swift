import CXferShims

/// Process-wide memory settings, for a program's entry point (a library leaves them to the
/// program that embeds it).
public enum ProcessMemory {
    /// Allocations of at least this size are mapped alone and unmapped when freed. Above the
    /// 6 MiB upload bodies and the server's pack buffers, which come and go all through a
    /// transfer and cost page faults each time when mapped alone (at 256 KiB a 1 GiB push took
    /// 0.2-0.9 CPU s more); below the arrays of a large tree.
    public static let largeBlock = 8 << 20

    /// Makes freed large blocks go back to the system. By default glibc raises its mmap
    /// threshold to the size of each large block freed (up to 32 MiB), so the growing arrays of
    /// a tree of many files, once freed, stay resident in the heap: a push of 200,000 files
    /// peaked 60 MiB higher that way (docs/PERFORMANCE.md).
    public static func returnLargeBlocks() {
        _ = cxfer_fix_mmap_threshold(Int32(largeBlock))
    }

    /// Gives the free pages inside the heap back to the system: after a phase that freed much
    /// (a push's upload bodies, once every chunk is sent), before one that allocates anew.
    /// glibc by itself returns only memory at the top of each heap.
    public static func returnFreePages() {
        _ = cxfer_trim_heap()
    }

    /// ``returnFreePages()`` after a phase of a transfer of `files` files and `bytes` bytes,
    /// when it is large enough to have freed much (a trim walks the heap, so a sync pass of
    /// small documents does not pay for one each).
    public static func returnFreePages(afterFiles files: Int, bytes: Int64) {
        if files >= 4096 || bytes >= 64 << 20 { returnFreePages() }
    }
}
