import Synchronization
import Testing

@testable import XferServer

/// A flag and a call count a waiter's `hasChanges` reads.
final class StoreProbe: Sendable {
    private let state = Mutex<(changed: Bool, checks: Int)>((false, 0))

    var checks: Int { state.withLock { $0.checks } }

    func set() { state.withLock { $0.changed = true } }

    func check() -> Bool {
        state.withLock { state in
            state.checks += 1
            return state.changed
        }
    }
}

/// Waits (yielding, bounded by the suite's time limit) until `condition` holds.
func eventually(_ condition: () -> Bool) async {
    while !condition() { try? await Task.sleep(for: .milliseconds(5)) }
}

/// The long-poll notifier without I/O: a waiter sleeps until an event, its deadline or its
/// cancellation. Deadlines and recheck intervals are far beyond the time limit, so a waiter
/// that is not woken fails the test by the limit rather than by a timing assertion.
@Suite(.timeLimit(.minutes(1))) struct ChangeNotifierTests {
    @Test func aWaiterWakesOnNotify() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        let waiter = Task { await notifier.wait(account: 1, container: "default", seconds: 3600) { probe.check() } }
        await eventually { notifier.parked == 1 }
        notifier.notify(account: 2, container: "default")
        notifier.notify(account: 1, container: "other")
        #expect(notifier.parked == 1, "other keys do not wake it")
        probe.set()
        notifier.notify(account: 1, container: "default")
        await waiter.value
        #expect(notifier.parked == 0)
        #expect(probe.checks == 2, "it read the store once before parking and once after the wake-up")
    }

    @Test func notifyAllWakesEveryKey() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        let waiters = (0..<4).map { i in
            Task { await notifier.wait(account: Int64(i), container: "c\(i)", seconds: 3600) { probe.check() } }
        }
        await eventually { notifier.parked == 4 }
        probe.set()
        notifier.notifyAll()
        for waiter in waiters { await waiter.value }
        #expect(notifier.parked == 0)
    }

    @Test func aWaiterTimesOut() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        await notifier.wait(account: 1, container: "default", seconds: 1) { probe.check() }
        #expect(probe.checks == 2, "once before parking, once at the deadline")
        #expect(notifier.parked == 0)
    }

    @Test func theSafetyNetRereadsTheStore() async {
        let notifier = ChangeNotifier(recheckInterval: .milliseconds(50))
        let probe = StoreProbe()
        let waiter = Task { await notifier.wait(account: 1, container: "default", seconds: 3600) { probe.check() } }
        await eventually { probe.checks >= 2 }
        probe.set()
        await waiter.value
        #expect(notifier.parked == 0)
    }

    @Test func cancellationResumesAWaiter() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        let waiter = Task { await notifier.wait(account: 1, container: "default", seconds: 3600) { probe.check() } }
        await eventually { notifier.parked == 1 }
        waiter.cancel()
        await waiter.value
        #expect(notifier.parked == 0, "no continuation is left behind")
        // A task cancelled before it waits does not park at all.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await notifier.wait(account: 1, container: "default", seconds: 3600) { probe.check() }
        }
        await early.value
        #expect(notifier.parked == 0)
    }

    @Test func aChangeBetweenReadingAndParkingIsNotMissed() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        // The change lands after the store was read but before the waiter parks.
        await notifier.wait(account: 1, container: "default", seconds: 3600) {
            if probe.checks == 0 {
                probe.set()
                notifier.notify(account: 1, container: "default")
                _ = probe.check()
                return false
            }
            return probe.check()
        }
        #expect(notifier.parked == 0)
    }

    @Test func manyWaitersAllWake() async {
        let notifier = ChangeNotifier(recheckInterval: .seconds(3600))
        let probe = StoreProbe()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<300 {
                group.addTask { await notifier.wait(account: 7, container: "default", seconds: 3600) { probe.check() } }
            }
            await eventually { notifier.parked == 300 }
            probe.set()
            notifier.notify(account: 7, container: "default")
            await group.waitForAll()
        }
        #expect(notifier.parked == 0)
    }

    @Test func pollsPerAccountAreCounted() {
        let polls = PollCounter()
        #expect(polls.enter(1, limit: 2) && polls.enter(1, limit: 2))
        #expect(!polls.enter(1, limit: 2), "a third is refused")
        #expect(polls.enter(2, limit: 2), "another account has its own count")
        polls.leave(1)
        #expect(polls.count(1) == 1 && polls.enter(1, limit: 2))
        polls.leave(1)
        polls.leave(1)
        polls.leave(2)
        #expect(polls.count(1) == 0 && polls.count(2) == 0)
    }
}
