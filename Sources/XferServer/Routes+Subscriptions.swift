import Foundation
import Hummingbird
import XferCore
import XferProtocol

/// Subscriptions to records and their notifications over /v1 (docs/RECORDS.md, "Subscriptions").
extension Routes {
    func registerSubscriptions(on v1: RouterGroup<XferRequestContext>) {
        let store = metadata
        let destinations = limits.webhooks
        v1.post(
            "containers/:container/subscriptions/modify",
            use: scoped(
                .write,
                records(SubscriptionModifyRequest.self) { target, request in
                    for case let webhook? in request.operations.map(\.subscription.webhook) {
                        try await WebhookAddresses.check(try WebhookRules.check(url: webhook.url), destinations)
                    }
                    return try await store.modifySubscriptions(
                        account: target.accountID, container: target.container, request)
                }))
        let list = scoped(.read) { _, context in
            let target = try context.requireTarget()
            return Self.records(try await store.subscriptions(account: target.accountID, container: target.container))
        }
        v1.get("containers/:container/subscriptions/list", use: list)
        v1.post("containers/:container/subscriptions/list", use: list)
        v1.get("containers/:container/notifications", use: scoped(.read, notifications))
    }

    /// `?since=CURSOR&limit=&wait=SECONDS`: the notifications after the cursor, answering the
    /// moment one arrives when there are none yet (the change feed's long poll).
    @Sendable func notifications(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let since = try Self.optionalInt(request, "since") ?? 0
        let limit = try Self.intParameter(request, "limit", default: 200, range: 1...RecordLimits.results)
        let wait = min(
            limits.maximumWait,
            try Self.intParameter(request, "wait", default: 0, range: 0...ProtocolLimits.maximumWaitSeconds))
        let store = metadata
        let (account, container) = (target.accountID, target.container)
        var list = try await store.notifications(account: account, container: container, after: since, limit: limit)
        if list.notifications.isEmpty && wait > 0 {
            let present = try await longPoll(target, context: context, seconds: wait, feed: "notification") {
                let page = try? await store.notifications(
                    account: account, container: container, after: since, limit: 1)
                return page?.notifications.isEmpty == false
            }
            if present {
                list = try await store.notifications(account: account, container: container, after: since, limit: limit)
            }
        }
        return Self.records(list)
    }
}
