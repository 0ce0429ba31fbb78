import Foundation
import XferCore
import XferProtocol
import XferServer

/// What `xfer serve` makes of its settings: the store's policy, the server's limits, and the
/// stores it opens.
extension ServeSettings {
    /// How long versions are kept and how large a container's key-value store may grow.
    var storePolicy: StorePolicy {
        var policy = StorePolicy()
        policy.keepVersions = keepVersions
        policy.keepDays = keepDays
        policy.keyValueMaximumKeys = kvMaxKeys
        policy.keyValueMaximumBytes = Int(clamping: kvMaxBytes)
        return policy
    }

    /// The server's limits from these settings, the store's `policy` and the process's
    /// open-file limit (which bounds the connections it takes).
    func serverLimits(policy: StorePolicy, descriptorLimit descriptors: Int) -> ServerLimits {
        var limits = ServerLimits()
        limits.defaultQuota = defaultQuota
        limits.maximumWait = max(0, min(maxWait, ProtocolLimits.maximumWaitSeconds))
        limits.maximumKeyValueBody = ServerLimits.keyValueBody(storeBytes: policy.keyValueMaximumBytes)
        limits.idleTimeout = .seconds(idleTimeout)
        limits.listPage = listPage
        // Behind a TLS proxy the browser speaks HTTPS: cookies and links say so.
        limits.secureCookies = behindTLSProxy
        limits.features.subtract(withoutFeatures.compactMap(ServerFeature.init(rawValue:)))
        // Behind a proxy every client arrives from the proxy's address: only the total cap means anything.
        limits.maximumConnectionsPerAddress =
            maxConnectionsPerAddress
            ?? (behindTLSProxy ? limits.maximumConnections : ServerLimits().maximumConnectionsPerAddress)
        limits.maximumConnections = ConnectionGuard.connectionCap(descriptorLimit: descriptors)
        limits.tokens.requestsPerSecond = rateLimit
        limits.tokens.burst = rateBurst
        limits.tokens.uploadsAtOnce = uploadsPerToken
        return limits
    }

    /// Opens the stores: chunks in S3 (its bucket made if needed) when `chunks` is set, metadata in
    /// PostgreSQL when `metadata` is, the rest in the data directory; sealed with the keys of
    /// `encryptionKeyFiles` and XFER_ENCRYPTION_KEY.
    /// - Returns: The stores and the sealing keys (`nil` when there are none).
    func openStores(policy: StorePolicy) async throws -> (ServerData, SealingKeys?) {
        var objectStore: S3Client? = nil
        if let chunks {
            let client = S3Client(location: try S3Location(url: chunks, endpoint: s3Endpoint ?? ""))
            try await client.createBucketIfNeeded()
            objectStore = client
        }
        var database: PostgresMetadataStore? = nil
        let keys = try SealingKeys.load(
            files: encryptionKeyFiles, environment: ProcessInfo.processInfo.environment["XFER_ENCRYPTION_KEY"])
        if let metadata {
            database = try await PostgresMetadataStore(url: metadata, policy: policy, sealing: keys)
        }
        let store = try await ServerData.open(
            data, policy: policy, sealing: keys, metadata: database,
            packs: objectStore.map { S3PackStorage(client: $0) })
        return (store, keys)
    }
}
