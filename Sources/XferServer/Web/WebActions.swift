import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import XferCore
import XferProtocol

/// What the web view changes: uploads, new folders, renames, deletions, restores and conflict
/// choices. Each is a form from one of this server's pages (same origin, the session's CSRF
/// token), each goes through the same metadata rules as the /v1 routes (a version based on
/// the one the page showed; a stale page is a conflict, never an overwrite), and none removes
/// a version: a deletion and a rename leave the old versions in history, a restore adds a
/// version, a conflict choice keeps the other contenders as superseded versions.
extension WebRoutes {
    func registerActions(on web: RouterGroup<XferRequestContext>) {
        web.post("c/:container/upload", use: page(upload))
        web.post("c/:container/mkdir", use: page(makeFolder))
        web.post("c/:container/rename", use: page(rename))
        web.post("c/:container/delete", use: page(deleteDocument))
        web.post("c/:container/restore", use: page(restore))
        web.post("c/:container/resolve", use: page(resolve))
    }

    /// A signed-in form on a plain container: its fields, checked.
    func action(_ request: Request, _ context: XferRequestContext) async throws -> (
        WebContext, ContainerName, [String: String]
    ) {
        let session = try requireSession(context)
        let container = try Routes.container(context)
        let form = try await checkForm(request, session)
        try await refuseWriteIfEncrypted(container, session)
        return (session, container, form)
    }

    func refuseWriteIfEncrypted(_ container: ContainerName, _ session: WebContext) async throws {
        if try await metadata.containerKey(account: session.principal.accountID, container: container) != nil {
            throw XferError(
                .encryptedContainer,
                "container \(container) is end-to-end encrypted: only a device holding its key can change it")
        }
    }

    static func folderField(_ form: [String: String]) throws -> String {
        let folder = form["folder"] ?? ""
        guard folder.isEmpty || folder.hasSuffix("/"), !folder.hasPrefix("/"),
            folder.utf8.count < DocumentPathRules.maximumPathBytes
        else {
            throw XferError(.badRequest, "folder must be empty or a path ending in /")
        }
        return folder
    }

    /// A new name in a folder: one path component.
    static func child(_ folder: String, _ name: String?) throws -> DocumentPath {
        let name = (name ?? "").trimmingCharacters(in: .whitespacesAndNewlines).precomposedStringWithCanonicalMapping
        guard !name.isEmpty, !name.contains("/"), name != ".", name != ".." else {
            throw XferError(.invalidPath, "a name must not be empty, hold a /, or be . or ..")
        }
        return try DocumentPath(folder + name)
    }

    static func versionField(_ form: [String: String], _ name: String) throws -> Int64 {
        guard let raw = form[name], let value = Int64(raw), value > 0 else {
            throw XferError(.badRequest, "\(name) must be a version number")
        }
        return value
    }

    func itemRedirect(_ container: ContainerName, _ path: DocumentPath) -> Response {
        Self.redirect("/web/c/\(container.value)/item" + WebSecurity.query([("path", path.value)]))
    }

    func folderRedirect(_ container: ContainerName, _ folder: String) -> Response {
        Self.redirect(Self.containerHref(container.value, folder: folder))
    }

    static func parent(_ path: DocumentPath) -> String {
        guard let slash = path.value.lastIndex(of: "/") else { return "" }
        return String(path.value[...slash])
    }

    // MARK: Folders, renames, deletions, restores, conflicts

    @Sendable func makeFolder(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (session, container, form) = try await action(request, context)
        let folder = try Self.folderField(form)
        let path = try Self.child(folder, form["name"])
        _ = try await commit(
            session, container, path, try DocumentWriter.folderManifest(),
            base: try await newBase(session, container, path, refusingLive: true))
        return folderRedirect(container, folder)
    }

    @Sendable func rename(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (session, container, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let base = try Self.versionField(form, "base")
        let target = try Self.child(Self.parent(path), form["name"])
        guard target != path else { return itemRedirect(container, path) }
        let account = session.principal.accountID
        let stored = try await metadata.manifest(account: account, container: container, path: path, version: base)
        guard stored.info.state == .current else {
            throw XferError.conflict(path: path, current: stored.info.version, base: base)
        }
        // Its conflict versions would stay behind under a deleted name, out of sight.
        if let conflicts = stored.info.conflicts, !conflicts.isEmpty {
            throw XferError(.conflict, "\(path.value) has unresolved conflict versions; keep one first, then rename")
        }
        // The new name first, then the old one deleted from the version the page showed: if
        // the second step finds the document changed, both stay and nothing is lost.
        _ = try await commit(
            session, container, target, try Manifest(decoding: stored.manifest),
            base: try await newBase(session, container, target, refusingLive: true), like: stored.info)
        // Its WebDAV properties go with it, as a MOVE takes them (the delete would drop them).
        try await metadata.copyDeadProperties(
            account: account, container: container, from: path.value, to: target.value, move: true)
        _ = try await metadata.delete(account: account, container: container, path: path, baseVersion: base)
        changes.notify(account: account, container: container)
        return itemRedirect(container, target)
    }

    @Sendable func deleteDocument(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (session, container, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let base = try Self.versionField(form, "base")
        _ = try await metadata.delete(
            account: session.principal.accountID, container: container, path: path, baseVersion: base)
        changes.notify(account: session.principal.accountID, container: container)
        return folderRedirect(container, Self.parent(path))
    }

    /// Makes an earlier version (or what a deleted document last held) current again, as a
    /// new version based on the newest one.
    @Sendable func restore(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (session, container, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let version = try Self.versionField(form, "version")
        let base = try Self.versionField(form, "base")
        let stored = try await metadata.manifest(
            account: session.principal.accountID, container: container, path: path, version: version)
        _ = try await commit(
            session, container, path, try Manifest(decoding: stored.manifest), base: base, like: stored.info)
        return itemRedirect(container, path)
    }

    @Sendable func resolve(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (session, container, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let keep = try Self.versionField(form, "keep")
        // Settled only as the page showed it: a version current since then is not demoted
        // by a choice made without it.
        let base = try Self.versionField(form, "base")
        let now = try await metadata.document(
            account: session.principal.accountID, container: container, path: path, version: nil)
        guard now.version == base else { throw XferError.conflict(path: path, current: now.version, base: base) }
        // The other contenders stay in history (superseded), never removed from here.
        _ = try await metadata.resolve(
            account: session.principal.accountID, container: container,
            ResolveRequest(path: path, keep: keep, keepAll: true))
        changes.notify(account: session.principal.accountID, container: container)
        return itemRedirect(container, path)
    }

    var writer: DocumentWriter { DocumentWriter(metadata: metadata, changes: changes) }

    /// ``DocumentWriter/newBase(account:container:path:refusingLive:)`` for the session's account.
    func newBase(_ session: WebContext, _ container: ContainerName, _ path: DocumentPath, refusingLive: Bool)
        async throws -> Int64?
    {
        try await writer.newBase(
            account: session.principal.accountID, container: container, path: path, refusingLive: refusingLive)
    }

    /// Commits `manifest` at `path` as one new version from this browser (device `web`, or the
    /// device the session's token was issued to).
    func commit(
        _ session: WebContext, _ container: ContainerName, _ path: DocumentPath, _ manifest: Manifest, base: Int64?,
        like copied: DocumentInfo? = nil
    ) async throws -> DocumentInfo {
        try await writer.commit(
            account: session.principal.accountID, container: container, path: path, manifest, base: base,
            like: copied, device: session.principal.device ?? "web")
    }

    static func now() -> Int64 { DocumentWriter.now() }

    // MARK: Uploads

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
        let container = try Routes.container(context)
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        guard let type = request.headers[.contentType], var reader = MultipartReader(contentType: type) else {
            throw XferError(.badRequest, "an upload is a multipart/form-data form")
        }
        try await refuseWriteIfEncrypted(container, session)
        var fields: [String: String] = [:]
        var field: (name: String, bytes: [UInt8])? = nil
        var file: UploadedFile? = nil
        var committed: [DocumentPath] = []
        let intake = ChunkIntake(metadata: metadata, chunks: chunks, quota: quota)
        let startedAt = try await metadata.clock()
        func readUpload() async throws {
            for try await buffer in request.body {
                for event in try reader.feed(buffer.readableBytesView) {
                    switch event {
                    case .begin(let name, let filename):
                        // The token is the form's first field (the page puts it there): nothing
                        // else is read, kept or stored before it is checked.
                        if fields.isEmpty && name != "csrf" {
                            throw XferError(
                                .forbidden, "the form's token must come first; reload the page and try again")
                        }
                        if !fields.isEmpty,
                            fields["csrf"].map({ !WebSecurity.same($0, WebSecurity.csrf(session.secret)) }) ?? true
                        {
                            throw XferError(
                                .forbidden,
                                "the form's token does not match this session; reload the page and try again")
                        }
                        guard fields.count < 8 || name == "file" else {
                            throw XferError(.badRequest, "the upload form has too many fields")
                        }
                        if name == "file", let filename {
                            guard let sent = fields["csrf"], WebSecurity.same(sent, WebSecurity.csrf(session.secret))
                            else {
                                throw XferError(
                                    .forbidden,
                                    "the form's token does not match this session; reload the page and try again")
                            }
                            let base =
                                String(filename.split(separator: "/").last ?? "").split(separator: "\\").last.map(
                                    String.init) ?? ""
                            if base.isEmpty {
                                file = nil
                                field = nil
                                continue
                            }  // an empty file input
                            let path = try Self.child(try Self.folderField(fields), base)
                            file = UploadedFile(
                                path: path, intake: intake, account: session.principal.accountID, startedAt: startedAt)
                        } else {
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
                        if var done = file {
                            file = nil
                            let manifest: Manifest
                            do {
                                manifest = try await done.finish()
                            } catch {
                                await done.abandon()
                                throw error
                            }
                            let info = try await commit(
                                session, container, done.path, manifest,
                                base: try await newBase(session, container, done.path, refusingLive: false))
                            committed.append(info.path)
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
        guard let sent = fields["csrf"], WebSecurity.same(sent, WebSecurity.csrf(session.secret)) else {
            throw XferError(.forbidden, "the form's token does not match this session; reload the page and try again")
        }
        if committed.count == 1 { return itemRedirect(container, committed[0]) }
        return folderRedirect(container, try Self.folderField(fields))
    }
}

/// One file of an upload, cut into chunks as its bytes arrive.
struct UploadedFile {
    let path: DocumentPath
    let intake: ChunkIntake
    let account: Int64
    let startedAt: Int64
    var chunker = Chunker(configuration: .default)
    var current: [UInt8] = []
    var references: [Manifest.ChunkReference] = []
    var plain: [[UInt8]] = []
    var plainBytes = 0
    var size: Int64 = 0

    init(path: DocumentPath, intake: ChunkIntake, account: Int64, startedAt: Int64) {
        self.path = path
        self.intake = intake
        self.account = account
        self.startedAt = startedAt
    }

    mutating func feed(_ bytes: [UInt8]) async throws {
        size += Int64(bytes.count)
        var rest = bytes[...]
        while !rest.isEmpty {
            let cut = rest.withUnsafeBytes { chunker.nextBoundary(in: $0) }
            guard let cut else {
                current += rest
                break
            }
            current += rest.prefix(cut)
            rest = rest.dropFirst(cut)
            try await cutChunk()
        }
    }

    mutating func cutChunk() async throws {
        guard !current.isEmpty else { return }
        plain.append(current)
        plainBytes += current.count
        current = []
        if plainBytes >= 8 << 20 { try await flush() }
    }

    /// The batches being hashed, compressed and stored while the next one arrives, oldest first.
    var inFlight: [Task<[Manifest.ChunkReference], any Error>] = []

    /// Batches stored at once: each store ends in its own fdatasync, and several overlap as a
    /// device's parallel uploads do.
    static let window = 3

    /// Hands what was cut to be hashed and compressed (off the event loop, on every core) and
    /// stored, while the body goes on arriving: at most ``window`` batches at a time, so at
    /// most ``window`` + 1 batches (32 MiB) are held. The oldest is awaited first, so the
    /// references stay in order.
    mutating func flush() async throws {
        guard !plain.isEmpty else { return }
        let batch = plain
        plain = []
        plainBytes = 0
        if inFlight.count >= Self.window { references += try await inFlight.removeFirst().value }
        let (intake, account, startedAt) = (intake, account, startedAt)
        inFlight.append(
            Task {
                let encoded = try await Self.encode(batch)
                try Task.checkCancellation()
                _ = try await intake.store(encoded, account: account, startedAt: startedAt)
                return encoded.map { Manifest.ChunkReference(id: $0.id, length: $0.length) }
            })
    }

    /// Cancels the batches still in flight and waits until they are done, so an upload that
    /// failed (its body broken, a refusal before its commit) leaves no work running past its
    /// request: a batch not yet stored is dropped; one stored is leased, and gc releases it.
    mutating func abandon() async {
        for task in inFlight { task.cancel() }
        for task in inFlight { _ = await task.result }
        inFlight = []
    }

    /// The chunks of `batch` hashed and compressed, in order, a slice per core on the thread pool.
    static func encode(_ batch: [[UInt8]]) async throws -> [EncodedChunk] {
        let width = min(batch.count, max(1, System.coreCount))
        let size = (batch.count + width - 1) / width
        let ranges = stride(from: 0, to: batch.count, by: size).map { $0..<min($0 + size, batch.count) }
        return try await withThrowingTaskGroup(of: (Int, [EncodedChunk]).self) { group in
            for (index, range) in ranges.enumerated() {
                group.addTask {
                    (
                        index,
                        try await NIOThreadPool.singleton.runIfActive {
                            try batch[range].map { bytes in
                                try bytes.withUnsafeBytes { buffer in try Zstd.encode(buffer, id: ChunkID.of(buffer)) }
                            }
                        }
                    )
                }
            }
            var parts = [[EncodedChunk]](repeating: [], count: ranges.count)
            for try await (index, encoded) in group { parts[index] = encoded }
            return parts.flatMap { $0 }
        }
    }

    /// The last chunk cut and stored; the file's manifest.
    mutating func finish() async throws -> Manifest {
        _ = chunker.finish()
        try await cutChunk()
        try await flush()
        while !inFlight.isEmpty { references += try await inFlight.removeFirst().value }
        return try Manifest(
            kind: .file, chunker: .default,
            entries: [
                Manifest.Entry(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: WebRoutes.now(), chunks: references)
            ])
    }
}
