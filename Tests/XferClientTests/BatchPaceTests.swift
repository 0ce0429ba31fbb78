import Testing
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
        #expect(pace.next(from: &rest, budget: 10, cost: { $0 }) == [5])      // 5 + 6 > 10
        #expect(pace.next(from: &rest, budget: 1, cost: { $0 }) == [6])       // over budget alone: still sent
        pace.answered(in: .seconds(60))  // never below the minimum, nor above a smaller maximum
        #expect(pace.size == 4)
        #expect(pace.next(from: &rest, budget: .max, cost: { _ in 1 }) == [7, 8, 9, 10])
        #expect(rest.isEmpty)
    }
}
