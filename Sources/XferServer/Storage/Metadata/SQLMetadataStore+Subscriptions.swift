import Foundation
import XferCore
import XferProtocol

// Subscriptions to records and their notifications (docs/RECORDS.md, "Subscriptions").
extension SQLMetadataStore {
    public func modifySubscriptions(
        account: Int64, container: ContainerName, _ request: SubscriptionModifyRequest
    ) async throws -> SubscriptionList {
        guard (1...RecordLimits.operations).contains(request.operations.count) else {
            throw XferError(.badRequest, "subscriptions/modify takes 1 to \(RecordLimits.operations) operations")
        }
        for operation in request.operations { try RecordRules.check(operation.subscription) }
        return try await write { tx in
            let containerID = try tx.recordContainer(account: account, name: container)
            return SubscriptionList(
                subscriptions: try request.operations.map { try tx.apply($0, container: containerID) })
        }
    }

    public func subscriptions(account: Int64, container: ContainerName) async throws -> SubscriptionList {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return SubscriptionList(subscriptions: [])
            }
            return SubscriptionList(
                subscriptions: try tx.sql.rows(
                    "SELECT * FROM record_subscriptions WHERE container_id = ? ORDER BY subscription_id\(tx.dialect.bytewise)",
                    containerID
                ).map { row in
                    var subscription = try tx.subscription(row: row)
                    subscription.webhook = try tx.webhook(container: containerID, subscription.subscriptionID)
                    return SubscriptionResult(subscription)
                })
        }
    }

    public func notifications(account: Int64, container: ContainerName, after: Int64, limit: Int) async throws
        -> NotificationList
    {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return NotificationList(notifications: [], cursor: after, moreComing: false)
            }
            // Whole changes only: up to the change of the limit-th notification.
            let last = try tx.sql.int(
                """
                SELECT MAX(sequence) FROM (SELECT sequence FROM record_notifications WHERE container_id = ? AND sequence > ?
                ORDER BY sequence LIMIT \(limit)) page
                """, containerID, after)
            guard let last else { return NotificationList(notifications: [], cursor: after, moreComing: false) }
            let notifications = try tx.sql.rows(
                """
                SELECT * FROM record_notifications WHERE container_id = ? AND sequence > ? AND sequence <= ?
                ORDER BY sequence, subscription_id\(tx.dialect.bytewise)
                """, containerID, after, last
            ).map(tx.notification(row:))
            let more =
                try tx.sql.one(
                    "SELECT 1 FROM record_notifications WHERE container_id = ? AND sequence > ? LIMIT 1", containerID,
                    last)
                != nil
            return NotificationList(notifications: notifications, cursor: last, moreComing: more)
        }
    }
}

extension MetadataTransaction {
    /// One subscriptions/modify operation.
    func apply(_ operation: SubscriptionOperation, container: Int64) throws -> SubscriptionResult {
        let subscription = operation.subscription
        let id = subscription.subscriptionID
        let exists =
            try sql.one(
                "SELECT 1 FROM record_subscriptions WHERE container_id = ? AND subscription_id = ?", container, id)
            != nil
        switch operation.operationType {
        case .delete:
            guard exists else {
                return SubscriptionResult(
                    subscriptionID: id, error: RecordErrorCode.notFound, reason: "there is no subscription \(id)")
            }
            try sql.rows(
                "DELETE FROM record_subscriptions WHERE container_id = ? AND subscription_id = ?", container, id)
            try setWebhook(nil, container: container, id)
            return SubscriptionResult(deleted: id)
        case .create, .update:
            if operation.operationType == .create, exists {
                return SubscriptionResult(
                    subscriptionID: id, error: RecordErrorCode.exists, reason: "subscription \(id) exists already")
            }
            if operation.operationType == .update, !exists {
                return SubscriptionResult(
                    subscriptionID: id, error: RecordErrorCode.notFound, reason: "there is no subscription \(id)")
            }
            let count = try sql.int("SELECT COUNT(*) FROM record_subscriptions WHERE container_id = ?", container) ?? 0
            guard exists || count < RecordLimits.subscriptions else {
                return SubscriptionResult(
                    subscriptionID: id, error: RecordErrorCode.limitExceeded,
                    reason: "a container has at most \(RecordLimits.subscriptions) subscriptions")
            }
            let query = subscription.subscriptionType == .query ? subscription.query : nil
            let events = (subscription.firesOn ?? RecordSubscription.Event.allCases).map(\.rawValue)
            try sql.rows(
                """
                INSERT INTO record_subscriptions (container_id, subscription_id, zone_name, kind, query, fires_on, fires_once)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (container_id, subscription_id) DO UPDATE SET zone_name = excluded.zone_name,
                  kind = excluded.kind, query = excluded.query, fires_on = excluded.fires_on, fires_once = excluded.fires_once
                """, container, id, try RecordRules.zoneName(subscription.zoneID),
                subscription.subscriptionType.rawValue,
                query.map { String(decoding: RecordJSON.encode($0), as: UTF8.self) }, events.joined(separator: ","),
                subscription.firesOnce ?? false)
            var saved = try self.subscription(
                row: try sql.one(
                    "SELECT * FROM record_subscriptions WHERE container_id = ? AND subscription_id = ?", container, id)!
            )
            saved.webhook = try setWebhook(subscription.webhook, container: container, id)
            return SubscriptionResult(saved)
        }
    }
}
