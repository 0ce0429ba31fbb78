import Synchronization

/// Remembers a store's deployment identity after the first read.
final class DeploymentCache: Sendable {
    private let cached = Mutex<String?>(nil)

    /// The identity, read from `store` the first time.
    func value(from store: any MetadataStore) async throws -> String {
        if let known = cached.withLock({ $0 }) { return known }
        let read = try await store.deploymentID()
        cached.withLock { $0 = read }
        return read
    }
}
