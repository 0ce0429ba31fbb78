import XferCore

/// One step at a time per document path: an upload of a file, and a removal or rename of it
/// here, never overlap (a rename while its file's upload is in flight would leave the version
/// that upload makes at the old name). Waiters are served in order.
final class PathLocks: Sendable {
    private struct State {
        var held: Set<String> = []
        var waiting: [String: [CheckedContinuation<Void, Never>]] = [:]
    }

    private let state = Locked(State())

    /// Runs `body` holding every path of `paths` (taken in sorted order, so two callers never
    /// wait on each other).
    func exclusive<T>(_ paths: [String], _ body: () async throws -> T) async rethrows -> T {
        let ordered = Array(Set(paths)).sorted()
        for path in ordered { await lock(path) }
        defer { for path in ordered { unlock(path) } }
        return try await body()
    }

    private func lock(_ path: String) async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.held.insert(path).inserted { return true }
                state.waiting[path, default: []].append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    private func unlock(_ path: String) {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard var queue = state.waiting[path], !queue.isEmpty else {
                state.held.remove(path)
                return nil
            }
            let next = queue.removeFirst()
            state.waiting[path] = queue.isEmpty ? nil : queue
            return next  // the path stays held: it passes to the next waiter
        }
        next?.resume()
    }
}
