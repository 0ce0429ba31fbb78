import Synchronization

/// A ceiling on the rate of one direction of a connection's chunk data (`--bwlimit`): every
/// piece of an upload's body waits its turn before it is handed to the socket, and every piece
/// of a download waits before the next is read (so the server, its TCP window full, slows down
/// too). Shared by all the requests of a ``ServerConnection`` in that direction, so parallel
/// uploads share the rate rather than each taking it.
///
/// A virtual clock (generic cell rate: the instant the link would be free, had it sent
/// everything so far at the rate): a piece of `n` bytes moves it `n / rate` on from the later
/// of itself and now, and waits until it is at most ``burst`` ahead of now. An idle link thus
/// saves up no more than a burst's worth.
public final class BandwidthLimit: Sendable {
    /// Bytes a second.
    public let bytesPerSecond: Int64
    /// How far ahead of now the virtual clock may run before a piece waits: a quarter of a
    /// second's worth passes at once.
    public let burst: Duration
    private let free = Mutex<ContinuousClock.Instant?>(nil)

    /// - Parameter bytesPerSecond: The rate, 1 or more.
    public init(bytesPerSecond: Int64, burst: Duration = .milliseconds(250)) {
        precondition(bytesPerSecond > 0, "a bandwidth limit is at least one byte a second")
        self.bytesPerSecond = bytesPerSecond
        self.burst = burst
    }

    /// The slowest rate that may be asked: below it, the gaps between one connection's pieces
    /// would pass the server's 20 s wait for a slow body (4 KiB in 20 s) with a push's four
    /// uploads sharing the budget.
    public static let minimumBytesPerSecond: Int64 = 16 << 10

    /// The size an upload's pieces are cut to: an eighth of a second's worth, 1 to 64 KiB.
    public var slice: Int { Int(min(max(bytesPerSecond / 8, 1 << 10), 64 << 10)) }

    /// How long a piece of `bytes` must wait at `now`, with the virtual clock moved past it.
    func reserve(_ bytes: Int, at now: ContinuousClock.Instant) -> Duration {
        // At most a day a piece (a public caller may pass anything; the pieces here are ≤ 64 KiB).
        let seconds = min(Double(bytes) / Double(bytesPerSecond), 86_400)
        let cost = Duration.nanoseconds(Int64((seconds * 1e9).rounded(.up)))
        return free.withLock { free in
            let start = max(free ?? now, now)
            let end = start + cost
            free = end
            let ahead = end - now
            return ahead > burst ? ahead - burst : .zero
        }
    }

    /// Waits until `bytes` may pass. Throws `CancellationError` if the task is cancelled while
    /// it waits (the bytes stay counted: a cancelled transfer is over anyway).
    public func take(_ bytes: Int) async throws {
        guard bytes > 0 else { return }
        let wait = reserve(bytes, at: .now)
        if wait > .zero { try await Task.sleep(for: wait) }
    }
}
