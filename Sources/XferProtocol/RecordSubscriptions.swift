import Foundation
import XferCore

// Subscriptions to records and the notifications they make (docs/RECORDS.md,
// "Subscriptions"), in CloudKit Web Services' shapes; coded with ``RecordJSON``.

/// What a subscription watches: records a query selects (`query`), or every record of a zone (`zone`).
public struct RecordSubscription: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable { case query, zone }
    public enum Event: String, Codable, Sendable, Hashable, CaseIterable { case create, update, delete }

    /// Its name, unique in the container: 1 to 255 bytes.
    public var subscriptionID: String
    public var subscriptionType: Kind
    /// For a query subscription: the records it watches (`recordType` and `filterBy`; a sort is ignored).
    public var query: RecordQuery?
    /// The zone it watches (`_defaultZone` when absent).
    public var zoneID: ZoneID?
    /// For a query subscription: which changes notify (all three when absent). A record
    /// notifies `create` when made matching, `update` when it matches after a change, `delete`
    /// when it matched before being deleted.
    public var firesOn: [Event]?
    /// Whether the subscription is deleted once it has fired.
    public var firesOnce: Bool?
    /// Where its notifications are also POSTed (xfer's own; CloudKit pushes through APNs).
    public var webhook: RecordWebhook?

    public init(
        subscriptionID: String, subscriptionType: Kind, query: RecordQuery? = nil, zoneID: ZoneID? = nil,
        firesOn: [Event]? = nil, firesOnce: Bool? = nil, webhook: RecordWebhook? = nil
    ) {
        self.subscriptionID = subscriptionID
        self.subscriptionType = subscriptionType
        self.query = query
        self.zoneID = zoneID
        self.firesOn = firesOn
        self.firesOnce = firesOnce
        self.webhook = webhook
    }

    enum CodingKeys: String, CodingKey {
        case subscriptionID, subscriptionType, query, zoneID, firesOn, firesOnce, webhook
    }
}

/// A URL a subscription's notifications are POSTed to, in order and at least once, each body
/// signed with HMAC-SHA-256 under `secret` (docs/RECORDS.md, "Webhooks").
public struct RecordWebhook: Codable, Sendable, Hashable {
    /// An `https` (or `http`) URL.
    public var url: String
    /// The signing key, 16 to 256 characters: given on save, or made by the server when not.
    /// Only the answer of a save shows it; a list leaves it out.
    public var secret: String?
    /// The cursor of the last notification delivered (the server's report; ignored on save).
    public var deliveredCursor: Int64?
    /// Attempts that failed since the last delivery.
    public var failures: Int?
    /// Why the last attempt failed.
    public var lastError: String?
    /// When the next attempt is due after a failure (milliseconds since 1970).
    public var nextAttempt: Int64?

    public init(url: String, secret: String? = nil) {
        self.url = url
        self.secret = secret
    }

    enum CodingKeys: String, CodingKey { case url, secret, deliveredCursor, failures, lastError, nextAttempt }
}

/// The body of one webhook delivery: the subscription's next notifications, in order.
public struct WebhookDelivery: Codable, Sendable, Hashable {
    /// `OWNER/NAME`.
    public var container: String
    public var subscriptionID: String
    public var notifications: [RecordNotification]

    public init(container: String, subscriptionID: String, notifications: [RecordNotification]) {
        self.container = container
        self.subscriptionID = subscriptionID
        self.notifications = notifications
    }

    enum CodingKeys: String, CodingKey { case container, subscriptionID, notifications }
}

/// One operation of `subscriptions/modify`.
public struct SubscriptionOperation: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable { case create, update, delete }

    public var operationType: Kind
    public var subscription: RecordSubscription

    public init(_ type: Kind, _ subscription: RecordSubscription) {
        operationType = type
        self.subscription = subscription
    }

    enum CodingKeys: String, CodingKey { case operationType, subscription }
}

/// `subscriptions/modify`.
public struct SubscriptionModifyRequest: Codable, Sendable, Hashable {
    public var operations: [SubscriptionOperation]

    public init(operations: [SubscriptionOperation]) { self.operations = operations }
}

/// A subscription, or why an operation on it failed.
public struct SubscriptionResult: Codable, Sendable, Hashable {
    public var subscription: RecordSubscription?
    public var subscriptionID: String?
    public var deleted: Bool?
    public var reason: String?
    public var serverErrorCode: String?

    public init(_ subscription: RecordSubscription) { self.subscription = subscription }

    public init(deleted id: String) {
        subscriptionID = id
        deleted = true
    }

    public init(subscriptionID: String, error code: String, reason: String) {
        self.subscriptionID = subscriptionID
        serverErrorCode = code
        self.reason = reason
    }

    /// A subscription's dictionary on its own, or an error or deletion dictionary.
    public func encode(to encoder: any Encoder) throws {
        if let subscription { return try subscription.encode(to: encoder) }
        var container = encoder.container(keyedBy: Keys.self)
        try container.encodeIfPresent(subscriptionID, forKey: .subscriptionID)
        try container.encodeIfPresent(deleted, forKey: .deleted)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(serverErrorCode, forKey: .serverErrorCode)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Keys.self)
        if container.contains(.subscriptionType) {
            subscription = try RecordSubscription(from: decoder)
        } else {
            subscriptionID = try container.decodeIfPresent(String.self, forKey: .subscriptionID)
            deleted = try container.decodeIfPresent(Bool.self, forKey: .deleted)
            reason = try container.decodeIfPresent(String.self, forKey: .reason)
            serverErrorCode = try container.decodeIfPresent(String.self, forKey: .serverErrorCode)
        }
    }

    enum Keys: String, CodingKey { case subscriptionID, subscriptionType, deleted, reason, serverErrorCode }
}

/// The answer of `subscriptions/modify` and `subscriptions/list`.
public struct SubscriptionList: Codable, Sendable, Hashable {
    public var subscriptions: [SubscriptionResult]

    public init(subscriptions: [SubscriptionResult]) { self.subscriptions = subscriptions }
}

/// A change a subscription was told of.
public struct RecordNotification: Codable, Sendable, Hashable {
    /// Its place in the container's notifications: give the last one seen as `since`.
    public var cursor: Int64
    public var subscriptionID: String
    public var zoneID: ZoneID
    public var recordName: String
    public var recordType: String?
    /// `create`, `update` or `delete`.
    public var reason: RecordSubscription.Event
    /// When the change was saved (milliseconds since 1970).
    public var timestamp: Int64

    public init(
        cursor: Int64, subscriptionID: String, zoneID: ZoneID, recordName: String, recordType: String?,
        reason: RecordSubscription.Event, timestamp: Int64
    ) {
        self.cursor = cursor
        self.subscriptionID = subscriptionID
        self.zoneID = zoneID
        self.recordName = recordName
        self.recordType = recordType
        self.reason = reason
        self.timestamp = timestamp
    }

    enum CodingKeys: String, CodingKey {
        case cursor, subscriptionID, zoneID, recordName, recordType, reason, timestamp
    }
}

/// `GET /v1/containers/{c}/notifications?since=&wait=&limit=`: the notifications after `since`,
/// in order.
public struct NotificationList: Codable, Sendable, Hashable {
    public var notifications: [RecordNotification]
    /// Where this page ends: the next `since`.
    public var cursor: Int64
    public var moreComing: Bool

    public init(notifications: [RecordNotification], cursor: Int64, moreComing: Bool) {
        self.notifications = notifications
        self.cursor = cursor
        self.moreComing = moreComing
    }

    enum CodingKeys: String, CodingKey { case notifications, cursor, moreComing }
}
