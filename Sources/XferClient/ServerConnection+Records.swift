import Foundation
import XferCore
import XferProtocol

/// The records routes (docs/RECORDS.md), in CloudKit Web Services' JSON (``RecordJSON``).
extension ServerConnection {
    /// Sends `body` to the records route `route` of `container` (`records/modify`,
    /// `records/lookup`, `records/query`, `zones/list`, `zones/modify`, `changes/zone`,
    /// `changes/database`) and decodes the answer.
    public func records<Answer: Decodable>(
        _ route: RecordRoute, container: ContainerName, _ body: some Encodable, answer: Answer.Type
    ) async throws -> Answer {
        let bytes = try await send(
            "POST", "/v1/containers/\(container.pathSegment)/\(route.rawValue)", body: RecordJSON.encode(body),
            contentType: "application/json")
        do {
            return try RecordJSON.decode(Answer.self, from: bytes.readableBytesView)
        } catch {
            throw XferError(.internal, "the server's answer to \(route.rawValue) is not one: \(error)")
        }
    }
}

/// The records routes.
public enum RecordRoute: String, Sendable, CaseIterable {
    case modify = "records/modify"
    case lookup = "records/lookup"
    case query = "records/query"
    case zones = "zones/list"
    case modifyZones = "zones/modify"
    case zoneChanges = "changes/zone"
    case databaseChanges = "changes/database"
    case modifySubscriptions = "subscriptions/modify"
    case subscriptions = "subscriptions/list"
}

/// Records of one container, through its server: the typed calls an app makes (docs/RECORDS.md).
public struct RecordsClient: Sendable {
    /// The server and container.
    public let remote: Remote

    public init(remote: Remote) { self.remote = remote }

    /// Applies the operations; each result is the record saved or why not (`CONFLICT` with the
    /// server's record, to merge and retry).
    public func modify(_ request: RecordModifyRequest) async throws -> RecordResults {
        try await call(.modify, request, RecordResults.self)
    }

    /// The records named.
    public func lookup(_ request: RecordLookupRequest) async throws -> RecordResults {
        try await call(.lookup, request, RecordResults.self)
    }

    /// One page of a query.
    public func query(_ request: RecordQueryRequest) async throws -> RecordQueryResults {
        try await call(.query, request, RecordQueryResults.self)
    }

    /// The container's zones.
    public func zones() async throws -> ZoneList { try await call(.zones, [String: String](), ZoneList.self) }

    /// Makes or deletes zones.
    public func modifyZones(_ request: ZoneModifyRequest) async throws -> ZoneList {
        try await call(.modifyZones, request, ZoneList.self)
    }

    /// What changed in zones after their sync tokens.
    public func zoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesList {
        try await call(.zoneChanges, request, ZoneChangesList.self)
    }

    /// The zones that changed after a sync token.
    public func databaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChanges {
        try await call(.databaseChanges, request, DatabaseChanges.self)
    }

    /// Creates, replaces or deletes subscriptions.
    public func modifySubscriptions(_ request: SubscriptionModifyRequest) async throws -> SubscriptionList {
        try await call(.modifySubscriptions, request, SubscriptionList.self)
    }

    /// The container's subscriptions.
    public func subscriptions() async throws -> SubscriptionList {
        try await call(.subscriptions, [String: String](), SubscriptionList.self)
    }

    /// The notifications after `since`, waiting up to `wait` seconds for one when there are none.
    public func notifications(since: Int64, wait: Int = 0, limit: Int = RecordLimits.results) async throws
        -> NotificationList
    {
        let route =
            "/v1/containers/\(remote.container.pathSegment)/notifications?since=\(since)&wait=\(wait)&limit=\(limit)"
        let bytes = try await remote.connection.send("GET", route)
        do {
            return try RecordJSON.decode(NotificationList.self, from: bytes.readableBytesView)
        } catch {
            throw XferError(.internal, "the server's notifications are not a notification list: \(error)")
        }
    }

    private func call<Answer: Decodable>(_ route: RecordRoute, _ body: some Encodable, _ answer: Answer.Type)
        async throws -> Answer
    {
        try await remote.connection.records(route, container: remote.container, body, answer: answer)
    }
}
