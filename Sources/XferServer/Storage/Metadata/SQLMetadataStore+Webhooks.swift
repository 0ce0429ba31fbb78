import Foundation
import XferCore
import XferProtocol

// Subscription webhooks (docs/RECORDS.md, "Webhooks"): each subscription's URL and secret, the
// cursor of the last notification it delivered, and a claim that lets one server at a time
// deliver it. The cursor moves only after the receiver answered 2xx: at least once, in order.
extension SQLMetadataStore {
    public func claimWebhooks(limit: Int) async throws -> [DueWebhook] {
        // A read first, so that an idle server's polling writes nothing. The oldest due first,
        // and claimed in one order on every server, so two never wait on each other's rows.
        let candidates = try await read { tx in
            let now = try tx.clock() / 1_000_000
            return try tx.sql.rows(
                """
                SELECT w.container_id, w.subscription_id FROM record_webhooks w
                WHERE w.next_attempt_at <= ? AND w.lease_until <= ? AND (w.retired OR EXISTS (
                  SELECT 1 FROM record_notifications n WHERE n.container_id = w.container_id
                  AND n.subscription_id = w.subscription_id AND n.sequence > w.cursor))
                ORDER BY w.next_attempt_at, w.container_id, w.subscription_id LIMIT \(limit)
                """, now, now
            ).map {
                WebhookKey(containerID: try $0.int("container_id"), subscriptionID: try $0.text("subscription_id"))
            }
        }
        guard !candidates.isEmpty else { return [] }
        return try await write { tx in try candidates.compactMap(tx.claim) }
    }

    public func finishWebhook(_ key: WebhookKey, delivered cursor: Int64?, failure: String?, retryAfter: Int64)
        async throws
    {
        // Only under the claim this delivery was made under: one that ran past it (another
        // server may hold the webhook now) changes nothing, and its notifications go again.
        // A delivery puts the webhook behind those that have waited longer.
        try await write { tx in
            let now = try tx.clock() / 1_000_000
            if let cursor {
                try tx.sql.rows(
                    """
                    UPDATE record_webhooks SET cursor = CASE WHEN cursor < ? THEN ? ELSE cursor END, failures = 0,
                      last_error = NULL, next_attempt_at = ?, lease_until = 0, lease_token = NULL
                    WHERE container_id = ? AND subscription_id = ? AND lease_token = ?
                    """, cursor, cursor, now, key.containerID, key.subscriptionID, key.lease)
            } else {
                try tx.sql.rows(
                    """
                    UPDATE record_webhooks SET failures = failures + 1, last_error = ?, next_attempt_at = ?, lease_until = 0,
                      lease_token = NULL
                    WHERE container_id = ? AND subscription_id = ? AND lease_token = ?
                    """, String((failure ?? "failed").prefix(500)), now + retryAfter, key.containerID,
                    key.subscriptionID, key.lease)
            }
        }
    }
}

extension MetadataTransaction {
    /// Claims one webhook if no other server has meanwhile, with its next notifications; a
    /// retired one (its subscription fired once and went) with nothing left goes.
    func claim(_ key: WebhookKey) throws -> DueWebhook? {
        let now = try clock() / 1_000_000
        var key = key
        key.lease = TokenHash.generate()
        guard
            let row = try sql.one(
                """
                UPDATE record_webhooks SET lease_until = ?, lease_token = ? WHERE container_id = ? AND subscription_id = ?
                  AND lease_until <= ? AND next_attempt_at <= ? RETURNING *
                """, now + WebhookRules.lease, key.lease, key.containerID, key.subscriptionID, now, now)
        else { return nil }
        let notifications = try sql.rows(
            """
            SELECT * FROM record_notifications WHERE container_id = ? AND subscription_id = ? AND sequence > ?
            ORDER BY sequence LIMIT \(WebhookRules.batch)
            """, key.containerID, key.subscriptionID, try row.int("cursor")
        ).map(notification(row:))
        guard !notifications.isEmpty else {
            if try row.bool("retired") {
                try sql.rows(
                    "DELETE FROM record_webhooks WHERE container_id = ? AND subscription_id = ?", key.containerID,
                    key.subscriptionID)
            } else {
                try sql.rows(
                    "UPDATE record_webhooks SET lease_until = 0, lease_token = NULL WHERE container_id = ? AND subscription_id = ?",
                    key.containerID, key.subscriptionID)
            }
            return nil
        }
        guard
            let names = try sql.one(
                "SELECT a.name AS owner, c.name AS name FROM containers c JOIN accounts a ON a.id = c.account_id WHERE c.id = ?",
                key.containerID)
        else { return nil }
        return DueWebhook(
            key: key, url: try row.text("url"), secret: try row.text("secret"), failures: Int(try row.int("failures")),
            delivery: WebhookDelivery(
                container: "\(try names.text("owner"))/\(try names.text("name"))", subscriptionID: key.subscriptionID,
                notifications: notifications))
    }

    /// Sets (or with `nil` removes) a subscription's webhook. A new one starts after the
    /// notifications its subscription's name already has; a changed one keeps its place, and
    /// its secret unless given another.
    /// - Returns: The webhook as saved, its secret shown.
    @discardableResult
    func setWebhook(_ webhook: RecordWebhook?, container: Int64, _ id: String) throws -> RecordWebhook? {
        guard let webhook else {
            try sql.rows("DELETE FROM record_webhooks WHERE container_id = ? AND subscription_id = ?", container, id)
            return nil
        }
        // A change that gives no secret keeps the one the receiver has.
        let kept = try sql.one(
            "SELECT secret FROM record_webhooks WHERE container_id = ? AND subscription_id = ?", container, id)
        let secret =
            try webhook.secret.map { try WebhookRules.secret($0) } ?? kept?.text("secret") ?? WebhookRules.secret(nil)
        try sql.rows(
            """
            INSERT INTO record_webhooks (container_id, subscription_id, url, secret, cursor, failures, next_attempt_at,
              lease_until, retired)
            VALUES (?, ?, ?, ?, (SELECT COALESCE(MAX(sequence), 0) FROM record_notifications
              WHERE container_id = ? AND subscription_id = ?), 0, 0, 0, ?)
            ON CONFLICT (container_id, subscription_id) DO UPDATE SET url = excluded.url, secret = excluded.secret,
              failures = 0, last_error = NULL, next_attempt_at = 0, retired = excluded.retired
            """, container, id, webhook.url, secret, container, id, false)
        var saved = try self.webhook(container: container, id)
        saved?.secret = secret
        return saved
    }

    /// A subscription's webhook as `subscriptions/list` shows it: where its delivery stands,
    /// without its secret.
    func webhook(container: Int64, _ id: String) throws -> RecordWebhook? {
        guard
            let row = try sql.one(
                "SELECT * FROM record_webhooks WHERE container_id = ? AND subscription_id = ?", container, id)
        else { return nil }
        var webhook = RecordWebhook(url: try row.text("url"))
        webhook.deliveredCursor = try row.int("cursor")
        webhook.failures = Int(try row.int("failures"))
        webhook.lastError = try row.optionalText("last_error")
        let next = try row.int("next_attempt_at")
        webhook.nextAttempt = next > 0 ? next : nil
        return webhook
    }
}
