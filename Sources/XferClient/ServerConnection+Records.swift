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
    /// server's record, to merge and retry). Fields marked `isEncrypted` are sealed first.
    /// - Throws: `encrypted_container` for a field marked `isEncrypted` in a container that is
    ///   not end-to-end encrypted (nothing is sent).
    public func modify(_ request: RecordModifyRequest) async throws -> RecordResults {
        var request = request
        let zone = (request.zoneID ?? .defaultZone).zoneName
        if let sealing = try await sealing(needed: RecordSealing.wanted(request.operations.map(\.record))) {
            for index in request.operations.indices {
                let record = request.operations[index].record
                request.operations[index].record.fields = record.fields.map {
                    sealing.seal($0, zone: zone, record: record.recordName)
                }
            }
        }
        var answer = try await call(.modify, request, RecordResults.self)
        answer.records = try await opened(answer.records, zone: zone)
        return answer
    }

    /// The records named, encrypted fields opened.
    public func lookup(_ request: RecordLookupRequest) async throws -> RecordResults {
        var answer = try await call(.lookup, request, RecordResults.self)
        answer.records = try await opened(answer.records, zone: (request.zoneID ?? .defaultZone).zoneName)
        return answer
    }

    /// One page of a query, encrypted fields opened (a query cannot filter or sort by them).
    public func query(_ request: RecordQueryRequest) async throws -> RecordQueryResults {
        try RecordSealing.checkQuery(request.query)
        var answer = try await call(.query, request, RecordQueryResults.self)
        answer.records = try await opened(answer.records, zone: (request.zoneID ?? .defaultZone).zoneName)
        return answer
    }

    /// The container's record sealing: from the remote's keys, or when `needed` from the keys
    /// this device holds for it.
    /// - Throws: `encrypted_container` when needed and the container is not end-to-end encrypted.
    private func sealing(needed: Bool) async throws -> RecordSealing? {
        if let keys = remote.endToEnd { return RecordSealing(keys.ring) }
        guard needed else { return nil }
        guard let keys = try await remote.unlocked().endToEnd else {
            throw XferError(
                .encryptedContainer,
                "container \(remote.container) is not end-to-end encrypted, so a field marked isEncrypted cannot be sealed; nothing was sent. Keep such records in a container made with `xfer container create NAME --encrypted`"
            )
        }
        return RecordSealing(keys.ring)
    }

    /// `results` with sealed fields opened when this device holds the container's keys (left
    /// sealed when it does not).
    private func opened(_ results: [RecordResult], zone: String) async throws -> [RecordResult] {
        guard RecordSealing.present(results) else { return results }
        var keys = remote.endToEnd
        if keys == nil { keys = try? await remote.unlocked().endToEnd }
        guard let keys else { return results }
        return RecordSealing(keys.ring).open(results, zone: zone)
    }

    /// The container's zones.
    public func zones() async throws -> ZoneList { try await call(.zones, [String: String](), ZoneList.self) }

    /// Makes or deletes zones.
    public func modifyZones(_ request: ZoneModifyRequest) async throws -> ZoneList {
        try await call(.modifyZones, request, ZoneList.self)
    }

    /// What changed in zones after their sync tokens, encrypted fields opened.
    public func zoneChanges(_ request: ZoneChangesRequest) async throws -> ZoneChangesList {
        var answer = try await call(.zoneChanges, request, ZoneChangesList.self)
        for index in answer.zones.indices {
            answer.zones[index].records = try await opened(
                answer.zones[index].records, zone: answer.zones[index].zoneID.zoneName)
        }
        return answer
    }

    /// The zones that changed after a sync token.
    public func databaseChanges(_ request: DatabaseChangesRequest) async throws -> DatabaseChanges {
        try await call(.databaseChanges, request, DatabaseChanges.self)
    }

    /// Creates, replaces or deletes subscriptions (a query naming a value marked `isEncrypted`
    /// is refused, as a query is).
    public func modifySubscriptions(_ request: SubscriptionModifyRequest) async throws -> SubscriptionList {
        for query in request.operations.compactMap(\.subscription.query) { try RecordSealing.checkQuery(query) }
        return try await call(.modifySubscriptions, request, SubscriptionList.self)
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
