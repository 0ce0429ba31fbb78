/// Runs `body` for every element of `items` with at most `width` running at once; the first
/// error cancels the rest and is rethrown. (Bounded fan-out for request-per-item work such as
/// object-store PUTs and GETs.)
public func concurrentForEach<C: Collection & Sendable>(
    _ items: C, width: Int,
    _ body: @escaping @Sendable (C.Element) async throws -> Void
) async throws
where C.Element: Sendable {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var running = 0
        for item in items {
            if running >= max(1, width) {
                try await group.next()
                running -= 1
            }
            group.addTask { try await body(item) }
            running += 1
        }
        try await group.waitForAll()
    }
}
