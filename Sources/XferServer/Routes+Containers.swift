import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// A container's key-value store and its end-to-end key.
extension Routes {
    @Sendable func keyValues(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        if let key = request.uri.queryParameters.get("key") {
            return Self.json(
                try await metadata.value(account: target.accountID, container: container, key: String(key)))
        }
        return Self.json(try await metadata.values(account: target.accountID, container: container))
    }

    @Sendable func setKeyValue(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        // The body's device stays as sent: in an end-to-end encrypted container it is sealed
        // inside the value too, and a reader checks that the two agree.
        let body = try await Self.decode(KeyValueWrite.self, request, limit: limits.maximumKeyValueBody)
        let result = try await metadata.setValue(account: target.accountID, container: container, body)
        if result.applied { changes.notify(account: target.accountID, container: container) }
        return Self.json(result)
    }

    // MARK: End-to-end encrypted containers

    @Sendable func containerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        return Self.json(
            Self.keyInfo(
                try await metadata.containerKey(account: target.accountID, container: target.container)))
    }

    static func keyInfo(_ kept: (wrapped: [UInt8], keyID: String)?) -> ContainerKeyInfo {
        ContainerKeyInfo(
            encrypted: kept != nil, wrapped: kept.map { Data($0.wrapped).base64EncodedString() }, keyID: kept?.keyID)
    }

    @Sendable func setContainerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(ContainerKeyWrite.self, request)
        // Members could read nothing sealed with a key only the owner's passphrase opens.
        guard try await metadata.members(owner: target.accountID, container: container).isEmpty else {
            throw XferError(
                .conflict,
                "container \(container) is shared with other accounts; encrypting it end to end would shut them out (unshare them first)"
            )
        }
        try await metadata.setContainerKey(
            account: target.accountID, container: container, wrapped: try body.wrappedBytes(),
            previous: try body.previousBytes(), keyID: body.keyID)
        return Self.json(
            Self.keyInfo(try await metadata.containerKey(account: target.accountID, container: container)))
    }
}
