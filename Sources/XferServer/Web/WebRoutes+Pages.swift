import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import XferCore
import XferProtocol

/// The pages: a container's folders, search, what was deleted, a document with its versions, the key-value store.
extension WebRoutes {
    @Sendable func home(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let account = try await metadata.account(session.principal.accountID)
        let containers = try await metadata.containerList(account: session.principal.accountID)
        let values: [String: Any] = [
            "used": ByteCount(account.charged).description, "quota": ByteCount(account.quota).description,
            "usedBytes": account.charged, "quotaBytes": max(1, account.quota), "highBytes": account.quota / 10 * 9,
            "containers": try containers.map { entry -> [String: Any] in
                [
                    "name": entry.container, "encrypted": entry.encrypted, "role": entry.role.rawValue,
                    "shared": entry.role != .owner || entry.members > 0,
                    "href": Self.containerHref(try ContainerName(entry.container))
                ]
            }
        ]
        return html("containers", values, title: "Containers", session: session)
    }

    @Sendable func folder(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        let fields = WebSecurity.queryFields(request)
        let prefix = (fields["folder"] ?? "").precomposedStringWithCanonicalMapping
        guard prefix.isEmpty || prefix.hasSuffix("/"), prefix.utf8.count <= DocumentPathRules.maximumPathBytes,
            !prefix.utf8.contains(0), !prefix.hasPrefix("/")
        else {
            throw XferError(.badRequest, "folder must be empty or a path ending in /")
        }
        var start: FolderPosition? = nil
        if let token = fields["page"] {
            guard let position = FolderPosition(token: token), position.key.utf8.starts(with: prefix.utf8) else {
                throw XferError(.badRequest, "page is not a token this server gave")
            }
            start = position
        }
        let listing = try await metadata.folder(
            account: target.accountID, container: target.container, prefix: prefix,
            from: start, limit: Self.pageSize)
        let rows = listing.entries.map { entry -> [String: Any] in
            if let below = entry.folder {
                var row = Self.row(entry.document, name: entry.name, container: container)
                row["href"] = Self.containerHref(container, folder: below)
                row["kind"] = "folder"
                row["size"] = ""
                return row
            }
            return Self.row(entry.document, name: entry.name, container: container)
        }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        values["crumbs"] = Self.crumbs(container, prefix)
        values["here"] = prefix.isEmpty ? container.value : String(prefix.dropLast().split(separator: "/").last ?? "")
        values["folder"] = prefix
        if let next = listing.next {
            values["moreHref"] = Self.containerHref(container, folder: prefix, page: next.token)
        }
        return html(
            "folder", values, title: prefix.isEmpty ? container.value : prefix, session: session,
            events: Self.href(container, "events"))
    }

    @Sendable func search(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        // A GET form: `+` is a space (as in a form body). Empty fields mean "any".
        let parameters = WebSecurity.queryFields(request)
        let query = try DocumentQuery(parameter: { key in parameters[key].flatMap { $0.isEmpty ? nil : $0 } })
        let list = try await metadata.query(
            account: target.accountID, container: target.container, query,
            after: parameters["page"], limit: Self.pageSize)
        let rows = list.documents.map { Self.row($0, name: $0.path.value, container: container) }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        values["name"] = query.name ?? ""
        values["isFile"] = query.kinds == [.file]
        values["isPackage"] = query.kinds == [.package]
        values["summary"] = rows.isEmpty ? "No document matches." : "\(rows.count)\(list.more ? "+" : "") matching"
        if list.more, let next = list.next {
            var pairs = query.parameters.map { ($0.0, Optional($0.1)) }
            pairs.append(("page", next))
            values["moreHref"] = Self.href(container, "search") + WebSecurity.query(pairs)
        }
        return html("search", values, title: "Search", session: session, events: Self.href(container, "events"))
    }

    @Sendable func deleted(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        var query = DocumentQuery()
        query.state = .deleted
        query.sort = .modified
        query.descending = true
        let page = request.uri.queryParameters.get("page").map { String($0) }
        let list = try await metadata.query(
            account: target.accountID, container: target.container, query, after: page, limit: Self.pageSize)
        let rows = list.documents.map { info -> [String: Any] in
            var row = Self.row(info, name: info.path.value, container: container)
            row["size"] = ""
            row["note"] = "deleted"
            if let previous = info.baseVersion {
                row["restore"] = ["path": info.path.value, "version": String(previous), "base": String(info.version)]
            }
            return row
        }
        var values = commonValues(container)
        values["rows"] = rows
        values["hasRows"] = !rows.isEmpty
        if list.more, let next = list.next {
            values["moreHref"] = Self.href(container, "deleted") + WebSecurity.query([("page", next)])
        }
        return html(
            "deleted", values, title: "Recently Deleted", session: session, events: Self.href(container, "events"))
    }

    @Sendable func item(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        let path = try Routes.path(request)
        let account = target.accountID
        let versions = try await metadata.versions(account: account, container: target.container, path: path).versions
        guard let newest = versions.first(where: { $0.state == .current || $0.state == .deleted }) ?? versions.first
        else {
            throw XferError(.notFound, "no document \(path) in container \(container)")
        }
        let name = String(path.value.split(separator: "/").last ?? "")
        var values = commonValues(container)
        values["name"] = name
        values["crumbs"] = Self.crumbs(container, Self.parent(path), includingLast: true)
        values["here"] = name
        values["kind"] = newest.kind.rawValue
        values["size"] = newest.state == .deleted ? "—" : ByteCount(newest.size).description
        values["modified"] = Self.date(newest.mtimeNs)
        values["version"] = String(newest.version)
        if let device = newest.device { values["device"] = device }
        if newest.state == .deleted { values["deleted"] = true }
        if let conflicts = newest.conflicts, !conflicts.isEmpty {
            values["conflicts"] = conflicts.map(String.init).joined(separator: ", ")
        }
        values["path"] = path.value
        values["base"] = String(newest.version)
        if newest.state == .current { values["actions"] = true }
        values["versions"] = versions.map { version -> [String: Any] in
            var row: [String: Any] = [
                "version": String(version.version), "state": version.state.rawValue,
                "size": version.state == .deleted ? "" : ByteCount(version.size).description,
                "modified": Self.date(version.mtimeNs), "device": version.device ?? ""
            ]
            if (version.state == .current || version.state == .superseded || version.state == .conflict)
                && version.kind != .directory
            {
                row["href"] = Self.rawHref(container, path, version: version.version)
            }
            if version.state == .superseded && version.kind != .directory {
                row["restore"] = [
                    "path": path.value, "version": String(version.version), "base": String(newest.version)
                ]
            }
            if let conflicts = newest.conflicts, !conflicts.isEmpty,
                version.state == .current || version.state == .conflict
            {
                row["keep"] = ["path": path.value, "version": String(version.version), "base": String(newest.version)]
            }
            return row
        }
        if newest.state == .current && newest.kind != .directory {
            let stored = try await metadata.manifest(
                account: account, container: target.container, path: path, version: newest.version)
            let manifest = try Manifest(decoding: stored.manifest)
            if manifest.kind == .file, manifest.entries.count == 1, manifest.entries.kind(at: 0) == .symlink {
                values["symlink"] = manifest.entries.symlinkTarget(at: 0) ?? ""
            } else {
                values["downloadHref"] = Self.rawHref(container, path, version: nil)
                values["downloadLabel"] = manifest.kind == .package ? "Download as .tar" : "Download"
            }
            if manifest.kind == .package {
                let entries = manifest.entries
                let shown = min(entries.count, Self.packageEntries)
                values["files"] = String(manifest.fileCount)
                values["entries"] = (0..<shown).map { index -> [String: Any] in
                    let kind = entries.kind(at: index)
                    return [
                        "path": entries.path(at: index) + (kind == .directory ? "/" : ""),
                        "size": kind == .file ? ByteCount(entries.size(at: index)).description : ""
                    ]
                }
                values["hasEntries"] = shown > 0
                if entries.count > shown { values["entriesLeft"] = String(entries.count - shown) }
            }
        }
        return html("item", values, title: name, session: session, events: Self.href(container, "events"))
    }

    /// The container's key-value store, read only (apps write it; `xfer kv` too).
    @Sendable func keyValues(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let target = try await target(context, session, .read)
        let container = target.named
        if let refusal = try await refuseEncrypted(target, session) { return refusal }
        let list = try await metadata.values(account: target.accountID, container: target.container)
        let rows = list.entries.filter { $0.value != nil }.map { entry -> [String: Any] in
            [
                "key": entry.key, "value": entry.value?.description ?? "", "modified": Self.date(entry.timestampNs),
                "device": entry.device
            ]
        }
        var values = commonValues(container)
        values["entries"] = rows
        values["hasEntries"] = !rows.isEmpty
        values["used"] = ByteCount(Int64(list.bytes)).description
        values["limit"] = ByteCount(Int64(list.maximumBytes)).description
        values["keys"] = String(rows.count)
        values["maximumKeys"] = String(list.maximumKeys)
        return html(
            "kv", values, title: "Key-value store", session: session, events: Self.href(container, "events"))
    }
}
