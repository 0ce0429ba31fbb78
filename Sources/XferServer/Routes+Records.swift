import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferProtocol

/// Records beside documents over /v1 (docs/RECORDS.md): CloudKit Web Services' routes and JSON,
/// under a container, with the account's token, as the container's role allows.
extension Routes {
    func registerRecords(on v1: RouterGroup<XferRequestContext>) {
        let store = metadata
        v1.post("containers/:container/records/modify", use: scoped(.write, modifyRecords))
        v1.post(
            "containers/:container/records/lookup",
            use: scoped(
                .read,
                records(RecordLookupRequest.self) {
                    try await store.lookupRecords(account: $0.accountID, container: $0.container, $1)
                }))
        v1.post(
            "containers/:container/records/query",
            use: scoped(
                .read,
                records(RecordQueryRequest.self) {
                    try await store.queryRecords(account: $0.accountID, container: $0.container, $1)
                }))
        let zones = scoped(.read) { _, context in
            let target = try context.requireTarget()
            return Self.records(try await store.zones(account: target.accountID, container: target.container))
        }
        v1.get("containers/:container/zones/list", use: zones)
        v1.post("containers/:container/zones/list", use: zones)
        v1.post(
            "containers/:container/zones/modify",
            use: scoped(
                .write,
                records(ZoneModifyRequest.self) {
                    try await store.modifyZones(account: $0.accountID, container: $0.container, $1)
                }))
        v1.post(
            "containers/:container/changes/zone",
            use: scoped(
                .read,
                records(ZoneChangesRequest.self) {
                    try await store.zoneChanges(account: $0.accountID, container: $0.container, $1)
                }))
        v1.post(
            "containers/:container/changes/database",
            use: scoped(
                .read,
                records(DatabaseChangesRequest.self) {
                    try await store.databaseChanges(account: $0.accountID, container: $0.container, $1)
                }))
        registerSubscriptions(on: v1)
    }

    /// Saves records as the asking account and its token's device, and wakes the change feed.
    @Sendable func modifyRecords(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let body = try await Self.records(RecordModifyRequest.self, request)
        let writer = RecordWriter(account: target.principal.name, device: target.principal.device)
        let results = try await metadata.modifyRecords(
            account: target.accountID, container: target.container, body, writer: writer)
        if results.records.contains(where: { $0.record != nil }) {
            changes.notify(account: target.accountID, container: target.container)
        }
        return Self.records(results)
    }

    /// A route that decodes its body, asks the store and answers, all in CloudKit's JSON.
    func records<Body: Decodable & Sendable, Answer: Encodable & Sendable>(
        _ body: Body.Type, _ call: @escaping @Sendable (ContainerTarget, Body) async throws -> Answer
    ) -> Handler {
        { request, context in
            let target = try context.requireTarget()
            return Self.records(try await call(target, try await Self.records(Body.self, request)))
        }
    }

    static func records(_ value: some Encodable) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: RecordJSON.encode(value))))
    }
}
