import Testing

@testable import XferClient

/// The pacing rule of `--bwlimit`, on a clock the test holds (no test here measures time).
@Suite struct BandwidthLimitTests {
    @Test func aBurstPassesAtOnceThenEachPieceWaitsItsShare() {
        let limit = BandwidthLimit(bytesPerSecond: 1_000_000, burst: .milliseconds(250))
        let start = ContinuousClock.now
        // 250 ms of credit: a quarter of a megabyte goes without waiting.
        #expect(limit.reserve(250_000, at: start) == .zero)
        // Then each 100 kB costs 100 ms: the virtual clock is 350 ms ahead, 100 past the burst.
        #expect(limit.reserve(100_000, at: start) == .milliseconds(100))
        #expect(limit.reserve(100_000, at: start) == .milliseconds(200))
        // Time passing pays the debt back: 100 ms on, the clock (450 ms) and this piece are 450 ms ahead.
        #expect(limit.reserve(100_000, at: start + .milliseconds(100)) == .milliseconds(200))
        // Once it has caught up, a piece within the burst goes at once again.
        #expect(limit.reserve(100_000, at: start + .seconds(1)) == .zero)
    }

    @Test func anIdleLinkSavesUpNoMoreThanABurst() {
        let limit = BandwidthLimit(bytesPerSecond: 1_000, burst: .milliseconds(250))
        let start = ContinuousClock.now
        #expect(limit.reserve(1_000, at: start) == .milliseconds(750))
        // An hour later, a second's worth still waits three quarters of a second: idle time is not credit.
        let later = start + .seconds(3600)
        #expect(limit.reserve(1_000, at: later) == .milliseconds(750))
    }

    @Test func sharedByConcurrentRequestsTheRateIsTheSum() {
        // Two uploads taking turns on one limit wait as one would for both.
        let limit = BandwidthLimit(bytesPerSecond: 10_000, burst: .zero)
        let start = ContinuousClock.now
        var waits: [Duration] = []
        for _ in 0..<4 { waits.append(limit.reserve(5_000, at: start)) }
        #expect(waits == [.milliseconds(500), .seconds(1), .milliseconds(1500), .seconds(2)])
    }
}
