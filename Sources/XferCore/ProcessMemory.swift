import CXferShims

/// Process-wide memory settings, for a program's entry point (a library leaves them to the
/// program that embeds it).
public enum ProcessMemory {
    /// Allocations of at least this size are mapped alone and unmapped when freed. Above the
    /// 6 MiB upload bodies and the server's pack buffers, which come and go all through a
    /// transfer and cost page faults each time when mapped alone (at 256 KiB a 1 GiB push took
    /// 0.2-0.9 CPU s more); below the arrays of a large tree.
    public static let largeBlock = 8 << 20

    /// The process's malloc settings. Freed large blocks go back to the system: by default
    /// glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), so
    /// the growing arrays of a tree of many files, once freed, stay resident in the heap: a push
    /// of 200,000 files peaked 60 MiB higher that way (docs/PERFORMANCE.md). Smaller blocks
    /// freed at the top of a heap stay there, up to ``keptHeapTop`` (``keptHeapTopServing`` in
    /// a server), for the next allocation.
    /// - Parameter serving: Whether the process is a server (`xfer serve`).
    public static func configure(serving: Bool) {
        _ = cxfer_fix_mmap_threshold(Int32(largeBlock))
        _ = cxfer_keep_heap_top(Int32(serving ? keptHeapTopServing : keptHeapTop), Int32(heaps))
    }

    /// Free bytes kept at the top of each heap of a client. With the threshold fixed, glibc
    /// would give back any free top over 128 KiB at once, so the chunk buffers a transfer frees
    /// and allocates again were faulted in anew each time: a 1 GiB restore took the client
    /// 50,000 page faults, 6,000 with 4 MiB kept (docs/PERFORMANCE.md).
    public static let keptHeapTop = 4 << 20

    /// The same for a server, whose download batches are larger: a 1 GiB restore took it 100,000
    /// page faults and 0.46 CPU s, 5,000 and 0.28 with 16 MiB kept (50,000 with 4 MiB).
    public static let keptHeapTopServing = 16 << 20

    /// Heaps glibc may make (its default is eight a core): each keeps up to ``keptHeapTop`` free.
    public static let heaps = 4

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
