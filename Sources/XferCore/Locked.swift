import Synchronization

/// A value behind a `Mutex`, in a class so closures and several owners can share it.
package final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    package init(_ value: Value) { mutex = Mutex(value) }

    /// Runs `body` with exclusive access to the value.
    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.withLock { value in try body(&value) }
    }

    /// A copy of the value.
    package var value: Value { mutex.withLock { $0 } }
}
