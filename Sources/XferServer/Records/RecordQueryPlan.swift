import Foundation

/// A way to find a records/query's page (``RecordQuerySQL/statement(_:through:)`` writes each
/// as SQL).
enum RecordQueryWay: Equatable, Sendable {
    /// The records of the type in the query's order, every filter tested per record. In name
    /// order the records' index walks them and the walk stops at the page's end: cheap when
    /// the filters pass many. `within`: only the first this many by name; a page not filled
    /// from them is asked the next way.
    case walk(within: Int?)
    /// The records one filter's index finds (the filter at this place), the others tested
    /// per record: cheap when that filter passes few.
    case drive(Int)
    /// The records that the filters at these places find, their ids intersected; the others
    /// tested per record.
    case intersect([Int])
}

/// How a records/query is answered, decided from how many records each of its filters
/// matches (counted up to ``cap``). The decision only: the store counts and asks.
enum RecordQueryPlan {
    /// Matches counted per filter. Fewer than this and the records are fetched from the
    /// filter's matches; this many or more and walking in name order finds a page sooner.
    static let cap = 10_000
    /// Records walked by name before a page not yet full is found the other way instead (a
    /// few broad filters that rarely hold together).
    static let walkLimit = 20_000
    /// Filters counted, and so able to find records, at most (the first that can): what a
    /// query of many filters or many words costs before its page is bounded.
    static let findingFilters = 8

    /// Whether the way depends on the filters' counts: not for a query in an order of its own
    /// with one filter to find records by (every match is read and sorted either way), nor
    /// for one with none.
    static func needsCounts(findable: Int, byName: Bool) -> Bool {
        findable > 1 || (findable == 1 && byName)
    }

    /// The ways to try, in order: each but the last may answer only part of the page
    /// (``RecordQueryWay/walk(within:)``).
    /// - Parameters:
    ///   - counts: Per filter able to find records (``RecordCondition/isFindable``), its place
    ///     among the conditions and its matches, at most ``cap``.
    ///   - byName: The query is in name order alone (no sort key).
    static func ways(counts: [(place: Int, matches: Int)], byName: Bool) -> [RecordQueryWay] {
        guard let narrowest = counts.min(by: { $0.matches < $1.matches }) else { return [.walk(within: nil)] }
        if narrowest.matches < cap { return [.drive(narrowest.place)] }
        let found: RecordQueryWay = counts.count == 1 ? .drive(narrowest.place) : .intersect(counts.map(\.place))
        return byName ? [.walk(within: walkLimit), found] : [found]
    }
}
