import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import XferCore
import XferProtocol

/// Downloads (a file, one Range honoured, or a package as tar) and the change events a page follows.
extension WebRoutes {
    /// A file's bytes (one `Range` honoured) or a package as a tar stream, always as a download.
    @Sendable func raw(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if try await metadata.containerKey(account: target.accountID, container: target.container) != nil {
            throw XferError(
                .encryptedContainer, "container \(container) is end-to-end encrypted: the server cannot read it")
        }
        let path = try Routes.path(request)
        let stored = try await metadata.manifest(
            account: target.accountID, container: target.container, path: path,
            version: try Routes.optionalInt(request, "version"))
        guard stored.info.state != .deleted, stored.info.state != .uploading else {
            throw XferError(
                .notFound, "version \(stored.info.version) of \(path) holds no content (\(stored.info.state.rawValue))")
        }
        let manifest = try Manifest(decoding: stored.manifest)
        return try serve(
            manifest, info: stored.info, name: String(path.value.split(separator: "/").last ?? "download"),
            request: request)
    }

    /// A version's bytes as a download: a file (one `Range` honoured, `If-Range` against its
    /// manifest digest) or a package as a tar stream. Shared by the pages and share links.
    func serve(_ manifest: Manifest, info: DocumentInfo, name: String, request: Request) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/octet-stream"]
        headers[.cacheControl] = "private, no-store"
        let etag = DocumentBytes.etag(info)
        headers[.eTag] = etag
        let bytes = bytes
        let path = info.path
        switch manifest.kind {
        case .package:
            headers[.contentDisposition] = WebSecurity.attachment(name + ".tar")
            headers[.contentType] = "application/x-tar"
            let root = name
            return Response(
                status: .ok, headers: headers,
                body: ResponseBody { writer in
                    try await bytes.writeTar(manifest, root: root, to: &writer)
                    try await writer.finish(nil)
                })
        case .directory:
            throw XferError(.badRequest, "\(path) is a folder; open it to see what it holds")
        case .file:
            guard manifest.entries.count == 1, manifest.entries.kind(at: 0) == .file else {
                throw XferError(.badRequest, "\(path) is a symbolic link; it has no bytes to download")
            }
            headers[.contentDisposition] = WebSecurity.attachment(name)
            return bytes.fileResponse(
                manifest.entries.chunks(at: 0), size: manifest.entries.size(at: 0), etag: etag,
                request: request, headers: headers)
        }
    }

    /// Server-sent events: `change` each time the container's change feed moves, a comment
    /// every ``ServerLimits/eventStreamKeepAlive`` (20 s) to keep proxies from closing the stream. Each open stream counts against
    /// the account's long polls (``ServerLimits/maximumWaitingPollsPerAccount``); a stream
    /// ends after an hour (the browser reconnects), when the server stops, or as soon as the
    /// browser closes the connection (``ClientPresence``), its slot given back then.
    @Sendable func events(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let account = target.accountID
        // An account may park only so many, whoever's container they follow.
        let asking = target.principal.accountID
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        let cap = limits.maximumWaitingPollsPerAccount
        let keepAlive = Int(max(1, limits.eventStreamKeepAlive.components.seconds))
        let (metadata, changes) = (metadata, changes)
        let presence = await context.presence()
        let start = try await metadata.changes(
            account: account, container: target.container, after: Int64.max - 1, limit: 1
        )
        .head
        var headers: HTTPFields = [.contentType: "text/event-stream"]
        headers[.cacheControl] = "no-store"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                // The slot is taken where it is given back: a stream whose head never went out
                // (the browser left first) holds none.
                guard changes.polls.enter(asking, limit: cap) else {
                    try await writer.write(
                        ByteBuffer(
                            string:
                                "retry: 30000\n: this account has \(cap) change-feed requests waiting, the server's limit\n\n"
                        ))
                    try await writer.finish(nil)
                    return
                }
                defer { changes.polls.leave(asking) }
                let end = ContinuousClock.now + .seconds(3600)
                var cursor = start
                try await writer.write(ByteBuffer(string: "retry: 3000\n: xfer\n\n"))
                var stopping = false
                while !stopping && ContinuousClock.now < end {
                    let seen = cursor
                    let present = await ClientPresence.run(until: presence) {
                        await withGracefulShutdownHandler {
                            await changes.wait(account: account, container: target.container, seconds: keepAlive) {
                                // A member unshared meanwhile: the stream ends (``ContainerTarget/holds(in:)``).
                                guard (try? await target.holds(in: metadata)) != false else { return true }
                                guard
                                    let head = try? await metadata.changes(
                                        account: account, container: target.container, after: Int64.max - 1, limit: 1
                                    ).head
                                else {
                                    return false
                                }
                                return head != seen
                            }
                        } onGracefulShutdown: {
                            changes.drain()
                        }
                    }
                    // The browser left: the slot goes back now, not at a write that fails later.
                    guard present else { break }
                    if changes.isDraining { stopping = true }
                    guard (try? await target.holds(in: metadata)) != false else { break }
                    let head =
                        (try? await metadata.changes(
                            account: account, container: target.container, after: Int64.max - 1, limit: 1
                        ).head) ?? seen
                    if head != seen {
                        cursor = head
                        try await writer.write(
                            ByteBuffer(string: "event: change\ndata: \(head.map(String.init) ?? "")\n\n"))
                    } else {
                        try await writer.write(ByteBuffer(string: ": waiting\n\n"))
                    }
                }
                try await writer.finish(nil)
            })
    }
}
