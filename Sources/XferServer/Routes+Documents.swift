import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The routes that read and delete documents: listing, search, stat, manifests, the change feed, versions, conflicts.
extension Routes {
    @Sendable func list(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let prefix = request.uri.queryParameters.get("prefix").map { String($0) } ?? ""
        guard prefix.utf8.count <= DocumentPathRules.maximumPathBytes, !prefix.utf8.contains(0) else {
            throw XferError(.invalidPath, "prefix is too long or contains NUL")
        }
        let limit = try Self.intParameter(
            request, "limit", default: ProtocolLimits.maximumListCount, range: 1...ProtocolLimits.maximumListCount)
        let page = request.uri.queryParameters.get("page").map { String($0) }
        guard (page?.utf8.count ?? 0) <= DocumentPathRules.maximumPathBytes else {
            throw XferError(.badRequest, "page is not a token this server gave")
        }
        var list = try await metadata.list(
            account: target.accountID, container: target.container,
            prefix: prefix.precomposedStringWithCanonicalMapping, after: page,
            limit: min(limit, limits.listPage))
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    /// `GET /v1/containers/{c}/query`: one page of a search (``DocumentQuery``'s parameters,
    /// `limit`, `page`).
    @Sendable func query(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        guard limits.features.contains(.documentQuery) else {
            throw XferError(
                .notFound,
                "this server answers no queries (started with --without-feature \(ServerFeature.documentQuery.rawValue))"
            )
        }
        let container = target.container
        let parameters = request.uri.queryParameters
        let query = try DocumentQuery(parameter: { key in parameters.get(key).map { String($0) } })
        if query.name != nil || query.sort == .name,
            try await metadata.containerKey(account: target.accountID, container: container) != nil
        {
            throw XferError(
                .badRequest,
                "container \(container) is end-to-end encrypted: the server holds only sealed names, so names are matched on a device that holds the key (xfer find does this)"
            )
        }
        let limit = try Self.intParameter(
            request, "limit", default: ProtocolLimits.maximumListCount, range: 1...ProtocolLimits.maximumListCount)
        let page = parameters.get("page").map { String($0) }
        var list = try await metadata.query(
            account: target.accountID, container: container, query, after: page,
            limit: min(limit, limits.listPage))
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    @Sendable func stat(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        return Self.json(
            try await metadata.document(
                account: target.accountID, container: target.container,
                path: try Self.path(request), version: try Self.optionalInt(request, "version")))
    }

    @Sendable func delete(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let base = try Self.optionalInt(request, "base_version")
        let seal = request.uri.queryParameters.get("seal")
        // End to end, a device removes its copy only for a deletion another device sealed: one
        // without a seal would stay on every device, so none is taken.
        if try await metadata.containerKey(account: target.accountID, container: container) != nil {
            guard let seal, seal.utf8.count == 64,
                seal.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }), base != nil
            else {
                throw XferError(
                    .encryptedContainer,
                    "a deletion in an end-to-end encrypted container names its base version and carries its seal (64 hex digits); update xfer"
                )
            }
        }
        let info = try await metadata.delete(
            account: target.accountID, container: container, path: try Self.path(request), baseVersion: base,
            seal: seal)
        changes.notify(account: target.accountID, container: container)
        return Self.json(info)
    }

    @Sendable func manifest(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let path = try Self.path(request)
        let stored = try await metadata.manifest(
            account: target.accountID, container: container, path: path,
            version: try Self.optionalInt(request, "version"))
        var headers: HTTPFields = [.contentType: "application/octet-stream"]
        headers[HTTPField.Name(XferHeader.version)!] = String(stored.info.version)
        headers[HTTPField.Name(XferHeader.digest)!] = stored.info.manifestDigest
        let manifest = try Manifest(decoding: stored.manifest)
        var base: Manifest? = nil
        if let baseVersion = try Self.optionalInt(request, "base"),
            let known = try? await metadata.manifest(
                account: target.accountID, container: container, path: path, version: baseVersion)
        {
            base = try Manifest(decoding: known.manifest)
            headers[HTTPField.Name(XferHeader.base)!] = String(baseVersion)
        }
        // A client that reads compressed deltas says so (`compressed=1`); others get the plain form.
        let delta =
            request.uri.queryParameters.get("compressed") == "1" && limits.features.contains(.compressedManifests)
            ? manifest.compressedDelta(against: base) : SpillArray(manifest.delta(against: base))
        return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: delta)))
    }

    @Sendable func changeList(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let after = try Self.optionalInt(request, "after") ?? 0
        let limit = try Self.intParameter(request, "limit", default: 1000, range: 1...ProtocolLimits.maximumListCount)
        let wait = min(
            limits.maximumWait,
            try Self.intParameter(request, "wait", default: 0, range: 0...ProtocolLimits.maximumWaitSeconds))
        var list = try await metadata.changes(
            account: target.accountID, container: container, after: after, limit: limit)
        if list.changes.isEmpty && list.keys.isEmpty && wait > 0 {
            let present = try await longPoll(target, context: context, seconds: wait, feed: "change-feed") {
                guard
                    let page = try? await metadata.changes(
                        account: target.accountID, container: container, after: after, limit: 1)
                else {
                    return false
                }
                return !page.changes.isEmpty || !page.keys.isEmpty
            }
            if present {
                list = try await metadata.changes(
                    account: target.accountID, container: container, after: after, limit: limit)
            }
        }
        list.deployment = try await deployment.value(from: metadata)
        return Self.json(list)
    }

    /// Waits up to `seconds` for the container to change so that `ready` holds: the one long
    /// poll of the change feed and of record notifications. An account may park only so many
    /// (`unavailable` past the cap: clients back off and retry); a server told to stop answers
    /// its waiting polls at once; a client that has gone stops the wait and gives its slot back;
    /// a member unshared meanwhile is answered at once, and refused.
    /// - Returns: Whether the client is still there to answer.
    func longPoll(
        _ target: ContainerTarget, context: XferRequestContext, seconds: Int, feed: String,
        ready: @escaping @Sendable () async -> Bool
    ) async throws -> Bool {
        let cap = limits.maximumWaitingPollsPerAccount
        guard changes.polls.enter(target.principal.accountID, limit: cap) else {
            throw XferError(
                .unavailable,
                "this account already has \(cap) \(feed) requests waiting, the server's limit; retry later or ask without wait"
            )
        }
        defer { changes.polls.leave(target.principal.accountID) }
        let presence = await context.presence()
        let present = await ClientPresence.run(until: presence) {
            await withGracefulShutdownHandler {
                await changes.wait(account: target.accountID, container: target.container, seconds: seconds) {
                    // A member unshared meanwhile is answered at once (``ContainerTarget/ended``).
                    guard (try? await target.holds(in: metadata)) != false else { return true }
                    return await ready()
                }
            } onGracefulShutdown: { [changes] in
                changes.drain()
            }
        }
        guard try await target.holds(in: metadata) else { throw target.ended }
        return present
    }

    @Sendable func versions(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        return Self.json(
            try await metadata.versions(
                account: target.accountID, container: target.container,
                path: try Self.path(request)))
    }

    @Sendable func resolve(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(ResolveRequest.self, request)
        let info = try await metadata.resolve(account: target.accountID, container: container, body)
        changes.notify(account: target.accountID, container: container)
        return Self.json(info)
    }
}
