import Foundation
import XferCore
import XferProtocol

// What the web view reads beyond the /v1 rules: sign-in sessions and one folder level of a
// container (docs/WEB.md).
extension SQLMetadataStore {
    public func openWebSession(tokenHash: [UInt8], sessionHash: [UInt8], lifetime: Int64) async throws -> WebSession? {
        // A wrong token costs a read, never the writer (a sign-in loop must not queue commits).
        guard let known = try await principal(tokenHash: tokenHash), Self.opensWebSessions(known) else { return nil }
        return try await write { tx in
            guard let principal = try tx.principal(tokenHash: tokenHash), Self.opensWebSessions(principal) else {
                return nil
            }
            let id = principal.accountID
            let now = principal.authenticatedAt
            // Expired sessions go as new ones come; an account keeps at most the newest
            // WebSession.maximumPerAccount (a script signing in in a loop cannot grow the table).
            try tx.sql.rows("DELETE FROM web_sessions WHERE expires_at <= ?", now)
            let open = try tx.sql.int("SELECT COUNT(*) FROM web_sessions WHERE account_id = ?", id) ?? 0
            if open >= Int64(WebSession.maximumPerAccount) {
                let oldest = try tx.sql.rows(
                    "SELECT hash FROM web_sessions WHERE account_id = ? ORDER BY created_at, hash LIMIT ?",
                    id, open - Int64(WebSession.maximumPerAccount) + 1)
                for old in oldest { try tx.sql.rows("DELETE FROM web_sessions WHERE hash = ?", try old.blob("hash")) }
            }
            let expires = now + lifetime
            try tx.sql.rows(
                "INSERT INTO web_sessions (hash, account_id, token_hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)",
                sessionHash, id, tokenHash, now, expires)
            return WebSession(principal: principal, tokenHash: tokenHash, expiresAt: expires)
        }
    }

    public func webSession(hash: [UInt8]) async throws -> WebSession? {
        try await read { tx in
            // Joined with the token it was opened with: revoking that token, or its expiry, ends its sessions.
            guard
                let row = try tx.sql.one(
                    """
                    SELECT s.hash AS session, s.expires_at AS session_expires, \(tx.principalColumns)
                    FROM web_sessions s JOIN tokens t ON t.hash = s.token_hash JOIN accounts a ON a.id = s.account_id
                    WHERE s.hash = ?
                    """, hash), TokenHash.equal(try row.blob("session"), hash),
                let principal = try MetadataTransaction.principal(row), Self.opensWebSessions(principal)
            else { return nil }
            let expires = try row.int("session_expires")
            guard expires > principal.authenticatedAt else { return nil }
            // `t.hash`: the token's hash, as its own requests are keyed in the limits.
            return WebSession(principal: principal, tokenHash: try row.blob("hash"), expiresAt: expires)
        }
    }

    /// Whether a token may sign in to the web view: an account's token of full scope that has
    /// not expired (the web view's pages and actions reach every container and change things).
    static func opensWebSessions(_ principal: Principal) -> Bool {
        !principal.isAdmin && !principal.isExpired && principal.scope.isFull
    }

    public func closeWebSession(hash: [UInt8]) async throws {
        try await write { tx in _ = try tx.sql.rows("DELETE FROM web_sessions WHERE hash = ?", hash) }
    }

    public func folder(
        account: Int64, container: ContainerName, prefix: String, from start: FolderPosition?, limit: Int
    ) async throws -> FolderPage {
        try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return FolderPage(entries: [], next: nil)
            }
            let bytewise = tx.dialect.bytewise
            let upper = MetadataTransaction.successor(of: prefix)
            // One step: the live documents from `position` on, below `prefix`, in path order.
            // A page takes at most `FolderPage.maximumSteps` of them (each a folder skipped or a
            // directory document probed), then answers with what it has and where to go on.
            var steps = 0
            func step(_ position: FolderPosition, _ count: Int, below: String? = nil) throws -> [DocumentInfo] {
                steps += 1
                var clauses = [
                    "d.container_id = ?", "d.path\(bytewise) \(position.inclusive ? ">=" : ">") ?",
                    "v.state != 'deleted'"
                ]
                var values: [SQLValue] = [.int(containerID), .text(position.key)]
                if let high = below ?? upper {
                    clauses.append("d.path\(bytewise) < ?")
                    values.append(.text(high))
                }
                values.append(.int(Int64(count)))
                return try tx.sql.rows(
                    """
                    SELECT d.path, \(tx.infoColumns) FROM documents d
                    JOIN versions v ON v.document_id = d.id AND v.version = COALESCE(d.current_version, d.latest_version)
                    WHERE \(clauses.joined(separator: " AND ")) ORDER BY d.path\(bytewise) LIMIT ?
                    """, values
                ).map(MetadataTransaction.info(row:))
            }
            var position = start ?? FolderPosition(key: prefix, inclusive: true)
            var entries: [FolderEntry] = []
            scan: while entries.count < limit {
                if steps >= FolderPage.maximumSteps { return FolderPage(entries: entries, next: position) }
                let rows = try step(position, min(256, limit - entries.count + 1))
                if rows.isEmpty { return FolderPage(entries: entries, next: nil) }
                for info in rows {
                    let rest = info.path.value.utf8.dropFirst(prefix.utf8.count)
                    if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                        // A document deeper down: its first folder is one entry, and the scan
                        // goes on past everything below it.
                        let name = String(decoding: rest[..<slash], as: UTF8.self)
                        let below = prefix + name + "/"
                        entries.append(FolderEntry(name: name, folder: below, document: nil))
                        guard let past = MetadataTransaction.successor(of: below) else {
                            return FolderPage(entries: entries, next: nil)
                        }
                        position = FolderPosition(key: past, inclusive: true)
                        continue scan
                    }
                    position = FolderPosition(key: info.path.value, inclusive: false)
                    let name = String(decoding: rest, as: UTF8.self)
                    if info.kind == .directory {
                        // A synced folder's directory document is shown where its contents are
                        // (once); alone only when nothing live lies below it.
                        let below = prefix + name + "/"
                        if try !step(
                            FolderPosition(key: below, inclusive: true), 1,
                            below: MetadataTransaction.successor(of: below)
                        ).isEmpty {
                            continue
                        }
                        entries.append(FolderEntry(name: name, folder: below, document: info))
                    } else {
                        entries.append(FolderEntry(name: name, folder: nil, document: info))
                    }
                    if entries.count == limit { break scan }
                }
            }
            let more = try !step(position, 1).isEmpty
            return FolderPage(entries: entries, next: more ? position : nil)
        }
    }
}

// Share links (docs/WEB.md, "Share links").
extension SQLMetadataStore {
    public func checkShare(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?) async throws {
        try await read { tx in
            try tx.checkShareable(account: account, container: container, path: path, version: version, locking: false)
        }
    }

    public func createShare(
        account: Int64, container: ContainerName, path: DocumentPath, version: Int64?, password: String?,
        hash: [UInt8], lifetime: Int64?
    ) async throws -> ShareLink {
        try await write { tx in
            try tx.checkShareable(account: account, container: container, path: path, version: version, locking: true)
            let now = try tx.clock()
            let expires = lifetime.map { now + $0 }
            guard
                let id = try tx.sql.int(
                    """
                    INSERT INTO share_links (hash, account_id, container, path, version, password, created_at, expires_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                    """, hash, account, container.value, path.value, version, password, now, expires)
            else {
                throw XferError(.internal, "the share link was not recorded")
            }
            return ShareLink(
                id: id, container: container.value, path: path, version: version, hasPassword: password != nil,
                createdAt: now, expiresAt: expires, expired: false)
        }
    }

    public func shares(account: Int64) async throws -> [ShareLink] {
        try await read { tx in
            let now = try tx.clock()
            return try tx.sql.rows("SELECT * FROM share_links WHERE account_id = ? ORDER BY id DESC", account).map {
                try Self.shareLink($0, now: now)
            }
        }
    }

    public func revokeShare(account: Int64, id: Int64) async throws -> Bool {
        try await write { tx in
            try !tx.sql.rows("DELETE FROM share_links WHERE account_id = ? AND id = ? RETURNING id", account, id)
                .isEmpty
        }
    }

    public func share(hash: [UInt8]) async throws -> ShareGrant? {
        try await read { tx in
            guard let row = try tx.sql.one("SELECT * FROM share_links WHERE hash = ?", hash),
                TokenHash.equal(try row.blob("hash"), hash)
            else { return nil }
            let link = try Self.shareLink(row, now: try tx.clock())
            let account = try row.int("account_id")
            guard !link.expired, try tx.sharedVersion(account: account, link: link) != nil else { return nil }
            return ShareGrant(link: link, account: account, password: try row.optionalText("password"))
        }
    }

    public func sharedManifest(_ grant: ShareGrant) async throws -> (info: DocumentInfo, manifest: [UInt8]) {
        try await read { tx in
            guard let shown = try tx.sharedVersion(account: grant.account, link: grant.link) else {
                throw XferError(.notFound, "what this link shared is no longer there (it was deleted)")
            }
            return try tx.manifest(container: shown.container, path: grant.link.path, version: shown.info.version)
        }
    }

    static func shareLink(_ row: SQLRow, now: Int64) throws -> ShareLink {
        let expires = try row.optionalInt("expires_at")
        return ShareLink(
            id: try row.int("id"), container: try row.text("container"), path: try DocumentPath(try row.text("path")),
            version: try row.optionalInt("version"), hasPassword: try row.optionalText("password") != nil,
            createdAt: try row.int("created_at"), expiresAt: expires, expired: expires.map { $0 <= now } ?? false)
    }
}

// What a share link may show: one document while it is live (ShareStore).
extension MetadataTransaction {
    /// The version a link to `path` (pinned to `version`, if given) may show now: the current
    /// version of the live document there, or the pinned one if it is one of that document's
    /// own. A deletion ends a document: a version from before the last deletion at the path
    /// belongs to an earlier document, which no link shows again, whatever was made there since.
    /// - Returns: `nil` when nothing live is at `path`, or the pinned version is an earlier
    ///   document's, or holds no content.
    func liveShared(container: Int64, path: DocumentPath, version: Int64?, locking: Bool) throws -> DocumentInfo? {
        guard let document = try documentRow(container: container, path: path, create: false, locking: locking),
            let current = document.current,
            let live = try info(document: document.id, path: path, version: current), live.state == .current
        else { return nil }
        guard let version, version != current else { return live }
        // Deletion versions are never pruned (``prune(account:document:)``): the last one stands.
        let deleted =
            try sql.int(
                """
                SELECT MAX(version) FROM versions WHERE container_id = ? AND document_id = ? AND state = 'deleted'
                """, container, document.id) ?? 0
        guard version > deleted, let pinned = try info(document: document.id, path: path, version: version),
            pinned.state == .superseded || pinned.state == .conflict
        else { return nil }
        return pinned
    }

    /// ``liveShared(container:path:version:locking:)`` for a stored link of `account`.
    func sharedVersion(account: Int64, link: ShareLink) throws -> (container: Int64, info: DocumentInfo)? {
        guard let container = try containerID(account: account, name: try ContainerName(link.container), create: false),
            let info = try liveShared(container: container, path: link.path, version: link.version, locking: false)
        else { return nil }
        return (container, info)
    }

    /// The checks before a link is made: a live document of the account (and a pinned version
    /// of its own), not a folder, in a container that is not end-to-end encrypted, and room for
    /// one more link.
    /// - Throws: `not_found`, `bad_request` (a folder), `encrypted_container` or `too_large`.
    func checkShareable(account: Int64, container: ContainerName, path: DocumentPath, version: Int64?, locking: Bool)
        throws
    {
        guard let containerID = try containerID(account: account, name: container, create: false),
            let info = try liveShared(container: containerID, path: path, version: version, locking: locking)
        else {
            let which =
                version.map { " at version \($0) (a version from before it was last deleted is another document's)" }
                ?? ""
            throw XferError(.notFound, "no document \(path) in container \(container) to share\(which)")
        }
        guard info.kind != .directory else {
            throw XferError(.badRequest, "\(path) is a folder; share a document in it")
        }
        if try sql.one("SELECT 1 FROM container_keys WHERE container_id = ?", containerID) != nil {
            throw XferError(
                .encryptedContainer,
                "container \(container) is end-to-end encrypted: the server cannot show its documents to anyone")
        }
        guard
            try sql.int("SELECT COUNT(*) FROM share_links WHERE account_id = ?", account) ?? 0
                < Int64(ShareLink.maximumPerAccount)
        else {
            throw XferError(
                .tooLarge, "this account has \(ShareLink.maximumPerAccount) share links, the limit; revoke some first")
        }
    }
}
