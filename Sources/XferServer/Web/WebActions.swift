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
    func action(_ request: Request, _ context: XferRequestContext, _ access: Principal.Access = .write)
        async throws -> (ContainerTarget, [String: String])
    {
        let session = try requireSession(context)
        let target = try await target(context, session, access)
        let form = try await checkForm(request, session)
        try await refuseWriteIfEncrypted(target)
        return (target, form)
    }

    func refuseWriteIfEncrypted(_ target: ContainerTarget) async throws {
        if try await metadata.containerKey(account: target.accountID, container: target.container) != nil {
            throw XferError(
                .encryptedContainer,
                "container \(target.named) is end-to-end encrypted: only a device holding its key can change it")
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

    func itemRedirect(_ target: ContainerTarget, _ path: DocumentPath) -> Response {
        Self.redirect(Self.href(target.named, "item") + WebSecurity.query([("path", path.value)]))
    }

    func folderRedirect(_ target: ContainerTarget, _ folder: String) -> Response {
        Self.redirect(Self.containerHref(target.named, folder: folder))
    }

    static func parent(_ path: DocumentPath) -> String {
        guard let slash = path.value.lastIndex(of: "/") else { return "" }
        return String(path.value[...slash])
    }

    // MARK: Folders, renames, deletions, restores, conflicts

    @Sendable func makeFolder(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (target, form) = try await action(request, context)
        let folder = try Self.folderField(form)
        let path = try Self.child(folder, form["name"])
        _ = try await commit(
            target, path, try DocumentWriter.folderManifest(),
            base: try await newBase(target, path, refusingLive: true))
        return folderRedirect(target, folder)
    }

    @Sendable func rename(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (target, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let base = try Self.versionField(form, "base")
        let renamed = try Self.child(Self.parent(path), form["name"])
        guard renamed != path else { return itemRedirect(target, path) }
        let account = target.accountID
        let container = target.container
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
            target, renamed, try Manifest(decoding: stored.manifest),
            base: try await newBase(target, renamed, refusingLive: true), like: stored.info)
        // Its WebDAV properties go with it, as a MOVE takes them (the delete would drop them).
        try await metadata.copyDeadProperties(
            account: account, container: container, from: path.value, to: renamed.value, move: true)
        _ = try await metadata.delete(account: account, container: container, path: path, baseVersion: base)
        changes.notify(account: account, container: container)
        return itemRedirect(target, renamed)
    }

    @Sendable func deleteDocument(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (target, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let base = try Self.versionField(form, "base")
        _ = try await metadata.delete(
            account: target.accountID, container: target.container, path: path, baseVersion: base)
        changes.notify(account: target.accountID, container: target.container)
        return folderRedirect(target, Self.parent(path))
    }

    /// Makes an earlier version (or what a deleted document last held) current again, as a
    /// new version based on the newest one.
    @Sendable func restore(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (target, form) = try await action(request, context)
        let path = try DocumentPath(form["path"] ?? "")
        let version = try Self.versionField(form, "version")
        let base = try Self.versionField(form, "base")
        let stored = try await metadata.manifest(
            account: target.accountID, container: target.container, path: path, version: version)
        _ = try await commit(target, path, try Manifest(decoding: stored.manifest), base: base, like: stored.info)
        return itemRedirect(target, path)
    }

    @Sendable func resolve(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (target, form) = try await action(request, context)
        let container = target.container
        let path = try DocumentPath(form["path"] ?? "")
        let keep = try Self.versionField(form, "keep")
        // Settled only as the page showed it: a version current since then is not demoted
        // by a choice made without it.
        let base = try Self.versionField(form, "base")
        let now = try await metadata.document(
            account: target.accountID, container: container, path: path, version: nil)
        guard now.version == base else { throw XferError.conflict(path: path, current: now.version, base: base) }
        // The other contenders stay in history (superseded), never removed from here.
        _ = try await metadata.resolve(
            account: target.accountID, container: container, ResolveRequest(path: path, keep: keep, keepAll: true))
        changes.notify(account: target.accountID, container: container)
        return itemRedirect(target, path)
    }

    var writer: DocumentWriter { DocumentWriter(metadata: metadata, changes: changes) }

    /// ``DocumentWriter/newBase(account:container:path:refusingLive:)`` in the target container.
    func newBase(_ target: ContainerTarget, _ path: DocumentPath, refusingLive: Bool) async throws -> Int64? {
        try await writer.newBase(
            account: target.accountID, container: target.container, path: path, refusingLive: refusingLive)
    }

    /// Commits `manifest` at `path` as one new version from this browser (device `web`, or the
    /// device the session's token was issued to; a member's account beside it).
    func commit(
        _ target: ContainerTarget, _ path: DocumentPath, _ manifest: Manifest, base: Int64?,
        like copied: DocumentInfo? = nil
    ) async throws -> DocumentInfo {
        try await writer.commit(
            account: target.accountID, container: target.container, path: path, manifest, base: base,
            like: copied, device: target.device(claimed: "web") ?? "web")
    }

    static func now() -> Int64 { DocumentWriter.now() }

}
