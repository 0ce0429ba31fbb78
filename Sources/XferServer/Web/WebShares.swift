import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix
import Synchronization
import XferCore
import XferProtocol

/// Share links (docs/WEB.md): a read-only link to one document, made from its page, listed
/// and revoked at `/web/shares`, opened at `/s/SECRET` by anyone who has it, no account
/// needed. The secret is 256 random bits, shown once, kept by the server as its SHA-256; a
/// link grants that document alone (the version it was made for, or whatever is current),
/// until it expires or is revoked, and nothing once the document is deleted. A password is kept
/// as scrypt of it (``PasswordGate``); a browser that gave it holds a cookie for that link's
/// path alone, derived from the secret and the stored hash.
extension WebRoutes {
    func registerShares(on router: Router<XferRequestContext>, web: RouterGroup<XferRequestContext>) {
        web.post("c/:container/share", use: page(createShare))
        web.get("shares", use: page(shareList))
        web.post("shares/revoke", use: page(revokeShare))
        router.get("s/:secret", use: page(openShare))
        router.post("s/:secret", use: page(unlockShare))
        router.get("s/:secret/download", use: page(downloadShare))
    }

    /// The cookie of a browser that gave a link's password.
    static func unlocked(_ secret: String, _ stored: String) -> String {
        ChunkID.of(Array("xfer share unlocked v1\0\(secret)\0\(stored)".utf8)).description
    }

    @Sendable func createShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let (target, form) = try await action(request, context, .manage)
        let container = target.named
        let path = try DocumentPath(form["path"] ?? "")
        let version = form["pin"] == "1" ? try Self.versionField(form, "base") : nil
        let days = Int64(form["days"] ?? "7") ?? -1
        guard (0...365).contains(days) else {
            throw XferError(.badRequest, "a link lasts 0 (until revoked) to 365 days")
        }
        let password = form["password"] ?? ""
        guard password.utf8.count <= ShareCreateRequest.maximumPasswordBytes else {
            throw XferError(.badRequest, "the password is longer than \(ShareCreateRequest.maximumPasswordBytes) bytes")
        }
        let (link, secret) = try await ShareLinks(metadata: metadata, passwords: passwords).make(
            for: session.principal, container: target.container, path: path, version: version,
            lifetime: days == 0 ? nil : days * 86_400 * 1_000_000_000, password: password)
        var values = commonValues(container)
        values["url"] = ShareLinks.url(request, secret: secret, secure: limits.secureCookies)
        values["name"] = String(path.value.split(separator: "/").last ?? "")
        values["itemHref"] = Self.href(container, "item") + WebSecurity.query([("path", path.value)])
        values["expires"] = link.expiresAt.map(Self.date) ?? "never (until revoked)"
        if link.hasPassword { values["password"] = true }
        if let version = link.version { values["pinned"] = String(version) }
        return html("shared", values, title: "Share link", session: session)
    }

    @Sendable func shareList(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let links = try await metadata.shares(account: session.principal.accountID)
        let rows = links.map { link -> [String: Any] in
            var row: [String: Any] = [
                "id": String(link.id), "container": link.container, "path": link.path.value,
                "version": link.version.map { "version \($0)" } ?? "current version",
                "created": Self.date(link.createdAt), "expires": link.expiresAt.map(Self.date) ?? "never",
                "href": "/web/c/\(link.container)/item" + WebSecurity.query([("path", link.path.value)])
            ]
            if link.hasPassword { row["password"] = true }
            if link.expired { row["expired"] = true }
            return row
        }
        return html("shares", ["links": rows, "hasLinks": !rows.isEmpty], title: "Share links", session: session)
    }

    @Sendable func revokeShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        let form = try await checkForm(request, session)
        guard let id = form["id"].flatMap({ Int64($0) }) else {
            throw XferError(.badRequest, "id must be a share link's number")
        }
        guard try await metadata.revokeShare(account: session.principal.accountID, id: id) else {
            throw XferError(.notFound, "this account has no share link \(id)")
        }
        return Self.redirect("/web/shares")
    }

    // MARK: Opening a link (no account)

    /// The grant a request's link secret names, and whether this browser may see it yet.
    func grant(_ request: Request, _ context: XferRequestContext) async throws -> (
        grant: ShareGrant, secret: String, unlocked: Bool
    ) {
        let secret = context.parameters.get("secret") ?? ""
        guard WebSecurity.isSecret(secret), let grant = try await metadata.share(hash: ShareLinks.hash(secret)) else {
            throw XferError(.notFound, "this share link does not exist, has expired or was revoked")
        }
        guard let stored = grant.password else { return (grant, secret, true) }
        let cookie = request.cookies[Self.shareCookie]?.value ?? ""
        return (grant, secret, WebSecurity.same(cookie, Self.unlocked(secret, stored)))
    }

    static let shareCookie = "xfer_share"

    /// The shared version's description and manifest: only while the document the link was made
    /// for is live, and a pinned version only if it is that document's (``ShareStore``).
    func shared(_ grant: ShareGrant) async throws -> (info: DocumentInfo, manifest: Manifest) {
        do {
            let stored = try await metadata.sharedManifest(grant)
            return (stored.info, try Manifest(decoding: stored.manifest))
        } catch let error as XferError where error.code == .notFound {
            throw XferError(.notFound, "what this link shared is no longer there (it was deleted)")
        }
    }

    @Sendable func openShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (grant, secret, unlocked) = try await grant(request, context)
        let name = String(grant.link.path.value.split(separator: "/").last ?? "")
        guard unlocked else {
            return html(
                "share-password", ["name": "A shared document", "action": "/s/" + secret], title: "Shared document",
                session: nil)
        }
        let (info, manifest) = try await shared(grant)
        var values: [String: Any] = [
            "name": name, "kind": info.kind.rawValue, "size": ByteCount(info.size).description,
            "modified": Self.date(info.mtimeNs),
            "downloadHref": "/s/\(secret)/download",
            "downloadLabel": manifest.kind == .package ? "Download as .tar" : "Download"
        ]
        if let expires = grant.link.expiresAt { values["expires"] = Self.date(expires) }
        if manifest.kind == .package { values["files"] = String(manifest.fileCount) }
        return html("share", values, title: name, session: nil)
    }

    @Sendable func unlockShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        let (grant, secret, _) = try await grant(request, context)
        guard let stored = grant.password else { return Self.redirect("/s/" + secret) }
        let password = try await WebSecurity.form(request)["password"] ?? ""
        // Counted before the check (concurrent guesses count too), given back if right.
        guard shareAttempts.begin(grant.link.id) else {
            throw XferError(.rateLimited, "too many wrong passwords for this link; wait a minute and try again")
        }
        let good = try await passwords.run(account: grant.account) { PasswordHash.verify(password, against: stored) }
        if good { shareAttempts.succeeded(grant.link.id) }
        guard good else {
            return html(
                "share-password",
                ["name": "A shared document", "action": "/s/" + secret, "error": "That is not the password."],
                title: "Shared document", session: nil, status: .unauthorized)
        }
        var response = Self.redirect("/s/" + secret)
        response.setCookie(
            Cookie(
                name: Self.shareCookie, value: Self.unlocked(secret, stored), maxAge: 12 * 3600, path: "/s/" + secret,
                secure: limits.secureCookies, httpOnly: true, sameSite: .lax))
        return response
    }

    @Sendable func downloadShare(_ request: Request, context: XferRequestContext) async throws -> Response {
        let (grant, secret, unlocked) = try await grant(request, context)
        guard unlocked else { return Self.redirect("/s/" + secret) }
        let (info, manifest) = try await shared(grant)
        return try serve(
            manifest, info: info, name: String(grant.link.path.value.split(separator: "/").last ?? "download"),
            request: request)
    }
}

/// Password attempts per link: at most ``limit`` a minute that were not right, across every
/// browser. An attempt counts from its start (so concurrent guesses count), and a right one
/// is given back.
public final class ShareAttempts: Sendable {
    public static let limit = 10
    private let attempts = Mutex<[Int64: [ContinuousClock.Instant]]>([:])

    /// Records an attempt; `false` (nothing recorded) if the link had ``limit`` in the last minute.
    func begin(_ id: Int64) -> Bool {
        attempts.withLock { table in
            let recent = (table[id] ?? []).filter { ContinuousClock.now - $0 < .seconds(60) }
            guard recent.count < Self.limit else {
                table[id] = recent
                return false
            }
            if table.count > 10_000 { table = [:] }  // bounded: a flood forgets, it never grows
            table[id] = recent + [ContinuousClock.now]
            return true
        }
    }

    /// The attempt was right: it does not count.
    func succeeded(_ id: Int64) {
        attempts.withLock { table in
            if var recent = table[id], !recent.isEmpty {
                recent.removeLast()
                table[id] = recent.isEmpty ? nil : recent
            }
        }
    }
}

/// scrypt runs for share links' passwords (32 MiB and tens of milliseconds each), making one
/// or checking one: at most ``limit`` at once (a server has one gate, in its ``WebRoutes``),
/// and one at a time per account (the account that owns the link). It is CPU work, so it runs
/// where xfer's other CPU work runs, on Dispatch's concurrent queue, never on the blocking pool
/// or the cooperative pool. One more is answered at once, `503 unavailable` with `Retry-After`,
/// never queued: an account's flood waits on nothing but itself, and holds at most one of the
/// runs another account's link needs.
final class PasswordGate: Sendable {
    static let limit = 2

    private struct State {
        var accounts: Set<Int64> = []
        /// Runs started so far (tests).
        var started = 0
    }

    private let state = Mutex(State())

    /// Runs `body`, one scrypt for `account`, on the gate's threads.
    /// - Throws: `unavailable` (cause ``RetryAfter``) at once if `account` already has one
    ///   running or the process has ``limit``; what `body` throws.
    func run<T: Sendable>(account: Int64, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        let admitted: Bool = state.withLock { state in
            guard state.accounts.count < Self.limit, !state.accounts.contains(account) else { return false }
            state.accounts.insert(account)
            state.started += 1
            return true
        }
        guard admitted else {
            throw XferError(
                .unavailable, "the server is checking other passwords; retry in a moment", cause: RetryAfter(seconds: 1)
            )
        }
        defer { state.withLock { state in _ = state.accounts.remove(account) } }
        return try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
            DispatchQueue.global().async { done.resume(with: Result(catching: body)) }
        }
    }

    /// Runs started so far, refused ones not counted (tests).
    var started: Int { state.withLock { $0.started } }
}
