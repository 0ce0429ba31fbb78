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

    /// The container's key as the server keeps it: wrapped by the passphrase, the links of its
    /// rotations, and for a member, the key wrapped to it.
    @Sendable func containerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        var info = Self.keyInfo(try await metadata.containerKey(account: target.accountID, container: target.container))
        guard info.encrypted else { return Self.json(info) }
        info.links = try await metadata.containerKeyLinks(account: target.accountID, container: target.container).map {
            Data($0).base64EncodedString()
        }
        if target.isMember {
            // A member opens its own wrapped key; the passphrase's is not for it to try to crack.
            info.wrapped = nil
            let wrapped = try await metadata.memberKey(
                owner: target.accountID, container: target.container, member: target.principal.accountID)
            info.memberWrapped = wrapped.map { Data($0.wrapped).base64EncodedString() }
        }
        return Self.json(info)
    }

    static func keyInfo(_ kept: (wrapped: [UInt8], keyID: String)?) -> ContainerKeyInfo {
        ContainerKeyInfo(
            encrypted: kept != nil, wrapped: kept.map { Data($0.wrapped).base64EncodedString() }, keyID: kept?.keyID)
    }

    /// Makes the container encrypted, changes its passphrase, or rotates its key (a `link`).
    @Sendable func setContainerKey(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(ContainerKeyWrite.self, request)
        if let link = try body.linkBytes(), let previous = try body.previousBytes() {
            try await metadata.rotateContainerKey(
                account: target.accountID, container: container, wrapped: try body.wrappedBytes(),
                previous: previous, keyID: body.keyID, link: link, memberKeys: try body.memberKeyBytes())
            changes.notify(account: target.accountID, container: container)
        } else {
            try await metadata.setContainerKey(
                account: target.accountID, container: container, wrapped: try body.wrappedBytes(),
                previous: try body.previousBytes(), keyID: body.keyID)
        }
        return try await containerKey(request, context: context)
    }
}
