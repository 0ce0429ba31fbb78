import Synchronization

/// Wakes long-polling change requests when a container changes.
///
/// A waiter suspends on a continuation registered under its (account, container) key and is
/// resumed by ``notify(account:container:)`` for that key, by ``notifyAll()`` (another server's
/// change, PostgreSQL's NOTIFY), by its deadline or by cancellation, exactly once; it then
/// re-reads the store. A generation counter per key and one for all close the gap between
/// reading the store and parking: a waiter that parks after a change it has not seen does not
/// sleep. As a safety net a waiter also re-reads the store every ``recheckInterval``.
final class ChangeNotifier: Sendable {
    private struct Key: Hashable {
        var account: Int64
        var container: String
    }

    private struct State {
        var generations: [Key: UInt64] = [:]
        var everything: UInt64 = 0
        var nextID: UInt64 = 0
        var waiters: [Key: [UInt64: CheckedContinuation<Void, Never>]] = [:]
        /// The server is stopping: no waiter parks any more.
        var draining = false

        func generation(_ key: Key) -> UInt64 { generations[key, default: 0] &+ everything }

        mutating func remove(_ key: Key, _ id: UInt64) -> CheckedContinuation<Void, Never>? {
            let continuation = waiters[key]?.removeValue(forKey: id)
            if waiters[key]?.isEmpty == true { waiters[key] = nil }
            return continuation
        }
    }

    private let state = Mutex(State())
    /// Long polls parked per account (``ServerLimits/maximumWaitingPollsPerAccount``).
    let polls = PollCounter()
    /// The longest a waiter sleeps without re-reading the store.
    let recheckInterval: Duration

    /// A notifier whose waiters re-read the store at least every `recheckInterval`.
    init(recheckInterval: Duration = .seconds(5)) {
        self.recheckInterval = recheckInterval
    }

    /// The server is stopping (SIGTERM): every waiter is answered now and none parks again,
    /// so a graceful shutdown does not wait out the long polls.
    func drain() {
        let woken = state.withLock { state in
            state.draining = true
            let all = state.waiters.values.flatMap(\.values)
            state.waiters = [:]
            return all
        }
        for continuation in woken { continuation.resume() }
    }

    /// Whether ``drain()`` was called: the server is stopping.
    var isDraining: Bool { state.withLock { $0.draining } }

    /// Records a change somewhere (another server's): every waiter looks again.
    func notifyAll() {
        let woken = state.withLock { state in
            state.everything &+= 1
            let all = state.waiters.values.flatMap(\.values)
            state.waiters = [:]
            return all
        }
        for continuation in woken { continuation.resume() }
    }

    /// Records a change to a container: its waiters look again.
    func notify(account: Int64, container: some CustomStringConvertible) {
        let key = Key(account: account, container: container.description)
        let woken = state.withLock { state in
            state.generations[key, default: 0] &+= 1
            return state.waiters.removeValue(forKey: key).map { Array($0.values) } ?? []
        }
        for continuation in woken { continuation.resume() }
    }

    /// Waiters parked now (for tests and metrics).
    var parked: Int { state.withLock { $0.waiters.values.reduce(0) { $0 + $1.count } } }

    /// Returns when `hasChanges` says so, after `seconds`, or when the task is cancelled.
    /// - Parameters:
    ///   - account: The account.
    ///   - container: The container.
    ///   - seconds: The longest wait.
    ///   - hasChanges: Re-reads the store.
    func wait(
        account: Int64, container: some CustomStringConvertible, seconds: Int,
        hasChanges: @Sendable () async -> Bool
    ) async {
        let key = Key(account: account, container: container.description)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        while !Task.isCancelled {
            let (seen, draining) = state.withLock { ($0.generation(key), $0.draining) }
            if draining { return }
            if await hasChanges() { return }
            let now = clock.now
            guard now < deadline else { return }
            await park(key, seen: seen, until: min(deadline, now + recheckInterval))
        }
    }

    /// Suspends until the key's generation moves past `seen` (or has already), `deadline`
    /// passes or the task is cancelled.
    private func park(_ key: Key, seen: UInt64, until deadline: ContinuousClock.Instant) async {
        let id = state.withLock { state in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                        // Cancellation sets the flag before its handler runs, and the handler
                        // takes this lock: either it finds the continuation, or we see the flag.
                        let resumeNow = self.state.withLock { state in
                            guard !Task.isCancelled, !state.draining, state.generation(key) == seen else { return true }
                            state.waiters[key, default: [:]][id] = continuation
                            return false
                        }
                        if resumeNow { continuation.resume() }
                    }
                } onCancel: {
                    self.state.withLock { $0.remove(key, id) }?.resume()
                }
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
            }
            // Whichever ends first (a wake-up or the deadline) cancels the other.
            await group.next()
            group.cancelAll()
        }
    }
}
