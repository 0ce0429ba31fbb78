import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import XferCore
import XferProtocol

/// Uploads from the web view: files sent with a form, each stored and committed as a device would.
extension WebRoutes {
    /// `multipart/form-data` with `csrf` and `folder` first, then one or more `file` parts:
    /// each file is cut, hashed and compressed here as a device would (the same chunker, so a
    /// later sync of it sends nothing new), its chunks stored as they come (bounded memory
    /// whatever its size, the quota held before the disk), then committed as a new version.
    /// The whole form is one of the session's token's uploads at once (``TokenLimiter``), as a
    /// chunk upload or a WebDAV PUT of the same token is.
    @Sendable func upload(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        return try await limiter.upload(session.tokenKey) { try await receiveUpload(request, session, context) }
    }

    /// ``upload(_:context:)`` once the token has room for one more upload.
    func receiveUpload(_ request: Request, _ session: WebContext, _ context: XferRequestContext) async throws
        -> Response
    {
        let target = try await target(context, session, .write)
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        guard let type = request.headers[.contentType], var reader = MultipartReader(contentType: type) else {
            throw XferError(.badRequest, "an upload is a multipart/form-data form")
        }
        try await refuseWriteIfEncrypted(target)
        var fields: [String: String] = [:]
        var field: (name: String, bytes: [UInt8])? = nil
        var file: UploadedFile? = nil
        var committed: [DocumentPath] = []
        let intake = ChunkIntake(metadata: metadata, chunks: chunks, quota: quota)
        let startedAt = try await metadata.clock()
        let csrf = WebSecurity.csrf(session.secret)
        func readUpload() async throws {
            for try await buffer in request.body {
                for event in try reader.feed(buffer.readableBytesView) {
                    switch event {
                    case .begin(let name, let filename):
                        switch try Self.uploadPart(named: name, filename: filename, after: fields, csrf: csrf) {
                        case .nothing:
                            file = nil
                            field = nil
                        case .file(let path):
                            file = UploadedFile(
                                path: path, intake: intake, account: target.accountID, startedAt: startedAt)
                        case .field(let name):
                            field = (name, [])
                        }
                    case .data(let bytes):
                        if file != nil {
                            try await file!.feed(bytes)
                        } else if field != nil {
                            guard field!.bytes.count + bytes.count <= 4096 else {
                                throw XferError(.badRequest, "form field \(field!.name) is too long")
                            }
                            field!.bytes += bytes
                        }
                    case .end:
                        if let done = file {
                            file = nil
                            committed.append(try await commitUploaded(done, target))
                        } else if let done = field {
                            fields[done.name] = String(decoding: done.bytes, as: UTF8.self)
                            field = nil
                        }
                    }
                }
            }
        }
        do {
            try await readUpload()
        } catch {
            // A file cut short: what it still had in flight stops with the request.
            if var unfinished = file { await unfinished.abandon() }
            throw error
        }
        try reader.finish()
        guard let sent = fields["csrf"], WebSecurity.same(sent, csrf) else { throw Self.csrfMismatch }
        if committed.count == 1 { return itemRedirect(target, committed[0]) }
        return folderRedirect(target, try Self.folderField(fields))
    }

    /// Stores the rest of an uploaded file and commits it as a new version on whatever is there.
    /// - Returns: Its path.
    func commitUploaded(_ file: UploadedFile, _ target: ContainerTarget) async throws -> DocumentPath {
        var done = file
        let manifest: Manifest
        do {
            manifest = try await done.finish()
        } catch {
            await done.abandon()
            throw error
        }
        let info = try await commit(
            target, done.path, manifest, base: try await newBase(target, done.path, refusingLive: false))
        return info.path
    }

    /// What a part of an upload form starts.
    enum UploadPart: Equatable {
        /// An empty file input: nothing is read or stored.
        case nothing
        /// A file, to be stored at this path.
        case file(DocumentPath)
        /// A form field of this name (at most 4 KiB, kept).
        case field(String)
    }

    static let csrfMismatch = XferError(
        .forbidden, "the form's token does not match this session; reload the page and try again")

    /// What the part `name` (with `filename` when it is a file input) starts, given the `fields`
    /// read before it and the session's `csrf` token. The token is the form's first field (the
    /// page puts it there): nothing else is read, kept or stored before it is checked.
    /// - Throws: `forbidden` for a part before the token or a token not the session's;
    ///   `bad_request` for a ninth field, a folder field or a file name no path takes.
    static func uploadPart(named name: String, filename: String?, after fields: [String: String], csrf: String) throws
        -> UploadPart
    {
        if fields.isEmpty && name != "csrf" {
            throw XferError(.forbidden, "the form's token must come first; reload the page and try again")
        }
        if !fields.isEmpty, fields["csrf"].map({ !WebSecurity.same($0, csrf) }) ?? true {
            throw csrfMismatch
        }
        guard fields.count < 8 || name == "file" else {
            throw XferError(.badRequest, "the upload form has too many fields")
        }
        guard name == "file", let filename else { return .field(name) }
        guard let sent = fields["csrf"], WebSecurity.same(sent, csrf) else { throw csrfMismatch }
        let base = String(filename.split(separator: "/").last ?? "").split(separator: "\\").last.map(String.init) ?? ""
        // An empty file input.
        if base.isEmpty { return .nothing }
        return .file(try child(try folderField(fields), base))
    }
}
