extension Collection {
    /// Consecutive groups of at most `count` elements whose costs add up to at most `budget` (an
    /// element that alone costs more goes in a group of its own): how batch requests,
    /// upload packs and migration batches are cut.
    package func batched(atMost count: Int, budget: Int = .max, cost: (Element) -> Int = { _ in 0 }) -> [[Element]] {
        var groups: [[Element]] = []
        var current: [Element] = []
        var spent = 0
        for element in self {
            let price = cost(element)
            if !current.isEmpty && (current.count == count || spent + price > budget) {
                groups.append(current)
                current = []
                spent = 0
            }
            current.append(element)
            spent += price
        }
        if !current.isEmpty { groups.append(current) }
        return groups
    }
}
