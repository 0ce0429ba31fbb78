import Synchronization

/// Wakes long-polling change requests when a container changes.
///
/// A generation counter per (account, container), bumped by every change this process makes;
/// a waiter watches its counter and re-reads the store when it moves, and at least once a
/// second anyway (another server sharing the store may have made the change).
final class ChangeNotifier: Sendable {
    private struct Key: Hashable {
        var account: Int64
        var container: String
    }

    private let generations = Mutex<[Key: UInt64]>([:])

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
        var seen = generations.withLock { $0[key, default: 0] }
        var lastCheck = clock.now
        if await hasChanges() { return }
        while clock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
            let current = generations.withLock { $0[key, default: 0] }
            if current != seen || clock.now - lastCheck > .seconds(1) {
                seen = current
                lastCheck = clock.now
                if await hasChanges() { return }
            }
        }
    }
}
