import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A seam for storage fault injection, in the manner of swift-system's and NIOFileSystem's
/// mocked syscalls: tests arm faults here and ``Syscall`` (every write, fsync, rename, link,
/// mkdir, removal, open for writing and change of a mode or time) and ``FileSystem/writeAtomically(_:to:durable:)`` (every chunk write) meet
/// them instead of the real call's result.
///
/// Nothing is armed in normal operation; checking costs one uncontended lock per write.
package enum StorageFaults {
    /// The syscall a fault replaces.
    package enum Operation: Sendable, Hashable {
        case write, fsync, rename, link, mkdir
        /// `unlink`, `rmdir`.
        case remove
        /// An open that may create or write.
        case open
        /// `fchmod`, `futimens`, `utimensat`, `ftruncate`: a mode, time or size.
        case attributes
    }

    /// What the faulted call does.
    package enum Effect: Sendable, Hashable {
        /// Fails with this errno (ENOSPC, EIO, …) having written nothing.
        case fail(Int32)
        /// Writes only this many bytes, then the next write fails with the errno: a disk
        /// filling up mid-file.
        case shortWrite(Int, then: Int32)
    }

    /// One armed fault.
    package struct Fault: Sendable, Hashable {
        /// The call it replaces.
        package var operation: Operation
        /// What happens.
        package var effect: Effect
        /// Only paths containing this string are affected ("" for every path).
        package var pathContains: String
        /// How many calls it affects before it disarms itself.
        package var count: Int

        package init(_ operation: Operation, _ effect: Effect, pathContains: String = "", count: Int = 1) {
            self.operation = operation
            self.effect = effect
            self.pathContains = pathContains
            self.count = count
        }
    }

    private static let armed = Locked<[Fault]>([])
    /// Told of every call that reaches the seam, while set.
    private static let observer = Locked<(@Sendable (Operation, String) -> Void)?>(nil)
    /// How many faults (and observers) are armed, read without the lock so the write path
    /// pays nothing when none are (the usual case outside tests).
    private static let armedCount = Atomic<Int>(0)

    /// Arms faults (in addition to any already armed).
    package static func arm(_ faults: Fault...) { update { $0.append(contentsOf: faults) } }

    /// Disarms every fault and the observer.
    package static func reset() {
        observer.withLock { $0 = nil }
        update { $0.removeAll() }
    }

    /// Calls `body` with the operation and path of every call that reaches the seam (on the
    /// calling thread), until it is replaced or `nil` is given: a test's view of where, and
    /// on which thread, storage work happens.
    package static func observe(_ body: (@Sendable (Operation, String) -> Void)?) {
        observer.withLock { $0 = body }
        update { _ in }
    }

    /// Disarms the faults scoped to paths containing this string.
    package static func disarm(pathContains: String) {
        update { $0.removeAll { $0.pathContains.contains(pathContains) } }
    }

    private static func update(_ change: (inout [Fault]) -> Void) {
        armed.withLock { faults in
            change(&faults)
            storeArmedCount(faults)
        }
    }

    /// Counts `faults` and the observer, if one is set, as armed.
    private static func storeArmedCount(_ faults: [Fault]) {
        armedCount.store(faults.count + (observer.value == nil ? 0 : 1), ordering: .releasing)
    }

    /// Whether any fault (or an observer) is armed: a caller that would merge several calls
    /// into one makes them one by one then, so each meets the seam.
    static var isArmed: Bool { armedCount.load(ordering: .acquiring) > 0 }

    /// The effect armed for this call, consuming one use of the fault.
    static func take(_ operation: Operation, path: String) -> Effect? {
        guard isArmed else { return nil }
        observer.value?(operation, path)
        return armed.withLock { faults in
            guard
                let index = faults.firstIndex(where: {
                    $0.operation == operation && $0.count > 0
                        && ($0.pathContains.isEmpty || path.contains($0.pathContains))
                })
            else { return nil }
            faults[index].count -= 1
            let effect = faults[index].effect
            if faults[index].count == 0 {
                faults.remove(at: index)
                storeArmedCount(faults)
            }
            return effect
        }
    }
}
