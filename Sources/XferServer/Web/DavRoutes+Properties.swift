import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// PROPFIND and PROPPATCH: live properties, dead ones kept beside the documents, multistatus answers.
extension DavRoutes {
    static let liveProperties = [
        "resourcetype", "displayname", "getcontentlength", "getlastmodified", "creationdate", "getetag",
        "getcontenttype",
        "lockdiscovery", "supportedlock"
    ]

    /// One resource's properties as `(name, XML)`; `lockDiscovery` its ``lockDiscovery(_:_:_:now:)``.
    static func properties(of resource: Resource, name: String, lockDiscovery: String) -> [(String, String)] {
        var props: [(String, String)] = [
            ("displayname", "<D:displayname>\(DavXML.escape(name))</D:displayname>"),
            ("lockdiscovery", lockDiscovery), ("supportedlock", supportedLock)
        ]
        func dated(_ nanoseconds: Int64) {
            props.append(("getlastmodified", "<D:getlastmodified>\(DavXML.httpDate(nanoseconds))</D:getlastmodified>"))
            props.append(("creationdate", "<D:creationdate>\(WebRoutes.iso(nanoseconds))</D:creationdate>"))
        }
        func file(size: Int64, etag: String) {
            props.append(("resourcetype", "<D:resourcetype/>"))
            props.append(("getcontentlength", "<D:getcontentlength>\(size)</D:getcontentlength>"))
            props.append(("getetag", "<D:getetag>\(DavXML.escape(etag))</D:getetag>"))
            props.append(("getcontenttype", "<D:getcontenttype>application/octet-stream</D:getcontenttype>"))
        }
        let collection = ("resourcetype", "<D:resourcetype><D:collection/></D:resourcetype>")
        switch resource {
        case .root:
            props.append(collection)
        case .folder(_, let document):
            props.append(collection)
            if let document { dated(document.mtimeNs) }
        case .file(let info):
            file(size: info.size, etag: etag(info))
            dated(info.mtimeNs)
        case .packageFolder(let info, _, _):
            props.append(collection)
            dated(info.mtimeNs)
        case .packageFile(let info, let manifest, let index):
            file(size: manifest.entries.size(at: index), etag: DocumentBytes.etag(info, entry: index))
            dated(manifest.entries.mtimeNanoseconds(at: index))
        }
        return props
    }

    static func etag(_ info: DocumentInfo) -> String { DocumentBytes.etag(info) }

    /// The entity tags of an `If-Match` or `If-None-Match` list (weak ones compared by their tag).
    static func etags(_ header: String) -> [String] {
        header.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.map {
            $0.hasPrefix("W/") ? String($0.dropFirst(2)) : $0
        }
    }

    /// A path's href: `/dav/CONTAINER/` and each component percent-encoded.
    static func href(_ container: ContainerName, _ relative: String, collection: Bool) -> String {
        let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
        let parts = ([container.pathSegment] + components(relative)).map {
            $0.addingPercentEncoding(withAllowedCharacters: allowed) ?? $0
        }
        return "/dav/" + parts.joined(separator: "/") + (collection ? "/" : "")
    }

    func propfind(_ request: Request, _ target: Target) async throws -> Response {
        let body = try await request.body.collect(upTo: DavXML.maximumBody)
        let asked = try DavXML.propfind(String(buffer: body))
        let depth =
            request.headers[HTTPField.Name("Depth")!]?.trimmingCharacters(in: .whitespaces).lowercased() ?? "infinity"
        guard depth == "0" || depth == "1" else {
            throw DavStatus(status: .forbidden, message: "Depth: infinity is not offered; ask with Depth: 0 or 1")
        }
        guard let resource = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        let name = Self.components(target.relative).last ?? target.container.value
        var members: [(relative: String, name: String, resource: Resource)] = [(target.relative, name, resource)]
        if depth == "1" {
            for (childName, child) in try await children(target, resource) {
                members.append(
                    (target.relative.isEmpty ? childName : target.relative + "/" + childName, childName, child))
            }
        }
        let dead = try await metadata.deadProperties(
            account: target.account, container: target.container,
            paths: members.map { Self.propertyPath($0.relative) })
        let (locks, now) = try await metadata.davLocks(account: target.account, container: target.container)
        let container = target.named
        let listed = members
        // Written as it is made, a piece at a time: what the answer holds in memory stays at
        // one piece however many members, properties and locks it lists.
        return Self.multistatus { write in
            for (index, member) in listed.enumerated() {
                try await write(
                    Self.answer(
                        asked, member.resource,
                        href: Self.href(container, member.relative, collection: member.resource.isCollection),
                        name: member.name, dead: dead[Self.propertyPath(member.relative)] ?? [],
                        lockDiscovery: Self.lockDiscovery(
                            member.relative, locks, container, now: now, rootedOnly: index > 0)))
            }
        }
    }

    static func answer(
        _ asked: DavXML.PropfindRequest, _ resource: Resource, href: String, name: String, dead: [DeadProperty],
        lockDiscovery: String
    ) -> String {
        let props = properties(of: resource, name: name, lockDiscovery: lockDiscovery)
        switch asked {
        case .allProperties:
            return DavXML.response(href: href, found: props.map(\.1) + dead.map(\.xml), missing: [])
        case .propertyNames:
            return DavXML.response(
                href: href,
                found: props.map { "<D:\($0.0)/>" }
                    + dead.map { DavXML.empty(DavXML.Name(namespace: $0.namespace, local: $0.name)) },
                missing: [])
        case .properties(let names):
            var found: [String] = []
            var missing: [DavXML.Name] = []
            for name in names {
                if name.namespace == DavXML.dav, let prop = props.first(where: { $0.0 == name.local }) {
                    found.append(prop.1)
                } else if let property = dead.first(where: { $0.namespace == name.namespace && $0.name == name.local })
                {
                    found.append(property.xml)
                } else {
                    missing.append(name)
                }
            }
            return DavXML.response(href: href, found: found, missing: missing)
        }
    }

    /// Where a path's dead properties are kept: its document path, or its folder's without
    /// the trailing `/` (`Documents` for the root).
    static func propertyPath(_ relative: String) -> String { relative.isEmpty ? "Documents" : scope + relative }

    /// A collection's members, each with its name.
    func children(_ target: Target, _ resource: Resource) async throws -> [(String, Resource)] {
        switch resource {
        case .file, .packageFile:
            return []
        case .packageFolder(let info, let manifest, let entry):
            let entries = manifest.entries
            let prefix = entry.isEmpty ? "" : entry + "/"
            var members: [(String, Resource)] = []
            for index in 0..<entries.count {
                let path = entries.path(at: index)
                guard !path.isEmpty, path.utf8.starts(with: prefix.utf8) else { continue }
                let name = Self.strip(prefix, from: path)
                guard !name.utf8.contains(UInt8(ascii: "/")) else { continue }
                members.append(
                    (
                        name,
                        entries.kind(at: index) == .directory
                            ? .packageFolder(info, manifest, entry: path)
                            : .packageFile(info, manifest, index: index)
                    ))
                guard members.count <= Self.maximumTreeDocuments else {
                    throw DavStatus(
                        status: .davInsufficientStorage,
                        message:
                            "this folder of a package holds more than \(Self.maximumTreeDocuments) entries; pull the package with xfer"
                    )
                }
            }
            return members
        case .root, .folder:
            let prefix: String
            if case .folder(let folder, _) = resource { prefix = folder } else { prefix = Self.scope }
            var members: [(String, Resource)] = []
            var start: FolderPosition? = nil
            repeat {
                let page = try await metadata.folder(
                    account: target.account, container: target.container, prefix: prefix, from: start, limit: 1000)
                for entry in page.entries {
                    let name = entry.name.hasSuffix("/") ? String(entry.name.dropLast()) : entry.name
                    if let folder = entry.folder {
                        members.append(
                            (
                                name,
                                .folder(
                                    prefix: folder, document: entry.document?.kind == .directory ? entry.document : nil)
                            ))
                    } else if let info = entry.document, info.state == .current {
                        switch info.kind {
                        case .file: members.append((name, .file(info)))
                        case .directory: members.append((name, .folder(prefix: info.path.value + "/", document: info)))
                        case .package:
                            // Its size and date from the listing; its contents when asked for.
                            let manifest = try Manifest(kind: .package, chunker: .default, entries: [])
                            members.append((name, .packageFolder(info, manifest, entry: "")))
                        }
                    }
                }
                start = page.next
                guard members.count <= Self.maximumTreeDocuments else {
                    throw DavStatus(
                        status: .davInsufficientStorage,
                        message:
                            "this folder holds more than \(Self.maximumTreeDocuments) entries; list it with xfer ls")
                }
            } while start != nil
            return members
        }
    }

    /// Sets and removes dead properties, all or none (RFC 4918 §9.2): the live properties are
    /// protected (403, and the others then 424 Failed Dependency); within the bounds of
    /// ``DeadProperty`` (507 otherwise).
    func proppatch(_ request: Request, _ target: Target) async throws -> Response {
        let body = try await request.body.collect(upTo: DavXML.maximumBody)
        let changes = try DavXML.proppatch(String(buffer: body), maximumChanges: DeadProperty.maximumPerPath)
        switch try await resource(target, target.relative) {
        case nil: throw DavStatus(status: .notFound, message: "no such file or folder")
        case .packageFile?: throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        case .packageFolder(_, _, let entry)? where !entry.isEmpty:
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        default: break
        }
        try await checkWrite(request, target, [Change(relative: target.relative)])
        let protected = Set(
            changes.map(\.name).filter { $0.namespace == DavXML.dav && Self.liveProperties.contains($0.local) })
        var statuses: [(DavXML.Name, String)]
        if protected.isEmpty {
            try await metadata.patchDeadProperties(
                account: target.account, container: target.container, path: Self.propertyPath(target.relative),
                changes.map { change in
                    switch change {
                    case .set(let name, let xml):
                        return .set(DeadProperty(namespace: name.namespace, name: name.local, xml: xml))
                    case .remove(let name): return .remove(namespace: name.namespace, name: name.local)
                    }
                })
            statuses = changes.map { ($0.name, "HTTP/1.1 200 OK") }
        } else {
            statuses = changes.map {
                ($0.name, protected.contains($0.name) ? "HTTP/1.1 403 Forbidden" : "HTTP/1.1 424 Failed Dependency")
            }
        }
        var seen = Set<DavXML.Name>()
        let href = Self.href(target.named, target.relative, collection: target.slash)
        var xml = DavXML.head + "<D:response><D:href>\(DavXML.escape(href))</D:href>"
        for (name, status) in statuses where seen.insert(name).inserted {
            xml += "<D:propstat><D:prop>\(DavXML.empty(name))</D:prop><D:status>\(status)</D:status></D:propstat>"
        }
        xml += "</D:response>" + DavXML.tail
        return Self.multistatus(xml)
    }
}
