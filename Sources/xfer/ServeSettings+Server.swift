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
        limits.webhooks = webhooks
        return limits
    }

    /// The keys that seal data at rest: those of `encryptionKeyFiles` and XFER_ENCRYPTION_KEY
    /// (`nil` when there are none).
    func sealingKeys() throws -> SealingKeys? {
        try SealingKeys.load(
            files: encryptionKeyFiles, environment: ProcessInfo.processInfo.environment["XFER_ENCRYPTION_KEY"])
    }

    /// The PostgreSQL metadata store when `metadata` names one, not yet connected: it runs as
    /// a service beside the server, and ``openStores(policy:keys:postgres:)`` migrates it.
    func postgresStore(policy: StorePolicy, keys: SealingKeys?) throws -> PostgresMetadataStore? {
        try metadata.map { try PostgresMetadataStore(configuring: $0, policy: policy, sealing: keys) }
    }

    /// Opens the stores: chunks in S3 (its bucket made if needed) when `chunks` is set, metadata in
    /// `postgres` (migrated here; its service must be running) when given, the rest in the data
    /// directory; sealed with `keys`.
    func openStores(policy: StorePolicy, keys: SealingKeys?, postgres: PostgresMetadataStore?) async throws
        -> ServerData
    {
        var objectStore: S3Client? = nil
        if let chunks {
            let client = S3Client(location: try S3Location(url: chunks, endpoint: s3Endpoint ?? ""))
            try await client.createBucketIfNeeded()
            objectStore = client
        }
        try await postgres?.prepare()
        return try await ServerData.open(
            data, policy: policy, sealing: keys, metadata: postgres,
            packs: objectStore.map { S3PackStorage(client: $0) })
    }
}
