import NIOCore
import NIOPosix

/// The threads the client's engines run on, so their blocking work (reading and writing
/// files, fsync, renames, the state database) never holds a thread of Swift's cooperative
/// pool, which has only one thread per core and is shared with whatever program embeds xfer.
/// (The server does the same for its stores with `NIOThreadPool`.)
///
/// It is a `TaskExecutor` over a `NIOThreadPool` of its own: every public transfer entry point
/// (`PushEngine.push`, `pushMany`, `PullEngine.pull`, `SyncEngine.syncOnce` and `watch`, the
/// sync folder's `preview`, `status` and `fetch`, the transfer plans) runs its body under
/// ``run(isolation:_:)``, which makes this executor the task's preference: the body, the child
/// tasks it starts and the default actors it calls (`SyncEngine`) all run here. Hashing and
/// chunking keep their own Dispatch threads (``ChunkPipeline``); network I/O stays on NIO's
/// event loops.
///
/// There are more threads than cores (at least four): a thread that waits on an fsync or a
/// page fault costs no CPU, and several such waits should overlap.
public final class ClientThreads: TaskExecutor {
    /// The one pool, started on first use and kept for the life of the process.
    public static let shared = ClientThreads(threads: max(4, System.coreCount))

    private let pool: NIOThreadPool
    /// Marks the pool's threads, so a test (or an assertion) can tell where it runs.
    private static let marker = ThreadSpecificVariable<Marker>()
    private final class Marker: Sendable {}

    private init(threads: Int) {
        pool = NIOThreadPool(numberOfThreads: threads)
        pool.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        pool.submit { _ in
            if ClientThreads.marker.currentValue == nil { ClientThreads.marker.currentValue = Marker() }
            job.runSynchronously(on: executor)
        }
    }

    /// Whether the calling thread is one of the client's threads.
    public static var isCurrent: Bool { marker.currentValue != nil }

    /// Runs `body` with the client's threads as the task's executor preference: its
    /// nonisolated work and that of the child tasks and default actors it reaches runs there.
    /// An actor-isolated caller stays isolated (`isolation`), as with `withTaskExecutorPreference`.
    public static func run<T, Failure: Error>(
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws(Failure) -> T
    ) async throws(Failure) -> T {
        try await withTaskExecutorPreference(shared, isolation: isolation, operation: body)
    }
}
