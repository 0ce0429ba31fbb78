import Synchronization

/// Counts the long polls each account has waiting, so one account cannot park unbounded
/// requests (``ServerLimits/maximumWaitingPollsPerAccount``).
final class PollCounter: Sendable {
    private let counts = Mutex<[Int64: Int]>([:])

    /// Counts one more poll for `account` unless it already has `limit`.
    /// - Returns: Whether it was counted; a counted poll must ``leave(_:)`` once (use `defer`).
    func enter(_ account: Int64, limit: Int) -> Bool {
        counts.withLock { counts in
            guard counts[account, default: 0] < limit else { return false }
            counts[account, default: 0] += 1
            ServerMetrics.process.feedWaiters.increment()
            return true
        }
    }

    /// Uncounts a poll that ``enter(_:limit:)`` counted.
    func leave(_ account: Int64) {
        counts.withLock { counts in
            let left = counts[account, default: 1] - 1
            counts[account] = left > 0 ? left : nil
            ServerMetrics.process.feedWaiters.decrement()
        }
    }

    /// Polls waiting for `account`.
    func count(_ account: Int64) -> Int { counts.withLock { $0[account, default: 0] } }
}
