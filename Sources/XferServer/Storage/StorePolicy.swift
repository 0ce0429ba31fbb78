import Foundation
import XferCore
import XferProtocol

/// What the metadata store keeps and how much: version retention and key-value limits.
public struct StorePolicy: Sendable, Hashable {
    /// Superseded versions kept per document whatever their age.
    public var keepVersions = 10
    /// Superseded versions younger than this many days are kept whatever their number.
    public var keepDays = 30
    /// Live keys per container's key-value store.
    public var keyValueMaximumKeys = 1024
    /// Bytes (keys plus JSON values) per container's key-value store.
    public var keyValueMaximumBytes = 1 << 20

    /// Containers per account (each has its own key-value store and feed).
    public var maximumContainers = 1000
    /// Bytes of metadata an account keeps beside its documents, in all its containers: its
    /// key-value entries (keys and stored values), WebDAV dead properties and WebDAV lock
    /// owners, counted in characters as stored. Outside the quota, which counts chunks and
    /// version records (``QuotaRules/versionCost(manifestBytes:)``), and so bounded on its own.
    public var accountMetadataBytes = 32 << 20
    /// Versions announced and not yet committed, per account, at once.
    public var maximumPendingVersions = 10_000

    /// The defaults: 10 versions / 30 days; 1024 keys / 1 MiB, as Apple's key-value store;
    /// 1,000 containers and 10,000 pending versions per account.
    public init() {}
}
