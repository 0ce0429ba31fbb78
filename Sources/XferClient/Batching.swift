import XferCore

/// One document's step within a batch: its own failure is its outcome, but what stops every
/// document (``XferError/stopsEveryDocument``) is thrown.
func documentOutcome<T>(_ body: () async throws -> T) async throws -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch let error as XferError where error.stopsEveryDocument {
        throw error
    } catch {
        return .failure(error)
    }
}

/// How many documents the next batch request carries: a server's work on one (a commit is one
/// transaction, holding the container's lock) grows with it, and on a slow backend 500
/// documents took long enough that the client's read timeout ended the request
/// (PostgreSQL under load). The size starts at ``initial``, doubles after an answer that came
/// within ``fast`` and halves after one slower than ``slow``, between ``minimum`` and the
/// protocol's most.
struct BatchPace {
    static let initial = 128
    static let minimum = 8
    static let fast: Duration = .seconds(2)
    static let slow: Duration = .seconds(10)

    private(set) var size: Int
    let maximum: Int

    init(maximum: Int) {
        self.maximum = maximum
        size = min(Self.initial, maximum)
    }

    /// Records how long the last request took to be answered.
    mutating func answered(in elapsed: Duration) {
        if elapsed <= Self.fast {
            size = min(maximum, size * 2)
        } else if elapsed > Self.slow {
            size = max(min(Self.minimum, maximum), size / 2)
        }
    }

    /// The next batch from the front of `rest`: at most ``size`` elements whose `cost` stays
    /// within `budget` (always at least one). Removes them from `rest`.
    func next<Element>(from rest: inout ArraySlice<Element>, budget: Int, cost: (Element) -> Int) -> [Element] {
        var taken = 0
        var spent = 0
        for element in rest {
            let price = cost(element)
            if taken > 0 && (taken == size || spent + price > budget) { break }
            taken += 1
            spent += price
        }
        defer { rest = rest.dropFirst(taken) }
        return Array(rest.prefix(taken))
    }
}
