import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// WebDAV class 2 (RFC 4918 §6–7, §9.10–9.11): LOCK, UNLOCK, the `If` header, and the check
/// every write makes before it changes anything. Locks live in the metadata store
/// (``DavLockStore``); whether two conflict is ``DavLock/conflicts(with:)``.
extension DavRoutes {
    static let ifHeader = HTTPField.Name("If")!
    static let lockTokenHeader = HTTPField.Name("Lock-Token")!
    static let timeoutHeader = HTTPField.Name("Timeout")!

    static let supportedLock =
        "<D:supportedlock>"
        + "<D:lockentry><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
        + "<D:lockentry><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockentry>"
        + "</D:supportedlock>"

    /// What a write changes, for the lock check.
    struct Change {
        /// The path below the scope (``Target/relative``).
        var relative: String
        /// Everything below it too (a DELETE or MOVE of a folder, or a destination replaced).
        var below = false
        /// Whether it adds a member to its folder or removes one: a lock on the folder guards that.
        var member = false
    }

    /// Before a write: the `If` header, when sent, holds (412 otherwise), and every lock on what
    /// the write changes has its token in that header (423 otherwise). Nothing has changed yet.
    func checkWrite(_ request: Request, _ target: Target, _ changes: [Change]) async throws {
        let condition = try request.headers[Self.ifHeader].map(DavIf.parse)
        let (locks, _) = try await metadata.davLocks(account: target.account, container: target.container)
        if let condition {
            guard try await condition.holds({ url in try await self.state(of: url, target, locks) }) else {
                throw DavStatus(status: .preconditionFailed, message: "the If header's conditions do not hold")
            }
        }
        guard !locks.isEmpty else { return }
        let submitted = condition?.tokens ?? []
        for change in changes {
            let path = Self.propertyPath(change.relative)
            var guarding = locks.filter { $0.covers(path) || (change.below && $0.isAtOrBelow(path)) }
            if change.member, !change.relative.isEmpty {
                let parent = Self.propertyPath(Self.components(change.relative).dropLast().joined(separator: "/"))
                guarding += locks.filter { $0.covers(parent) }
            }
            if let lock = guarding.first(where: { !submitted.contains($0.token) }) {
                let name = change.relative.isEmpty ? "the container's root" : change.relative
                throw DavStatus(
                    status: .davLocked,
                    message: "\(name) is locked (\(lock.token)); send the lock's token in an If header")
            }
        }
    }

    /// What an `If` list is checked against: the entity tag of the resource it names (its
    /// tag's URL, or the request's own) and the tokens of the locks on it.
    func state(of url: String?, _ target: Target, _ locks: [DavLock]) async throws -> (
        etag: String?, tokens: Set<String>
    ) {
        var relative = target.relative
        if let url {
            // A URL that is not one of this container's names holds no lock and no tag here.
            guard let named = try? Self.target(Self.path(ofURL: url), account: target.account),
                named.named == target.named
            else {
                return (nil, [])
            }
            relative = named.relative
        }
        let path = Self.propertyPath(relative)
        let tokens = Set(locks.filter { $0.covers(path) }.map(\.token))
        switch try await resource(target, relative) {
        case .file(let info)?: return (Self.etag(info), tokens)
        case .packageFile(let info, _, let index)?: return (DocumentBytes.etag(info, entry: index), tokens)
        default: return (nil, tokens)
        }
    }

    /// The path of a URL a client sends (a `Destination`, an `If` tag): an absolute one's part
    /// after its host, or the text itself.
    static func path(ofURL url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let afterHost = url[scheme.upperBound...]
        return afterHost.firstIndex(of: "/").map { String(afterHost[$0...]) } ?? "/"
    }

    /// A lock's timeout from a `Timeout` header (`Second-N`, `Infinite`, the first understood
    /// of a list), at most ``DavLock/maximumTimeout``.
    static func timeout(_ header: String?) -> Int64 {
        for part in (header ?? "").split(separator: ",") {
            let value = part.trimmingCharacters(in: .whitespaces).lowercased()
            if value == "infinite" { return DavLock.maximumTimeout }
            if value.hasPrefix("second-"), let seconds = Int64(value.dropFirst(7)), seconds > 0 {
                return min(seconds, DavLock.maximumTimeout)
            }
        }
        return DavLock.defaultTimeout
    }

    /// One lock as `DAV:activelock`, its timeout what is left of it at `now` (store clock).
    static func activeLock(_ lock: DavLock, _ container: ContainerName, now: Int64) -> String {
        let left = max(0, (lock.expiresAt - now + 999_999_999) / 1_000_000_000)
        let root = lock.path == "Documents" ? "" : strip(scope, from: lock.path)
        return
            "<D:activelock><D:locktype><D:write/></D:locktype><D:lockscope>\(lock.exclusive ? "<D:exclusive/>" : "<D:shared/>")</D:lockscope>"
            + "<D:depth>\(lock.infinite ? "infinity" : "0")</D:depth>\(lock.owner ?? "")<D:timeout>Second-\(left)</D:timeout>"
            + "<D:locktoken><D:href>\(DavXML.escape(lock.token))</D:href></D:locktoken>"
            + "<D:lockroot><D:href>\(DavXML.escape(href(container, root, collection: false)))</D:href></D:lockroot></D:activelock>"
    }

    /// The `DAV:lockdiscovery` of `relative`: every lock that covers it, or with `rootedOnly`
    /// only the locks taken on it. A member of a `Depth: 1` PROPFIND shows only its own: the
    /// locks it inherits are those of the folder asked for, shown once in that folder's answer,
    /// so each lock appears at most once in a multistatus, whatever the members and locks.
    static func lockDiscovery(
        _ relative: String, _ locks: [DavLock], _ container: ContainerName, now: Int64, rootedOnly: Bool = false
    ) -> String {
        let path = propertyPath(relative)
        let shown = locks.filter { rootedOnly ? $0.path == path : $0.covers(path) }
        return "<D:lockdiscovery>" + shown.map { activeLock($0, container, now: now) }.joined() + "</D:lockdiscovery>"
    }

    /// A LOCK's answer: the lock in `DAV:lockdiscovery`, and its token in `Lock-Token`.
    static func lockAnswer(_ status: HTTPResponse.Status, _ lock: DavLock, _ container: ContainerName, now: Int64)
        -> Response
    {
        var buffer = ByteBuffer()
        buffer.writeString(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<D:prop xmlns:D=\"DAV:\"><D:lockdiscovery>"
                + activeLock(lock, container, now: now) + "</D:lockdiscovery></D:prop>\n")
        return Response(
            status: status,
            headers: [
                .contentType: "application/xml; charset=utf-8", .contentLength: String(buffer.readableBytes),
                lockTokenHeader: "<\(lock.token)>"
            ],
            body: ResponseBody(byteBuffer: buffer))
    }

    /// LOCK (RFC 4918 §9.10): a new lock (a body), or a refresh of one the `If` header names
    /// (no body). A lock on a URL that names nothing makes an empty file there (§7.3).
    func lock(_ request: Request, _ target: Target) async throws -> Response {
        let body = try await request.body.collect(upTo: DavXML.maximumBody)
        let timeout = Self.timeout(request.headers[Self.timeoutHeader])
        let path = Self.propertyPath(target.relative)
        guard body.readableBytes > 0 else {
            guard let header = request.headers[Self.ifHeader] else {
                throw DavStatus(
                    status: .badRequest,
                    message: "a LOCK without a body refreshes a lock: name its token in an If header")
            }
            let tokens = try DavIf.parse(header).tokens
            let (locks, _) = try await metadata.davLocks(account: target.account, container: target.container)
            guard let held = locks.first(where: { $0.covers(path) && tokens.contains($0.token) }),
                let refreshed = try await metadata.refreshDavLock(
                    account: target.account, container: target.container, token: held.token, timeout: timeout)
            else {
                throw DavStatus(
                    status: .preconditionFailed, message: "no lock the If header names is on \(target.relative)")
            }
            let (_, now) = try await metadata.davLocks(account: target.account, container: target.container)
            return Self.lockAnswer(.ok, refreshed, target.named, now: now)
        }
        let asked = try DavXML.lockinfo(String(buffer: body))
        let depth =
            request.headers[HTTPField.Name("Depth")!]?.trimmingCharacters(in: .whitespaces).lowercased() ?? "infinity"
        guard depth == "0" || depth == "infinity" else {
            throw DavStatus(status: .badRequest, message: "a LOCK has Depth 0 or infinity")
        }
        let existing = try await resource(target, target.relative)
        switch existing {
        case .packageFile?: throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        case .packageFolder(_, _, let entry)? where !entry.isEmpty:
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here")
        case nil:
            guard !target.relative.isEmpty, !target.slash else {
                throw DavStatus(status: .notFound, message: "no such folder")
            }
            try await requireWritableParent(target, target.relative)
        default: break
        }
        try await checkWrite(request, target, existing == nil ? [Change(relative: target.relative, member: true)] : [])
        let lock = DavLock(
            token: "urn:uuid:" + UUID().uuidString.lowercased(), path: path, exclusive: asked.exclusive,
            infinite: depth == "infinity", owner: asked.owner, timeout: timeout)
        let conflicts = try await metadata.takeDavLock(account: target.account, container: target.container, lock)
        guard conflicts.isEmpty else {
            throw DavStatus(
                status: .davLocked,
                message:
                    "\(target.relative.isEmpty ? "the container's root" : target.relative) is locked already (\(conflicts[0].exclusive ? "exclusively" : "shared"))"
            )
        }
        var created = false
        if existing == nil {
            do {
                // Only where nothing is: a file made meanwhile (by a device) is locked as it is, never emptied.
                try await writeFile(target, try Self.documentPath(target.relative), base: nil, onlyNew: true, body: nil)
                created = true
            } catch let error as XferError where error.code == .alreadyExists {
                created = false
            } catch {
                _ = try? await metadata.releaseDavLock(
                    account: target.account, container: target.container, token: lock.token)
                throw error
            }
        }
        let (locks, now) = try await metadata.davLocks(account: target.account, container: target.container)
        return Self.lockAnswer(
            created ? .created : .ok, locks.first { $0.token == lock.token } ?? lock, target.named, now: now)
    }

    /// UNLOCK (RFC 4918 §9.11): releases the lock `Lock-Token` names, which must be on the
    /// request's resource or a folder above it.
    func unlock(_ request: Request, _ target: Target) async throws -> Response {
        guard let header = request.headers[Self.lockTokenHeader]?.trimmingCharacters(in: .whitespaces),
            header.hasPrefix("<"), header.hasSuffix(">"), header.count > 2
        else {
            throw DavStatus(status: .badRequest, message: "UNLOCK names its lock in a Lock-Token header: <urn:uuid:…>")
        }
        let token = String(header.dropFirst().dropLast())
        let (locks, _) = try await metadata.davLocks(account: target.account, container: target.container)
        guard locks.contains(where: { $0.token == token && $0.covers(Self.propertyPath(target.relative)) }) else {
            throw DavStatus(
                status: .conflict,
                message: "no lock \(token) is on \(target.relative.isEmpty ? "the container's root" : target.relative)")
        }
        _ = try await metadata.releaseDavLock(account: target.account, container: target.container, token: token)
        return Response(status: .noContent)
    }
}

extension HTTPResponse.Status {
    /// 423: the resource is locked and the request did not submit the lock's token (RFC 4918 §11.3).
    static var davLocked: Self { .init(code: 423, reasonPhrase: "Locked") }
}
