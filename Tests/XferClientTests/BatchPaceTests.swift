import Testing
import XferProtocol

@testable import XferClient

/// The size of a sync pass's batch requests follows how fast the server answers them.
struct BatchPaceTests {
    @Test func theSizeDoublesWhileAnswersAreFastAndHalvesWhenOneIsSlow() {
        var pace = BatchPace(maximum: 1000)
        #expect(pace.size == BatchPace.initial)
        pace.answered(in: .milliseconds(200))
        pace.answered(in: .milliseconds(200))
        #expect(pace.size == 512)
        pace.answered(in: .seconds(1))
        pace.answered(in: .seconds(1))
        #expect(pace.size == 1000)
        pace.answered(in: .seconds(5))  // neither fast nor slow: kept
        #expect(pace.size == 1000)
        for _ in 0..<10 { pace.answered(in: .seconds(30)) }
        #expect(pace.size == BatchPace.minimum)
        #expect(BatchPace(maximum: 50).size == 50)
    }

    @Test func aBatchTakesAtMostTheSizeWithinTheBudgetAndAlwaysOne() {
        var pace = BatchPace(maximum: 4)
        var rest = Array(1...10)[...]
        #expect(pace.next(from: &rest, budget: .max, cost: { _ in 1 }) == [1, 2, 3, 4])
        #expect(pace.next(from: &rest, budget: 10, cost: { $0 }) == [5])  // 5 + 6 > 10
        #expect(pace.next(from: &rest, budget: 1, cost: { $0 }) == [6])  // over budget alone: still sent
        pace.answered(in: .seconds(60))  // never below the minimum, nor above a smaller maximum
        #expect(pace.size == 4)
        #expect(pace.next(from: &rest, budget: .max, cost: { _ in 1 }) == [7, 8, 9, 10])
        #expect(rest.isEmpty)
    }

    /// A pull's download requests: a small pull is split evenly among the requests in flight, a
    /// large one into requests of the most bytes, and every chunk is in exactly one, in order.
    @Test func aPullsDownloadsAreSplitEvenlyAmongTheRequestsInFlight() {
        let kib = 1 << 10
        // A source tree: 9 MiB of 12 KiB chunks, 8 MiB at most a request, 4 in flight.
        let tree = Array(repeating: 12 * kib, count: 768)
        let split = PullEngine.batches(tree, bytes: 8 << 20, inFlight: 4)
        #expect(split.count == 4)
        #expect(split.map(\.count).allSatisfy { (190...194).contains($0) })
        #expect(split.first?.lowerBound == 0 && split.last?.upperBound == tree.count)
        #expect(zip(split, split.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        // One request in flight (a pull of one file or a few): requests of the most bytes.
        #expect(PullEngine.batches(tree, bytes: 8 << 20, inFlight: 1).map(\.count) == [683, 85])
        // Large: requests of 8 MiB (the last holds the rest).
        let large = Array(repeating: 1 << 20, count: 100)
        #expect(
            PullEngine.batches(large, bytes: 8 << 20, inFlight: 4).map(\.count) == Array(repeating: 8, count: 12) + [4])
        // Small: never requests of less than the smallest batch, and nothing is one of none.
        #expect(
            PullEngine.batches(Array(repeating: 4 * kib, count: 100), bytes: 8 << 20, inFlight: 4).map(\.count) == [
                64, 36
            ])
        #expect(PullEngine.batches([Int](), bytes: 8 << 20, inFlight: 4).isEmpty)
        #expect(PullEngine.batches([0, 0], bytes: 8 << 20, inFlight: 4) == [0..<2])
        // Never more ids in one request than the protocol allows.
        let tiny = Array(repeating: 1, count: ProtocolLimits.maximumIDsPerRequest + 1)
        #expect(
            PullEngine.batches(tiny, bytes: 8 << 20, inFlight: 4).map(\.count) == [
                ProtocolLimits.maximumIDsPerRequest, 1
            ])
    }
}
