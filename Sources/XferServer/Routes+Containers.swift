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
        let account = try context.requireAccount()
        let container = try Self.container(context)
        if let key = request.uri.queryParameters.get("key") {
            return Self.json(
                try await metadata.value(account: account.accountID, container: container, key: String(key)))
        }
        return Self.json(try await metadata.values(account: account.accountID, container: container))
    }

    @Sendable func setKeyValue(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        // The body's device stays as sent: in an end-to-end encrypted container it is sealed
        // inside the value too, and a reader checks that the two agree.
        let body = try await Self.decode(KeyValueWrite.self, request, limit: limits.maximumKeyValueBody)
        let result = try await metadata.setValue(account: account.accountID, container: container, body)
        if result.applied { changes.notify(account: account.accountID, container: container) }
        return Self.json(result)
    }

    // MARK: End-to-end encrypted containers

    @Sendable func containerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        return Self.json(
            Self.keyInfo(
                try await metadata.containerKey(account: account.accountID, container: try Self.container(context))))
    }

    static func keyInfo(_ kept: (wrapped: [UInt8], keyID: String)?) -> ContainerKeyInfo {
        ContainerKeyInfo(
            encrypted: kept != nil, wrapped: kept.map { Data($0.wrapped).base64EncodedString() }, keyID: kept?.keyID)
    }

    @Sendable func setContainerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let account = try context.requireAccount()
        let container = try Self.container(context)
        let body = try await Self.decode(ContainerKeyWrite.self, request)
        try await metadata.setContainerKey(
            account: account.accountID, container: container, wrapped: try body.wrappedBytes(),
            previous: try body.previousBytes(), keyID: body.keyID)
        return Self.json(
            Self.keyInfo(try await metadata.containerKey(account: account.accountID, container: container)))
    }
}
