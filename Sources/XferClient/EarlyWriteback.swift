import Foundation
import XferCore

/// Starts the disk's work on a pull's many small files while the pull is still writing them,
/// so the `syncfs` that makes the staging copy durable at the end finds little left to write.
///
/// A package of many files is made durable by one `syncfs` once every file is written
/// (``PullEngine/syncWholeFileSystemFrom``); until then the kernel holds its small files in
/// memory (its own writeback starts only after 30 s, or at a tenth of memory dirty), and the
/// final `syncfs` wrote them all out while the pull waited. Now, every ``PullEngine/earlyWritebackEvery``
/// bytes written, one `syncfs` runs on a serial Dispatch queue of this pull's (it waits on the
/// disk, and the pull's threads wait for it at the end, so it never takes one of theirs):
/// never more than one at a time, and through a descriptor of its own. An
/// error in a file's data stays for the pull's final `syncfs` to report too (each open file
/// description keeps its own place in the file system's error sequence), but one in the file
/// system's own metadata is reported to the first `syncfs` only: so the first error any of
/// these meets is kept (``failure``), and the pull fails with it after its own `syncfs`.
/// Nothing here is relied on for durability; it only moves the disk's work earlier, where it
/// overlaps the download.
final class EarlyWriteback: @unchecked Sendable {
    private let fd: Int32
    private let threshold: Int
    private let writeback: @Sendable (Int32) -> Int32
    private let lock = NSCondition()
    private var pending = 0
    private var running = false
    private var closed = false
    private var started = 0
    private var firstError: Int32? = nil

    /// Where this pull's writebacks run, one after another (a queue, not a thread, of its own:
    /// another pull's slow disk never delays these).
    private let queue = DispatchQueue(label: "xfer.early-writeback")

    /// - Parameters:
    ///   - directory: A directory on the file system being written to (opened again here).
    ///   - threshold: Bytes written between the starts of two writebacks.
    ///   - writeback: What is run on the descriptor: 0, or the errno it failed with (tests give their own).
    /// - Returns: `nil` if the directory cannot be opened again (the pull goes on without).
    init?(
        _ directory: ConfinedDirectory, threshold: Int,
        writeback: @escaping @Sendable (Int32) -> Int32 = { Syscall.startFileSystemWriteback($0) }
    ) {
        let fd = openat(directory.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.threshold = max(1, threshold)
        self.writeback = writeback
    }

    /// How many writebacks were started.
    var writebacksStarted: Int { lock.withLock { started } }

    /// Counts `bytes` written; starts a writeback when `threshold` bytes have been written since
    /// the last one started and none is running.
    func wrote(_ bytes: Int) {
        let start: Bool = lock.withLock {
            pending += bytes
            guard !running, !closed, pending >= threshold else { return false }
            pending = 0
            running = true
            started += 1
            return true
        }
        guard start else { return }
        queue.async { [self] in
            let result = writeback(fd)
            lock.withLock {
                if result != 0, firstError == nil { firstError = result }
                running = false
                if closed { Glibc.close(fd) }
                lock.broadcast()
            }
        }
    }

    /// Starts no more writebacks. The descriptor is closed now, or by a running writeback as it ends.
    func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            if !running { Glibc.close(fd) }
        }
    }

    /// Waits until no writeback is running.
    func waitUntilIdle() {
        lock.withLock { while running { lock.wait() } }
    }

    /// The first error a writeback met (an errno), once none is running; `nil` if none did.
    var failure: Int32? {
        waitUntilIdle()
        return lock.withLock { firstError }
    }

    deinit { close() }
}
