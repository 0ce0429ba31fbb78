import Synchronization

/// Wakes long-polling change requests when a container changes.
///
/// A generation counter per (account, container), bumped by every change this process makes,
/// and one for all, bumped when the store reports a change another server made (PostgreSQL's
/// NOTIFY); a waiter re-reads the store when either moves, and at least once a second anyway.
final class ChangeNotifier: Sendable {
    private struct Key: Hashable {
        var account: Int64
        var container: String
    }

    private let generations = Mutex<[Key: UInt64]>([:])
    private let everything = Atomic<UInt64>(0)

    /// Records a change somewhere (another server's): every waiter looks again.
    func notifyAll() {
        everything.add(1, ordering: .relaxed)
    }

    /// Records a change to a container.
    func notify(account: Int64, container: some CustomStringConvertible) {
        generations.withLock { $0[Key(account: account, container: container.description), default: 0] &+= 1 }
    }

    /// Returns when `hasChanges` says so, or after `seconds`.
    /// - Parameters:
    ///   - account: The account.
    ///   - container: The container.
    ///   - seconds: The longest wait.
    ///   - hasChanges: Re-reads the store.
    func wait(account: Int64, container: some CustomStringConvertible, seconds: Int,
              hasChanges: @Sendable () async -> Bool) async {
        let key = Key(account: account, container: container.description)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        var seen = generations.withLock { $0[key, default: 0] } &+ everything.load(ordering: .relaxed)
        var lastCheck = clock.now
        if await hasChanges() { return }
        while clock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
            let current = generations.withLock { $0[key, default: 0] } &+ everything.load(ordering: .relaxed)
            if current != seen || clock.now - lastCheck > .seconds(1) {
                seen = current
                lastCheck = clock.now
                if await hasChanges() { return }
            }
        }
    }
}
