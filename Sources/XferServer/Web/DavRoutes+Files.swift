import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// GET, PUT, MKCOL and DELETE.
extension DavRoutes {
    func get(_ request: Request, _ target: Target) async throws -> Response {
        let headers: HTTPFields = [.contentType: "application/octet-stream", .cacheControl: "private, no-store"]
        switch try await resource(target, target.relative) {
        case .file(let info)?:
            let stored = try await metadata.manifest(
                account: target.account, container: target.container, path: info.path, version: info.version)
            let manifest = try Manifest(decoding: stored.manifest)
            guard manifest.entries.count == 1, manifest.entries.kind(at: 0) == .file else {
                throw DavStatus(status: .forbidden, message: "\(info.path) is a symbolic link; it has no bytes")
            }
            var withDate = headers
            withDate[.lastModified] = DavXML.httpDate(info.mtimeNs)
            withDate[.contentDisposition] = WebSecurity.attachment(Self.components(target.relative).last ?? "")
            return bytes.fileResponse(
                manifest.entries.chunks(at: 0), size: manifest.entries.size(at: 0), etag: Self.etag(info),
                request: request, headers: withDate)
        case .packageFile(let info, let manifest, let index)?:
            guard manifest.entries.kind(at: index) == .file else {
                throw DavStatus(status: .forbidden, message: "a symbolic link has no bytes")
            }
            var named = headers
            named[.contentDisposition] = WebSecurity.attachment(Self.components(target.relative).last ?? "")
            return bytes.fileResponse(
                manifest.entries.chunks(at: index), size: manifest.entries.size(at: index),
                etag: DocumentBytes.etag(info, entry: index), request: request, headers: named)
        case nil:
            throw DavStatus(status: .notFound, message: "no such file or folder")
        default:
            throw DavStatus(status: .methodNotAllowed, message: "a folder has no bytes; list it with PROPFIND")
        }
    }

    func put(_ request: Request, _ target: Target) async throws -> Response {
        // A part of a file is not the file (RFC 9110 §14.5): it would replace the whole of it.
        if request.headers[.contentRange] != nil || request.headers[HTTPField.Name("X-Update-Range")!] != nil {
            throw DavStatus(
                status: .badRequest, message: "a PUT writes a whole file; partial writes (Content-Range) are not taken")
        }
        guard !target.relative.isEmpty, !target.slash else {
            throw DavStatus(status: .methodNotAllowed, message: "a folder cannot be written with PUT")
        }
        let path = try Self.documentPath(target.relative)
        let existing = try await resource(target, target.relative)
        switch existing {
        case .file?, nil: break
        case .packageFile?:
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        default: throw DavStatus(status: .methodNotAllowed, message: "\(target.relative) is a folder")
        }
        // Conditional writes (RFC 9110 §13.1): If-Match against the current version's ETag,
        // If-None-Match: * to create only; a client that says what it saw never overwrites more.
        var current: DocumentInfo? = nil
        if case .file(let info)? = existing { current = info }
        if let match = request.headers[.ifMatch] {
            guard let current, match == "*" || Self.etags(match).contains(Self.etag(current)) else {
                throw DavStatus(
                    status: .preconditionFailed, message: "\(target.relative) is not the version If-Match names")
            }
        }
        if let noneMatch = request.headers[.ifNoneMatch], let current,
            noneMatch == "*" || Self.etags(noneMatch).contains(Self.etag(current))
        {
            throw DavStatus(status: .preconditionFailed, message: "\(target.relative) exists")
        }
        try await requireWritableParent(target, target.relative)
        try await checkWrite(request, target, [Change(relative: target.relative, member: existing == nil)])
        // Based on the version current when the request came: one committed by another device
        // while this body was arriving makes this one a conflict version, and both are kept.
        // The locks are asked again once the body is in, just before the commit: a lock taken
        // while it arrived stops the write (its chunks are left to gc).
        try await limiter.upload(target.tokenKey) {
            try await writeFile(target, path, base: current?.version, body: request.body) {
                try await checkWrite(request, target, [Change(relative: target.relative, member: existing == nil)])
            }
        }
        return Response(status: existing == nil ? .created : .noContent, headers: [.contentLength: "0"])
    }

    /// Stores `body` (none: an empty file) as a new version of file `path` based on `base`
    /// (none: on whatever is there, a new document or one deleted, or with `onlyNew`, refusing
    /// a live one with `already_exists`): cut, hashed and stored by the server's pipeline,
    /// then, once `beforeCommit` has not thrown, committed.
    func writeFile(
        _ target: Target, _ path: DocumentPath, base: Int64?, onlyNew: Bool = false, body: RequestBody?,
        beforeCommit: () async throws -> Void = {}
    ) async throws {
        var base = base
        if base == nil {
            base = try await writer.newBase(
                account: target.account, container: target.container, path: path, refusingLive: onlyNew)
        }
        let startedAt = try await metadata.clock()
        var file = UploadedFile(
            path: path, intake: ChunkIntake(metadata: metadata, chunks: chunks, quota: quota),
            account: target.account, startedAt: startedAt)
        let manifest: Manifest
        do {
            if let body {
                var pieces = body.makeAsyncIterator()
                while let buffer = try await Self.next(&pieces) {
                    try await file.feed(Array(buffer.readableBytesView))
                }
            }
            manifest = try await file.finish()
        } catch {
            // A body cut short: what it still had in flight stops with the request.
            await file.abandon()
            throw error
        }
        try await beforeCommit()
        _ = try await writer.commit(
            account: target.account, container: target.container, path: path, manifest, base: base,
            device: target.device)
    }

    /// The next piece of a request's body; a body that stops early (its client went, or sent
    /// less than it announced) is the client's error, not the server's.
    static func next(_ pieces: inout RequestBody.AsyncIterator) async throws -> ByteBuffer? {
        do {
            return try await pieces.next()
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(
                .badRequest, "the request body ended before it was whole; nothing was written", cause: error)
        }
    }

    func mkcol(_ request: Request, _ target: Target) async throws -> Response {
        if let length = request.headers[.contentLength], length != "0" {
            throw DavStatus(status: .unsupportedMediaType, message: "MKCOL takes no body")
        }
        if request.headers[.transferEncoding] != nil {
            throw DavStatus(status: .unsupportedMediaType, message: "MKCOL takes no body")
        }
        guard !target.relative.isEmpty, try await resource(target, target.relative) == nil else {
            throw DavStatus(status: .methodNotAllowed, message: "\(target.relative) exists already")
        }
        try await requireWritableParent(target, target.relative)
        try await checkWrite(request, target, [Change(relative: target.relative, member: true)])
        let path = try Self.documentPath(target.relative)
        _ = try await writer.commit(
            account: target.account, container: target.container, path: path, try DocumentWriter.folderManifest(),
            base: try await writer.newBase(
                account: target.account, container: target.container, path: path, refusingLive: true),
            device: target.device)
        return Response(status: .created, headers: [.contentLength: "0"])
    }

    func delete(_ request: Request, _ target: Target) async throws -> Response {
        guard !target.relative.isEmpty else {
            throw DavStatus(status: .forbidden, message: "the container's root is not deleted from here")
        }
        guard let resource = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        try await checkWrite(request, target, [Change(relative: target.relative, below: true, member: true)])
        try await remove(target, resource)
        try await metadata.removeDeadProperties(
            account: target.account, container: target.container, path: Self.propertyPath(target.relative))
        try await metadata.releaseDavLocks(
            account: target.account, container: target.container, below: Self.propertyPath(target.relative))
        return Response(status: .noContent)
    }

    /// Deletes a file, a package, or a folder with everything below it (each a deletion version).
    func remove(_ target: Target, _ resource: Resource) async throws {
        switch resource {
        case .root:
            throw DavStatus(status: .forbidden, message: "the container's root is not deleted from here")
        case .packageFile,
            .packageFolder(_, _, entry: _) where !Self.isWholePackage(resource):
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        case .file(let info), .packageFolder(let info, _, _):
            _ = try await writer.delete(
                account: target.account, container: target.container, path: info.path, base: info.version)
        case .folder(let prefix, let document):
            for info in try await tree(target, prefix) {
                _ = try await writer.delete(
                    account: target.account, container: target.container, path: info.path, base: info.version)
            }
            if let document {
                _ = try await writer.delete(
                    account: target.account, container: target.container, path: document.path, base: document.version)
            }
        }
    }

    static func isWholePackage(_ resource: Resource) -> Bool {
        if case .packageFolder(_, _, let entry) = resource { return entry.isEmpty }
        return false
    }

    /// Every live document below `prefix`, at most ``maximumTreeDocuments``.
    func tree(_ target: Target, _ prefix: String) async throws -> [DocumentInfo] {
        var found: [DocumentInfo] = []
        var after: String? = nil
        while true {
            let page = try await metadata.list(
                account: target.account, container: target.container, prefix: prefix, after: after, limit: 1000)
            found += page.documents.filter { $0.state == .current }
            guard found.count <= Self.maximumTreeDocuments else {
                throw DavStatus(
                    status: .davInsufficientStorage,
                    message:
                        "more than \(Self.maximumTreeDocuments) documents lie below \(prefix); nothing was changed; use xfer"
                )
            }
            guard page.more, let last = page.documents.last else { return found }
            after = last.path.value
        }
    }
}
