import Foundation
import XferCore
import XferProtocol

// Subscriptions to records (docs/RECORDS.md, "Subscriptions"): whether a change fires one is
// decided by the query's own SQL (RecordQuerySQL) restricted to the changed record, so a
// subscription and a query select by one rule.
extension MetadataTransaction {
    /// Notifies each subscription of the scope's zone that `event` on record `record` (row id)
    /// fires, at change number `sequence`. Called after a write (the record as it is now) and
    /// before a deletion (as it was). The zone's subscriptions are read once a request.
    func fireSubscriptions(
        record: Int64, name: String, type: String, event: RecordSubscription.Event, sequence: Int64,
        in scope: RecordWriteScope
    ) throws {
        let (container, zone, zoneName) = (scope.container, scope.zone.id, scope.zone.name)
        if scope.subscriptions == nil {
            scope.subscriptions = try sql.rows(
                "SELECT * FROM record_subscriptions WHERE container_id = ? AND zone_name = ?", container, zoneName
            ).map(subscription(row:))
        }
        for subscription in scope.subscriptions ?? [] {
            guard try fires(subscription, zone: zone, record: record, type: type, event: event) else { continue }
            try sql.rows(
                """
                INSERT INTO record_notifications (container_id, sequence, subscription_id, zone_name, record_name,
                  record_type, reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, container, sequence, subscription.subscriptionID, zoneName, name, type, event.rawValue,
                try clock() / 1_000_000)
            if subscription.firesOnce == true {
                scope.subscriptions?.removeAll { $0.subscriptionID == subscription.subscriptionID }
                try sql.rows(
                    "DELETE FROM record_subscriptions WHERE container_id = ? AND subscription_id = ?", container,
                    subscription.subscriptionID)
                // Its webhook stays until it has delivered this notification.
                try sql.rows(
                    "UPDATE record_webhooks SET retired = ? WHERE container_id = ? AND subscription_id = ?", true,
                    container, subscription.subscriptionID)
            }
        }
    }

    private func fires(
        _ subscription: RecordSubscription, zone: Int64, record: Int64, type: String, event: RecordSubscription.Event
    ) throws -> Bool {
        guard let query = subscription.query, subscription.subscriptionType == .query else { return true }
        guard (subscription.firesOn ?? RecordSubscription.Event.allCases).contains(event), query.recordType == type
        else {
            return false
        }
        var filters = query
        filters.sortBy = nil
        let test = try RecordQuerySQL(filters, zone: zone, offset: 0, limit: 1, dialect: sql.dialect, record: record)
            .statement(.walk(within: nil))
        return try !sql.rows(test.sql, test.values).isEmpty
    }

    /// A subscription from its row.
    func subscription(row: SQLRow) throws -> RecordSubscription {
        let zone = ZoneID(zoneName: try row.text("zone_name"))
        let query = try row.optionalText("query").map { try RecordJSON.decode(RecordQuery.self, from: Array($0.utf8)) }
        let events = try row.text("fires_on").split(separator: ",").compactMap {
            RecordSubscription.Event(rawValue: String($0))
        }
        return RecordSubscription(
            subscriptionID: try row.text("subscription_id"),
            subscriptionType: query == nil ? .zone : .query, query: query, zoneID: zone,
            firesOn: query == nil ? nil : events, firesOnce: try row.bool("fires_once"))
    }

    /// A notification from its row.
    func notification(row: SQLRow) throws -> RecordNotification {
        RecordNotification(
            cursor: try row.int("sequence"), subscriptionID: try row.text("subscription_id"),
            zoneID: ZoneID(zoneName: try row.text("zone_name")), recordName: try row.text("record_name"),
            recordType: try row.optionalText("record_type"),
            reason: RecordSubscription.Event(rawValue: try row.text("reason")) ?? .update,
            timestamp: try row.int("created_at"))
    }

    /// Drops notifications older than a week (clients that follow read them long before), but
    /// those a webhook has still to deliver only after ``WebhookRules/keepUndelivered``.
    func pruneNotifications(container: Int64) throws {
        let now = try clock() / 1_000_000
        try sql.rows(
            """
            DELETE FROM record_notifications WHERE container_id = ? AND created_at < ? AND (created_at < ? OR NOT EXISTS (
              SELECT 1 FROM record_webhooks w WHERE w.container_id = record_notifications.container_id
              AND w.subscription_id = record_notifications.subscription_id AND w.cursor < record_notifications.sequence))
            """, container, now - 7 * 86_400_000, now - WebhookRules.keepUndelivered)
    }
}
