import XferCore
import XferProtocol

/// Who writes records: the `userRecordName` and `deviceID` of `created` and `modified`.
public struct RecordWriter: Sendable, Hashable {
    public var account: String
    public var device: String?

    public init(account: String, device: String?) {
        self.account = account
        self.device = device
    }
}

/// Records beside documents (docs/RECORDS.md): zones of typed records in each container, saved
/// with change tags, fetched by name or by query, followed by sync tokens. Each method is one
/// transaction; the answers are CloudKit Web Services' shapes.
public protocol RecordStore: Sendable {
    /// Applies the operations in order, each alone or, with `atomic`, all or none.
    /// - Throws: `bad_request` for a request that is not valid as a whole (nothing applied).
    func modifyRecords(account: Int64, container: ContainerName, _ request: RecordModifyRequest, writer: RecordWriter)
        async throws -> RecordResults
    /// The records named, or `NOT_FOUND` for each that is not there.
    func lookupRecords(account: Int64, container: ContainerName, _ request: RecordLookupRequest) async throws
        -> RecordResults
    /// One page of the records a query selects.
    func queryRecords(account: Int64, container: ContainerName, _ request: RecordQueryRequest) async throws
        -> RecordQueryResults
    /// The container's zones (`_defaultZone` always).
    func zones(account: Int64, container: ContainerName) async throws -> ZoneList
    /// Makes or deletes zones, each alone.
    func modifyZones(account: Int64, container: ContainerName, _ request: ZoneModifyRequest) async throws -> ZoneList
    /// What changed in each zone after its sync token, in order, a page each.
    func zoneChanges(account: Int64, container: ContainerName, _ request: ZoneChangesRequest) async throws
        -> ZoneChangesList
    /// The zones that changed after a sync token.
    func databaseChanges(account: Int64, container: ContainerName, _ request: DatabaseChangesRequest) async throws
        -> DatabaseChanges
    /// Creates, replaces or deletes subscriptions, each alone.
    /// - Throws: `bad_request` for a subscription that is not valid (nothing changed).
    func modifySubscriptions(account: Int64, container: ContainerName, _ request: SubscriptionModifyRequest)
        async throws -> SubscriptionList
    /// The container's subscriptions.
    func subscriptions(account: Int64, container: ContainerName) async throws -> SubscriptionList
    /// The notifications after cursor `after`, in order, at most about `limit` (the notifications
    /// of one change are never split).
    func notifications(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws
        -> NotificationList
    /// Webhooks with notifications to deliver and no later attempt due, each claimed for
    /// ``WebhookRules/lease`` (another server on the same database passes it by meanwhile), at
    /// most `limit`, with its next notifications in order.
    func claimWebhooks(limit: Int) async throws -> [DueWebhook]
    /// Records how a claimed delivery went: delivered up to `cursor`, or failed for `failure`
    /// and due again `retryAfter` ms from now. Either way the claim ends.
    func finishWebhook(_ key: WebhookKey, delivered cursor: Int64?, failure: String?, retryAfter: Int64)
        async throws
}

/// A subscription's webhook: its container's row id and the subscription's name.
public struct WebhookKey: Sendable, Hashable {
    public var containerID: Int64
    public var subscriptionID: String
    /// The claim a delivery is made under: its outcome counts only while the claim holds.
    public var lease: String = ""
}

/// A webhook delivery to make: where, the secret to sign with, and the body.
public struct DueWebhook: Sendable, Hashable {
    public var key: WebhookKey
    public var url: String
    public var secret: String
    /// Failed attempts in a row before this one.
    public var failures: Int
    public var delivery: WebhookDelivery
}
