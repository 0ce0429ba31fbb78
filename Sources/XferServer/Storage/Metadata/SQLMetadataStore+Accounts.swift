import Foundation
import XferCore
import XferProtocol

// Accounts and tokens: who a request acts for, and the admin operations on accounts.
extension SQLMetadataStore {
    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        try await read { tx in try tx.principal(tokenHash: tokenHash) }
    }

    public func deploymentID() async throws -> String {
        try await read { tx in try tx.sql.one("SELECT id FROM deployment LIMIT 1")?.text("id") ?? "" }
    }

    public func sealingKeys() async throws -> [SealingKeyID] {
        try await read { tx in
            try tx.sql.rows("SELECT id FROM sealing_keys ORDER BY added_at, id").compactMap {
                SealingKeyID(hex: try $0.text("id"))
            }
        }
    }

    public func hasAdminToken() async throws -> Bool {
        try await read { tx in try tx.sql.one("SELECT 1 FROM tokens WHERE admin = ? LIMIT 1", true) != nil }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        _ = try await write { tx in
            try tx.sql.rows(
                "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, NULL, ?, ?)", hash, true,
                MetadataTransaction.now())
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await write { tx in
            guard
                let id = try tx.sql.int(
                    """
                    INSERT INTO accounts (name, quota, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id
                    """, name.value, quota, MetadataTransaction.now())
            else {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try tx.sql.rows(
                "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, ?, ?)",
                tokenHash, id, false, MetadataTransaction.now())
            return AccountInfo(name: name.value, quota: quota, used: 0, versionBytes: 0)
        }
    }

    public func addToken(account: AccountName, tokenHash: [UInt8], terms: TokenTerms, notAfter: Int64?) async throws
        -> TokenSummary
    {
        try await write { tx in
            let id = try tx.accountID(account)
            let now = try tx.clock()
            var expires = terms.expiresInSeconds.map { now + $0 * 1_000_000_000 }
            if let notAfter {
                // Counted here, in the store's time: a token about to expire cannot hand on a
                // fresh second again and again.
                guard notAfter - now >= 1_000_000_000 else {
                    throw XferError(
                        .unauthorized, "the token that asks expires in under a second; it issues no more tokens")
                }
                expires = min(expires ?? notAfter, notAfter)
            }
            // The account's row locked first: two issuings at once count one after the other.
            try tx.sql.rows("SELECT id FROM accounts WHERE id = ?\(tx.dialect.forUpdate)", id)
            let live =
                try tx.sql.int(
                    "SELECT COUNT(*) FROM tokens WHERE account_id = ? AND (expires_at IS NULL OR expires_at > ?)", id,
                    now) ?? 0
            guard live < Int64(AccountLimits.maximumTokens) else {
                throw XferError(
                    .forbidden,
                    "account \(account) has \(live) live tokens, the most it may; revoke some first (xfer token list, xfer token revoke ID)"
                )
            }
            let scope = terms.scope
            try tx.sql.rows(
                """
                INSERT INTO tokens (hash, account_id, admin, created_at, device, read_only, container, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .blob(tokenHash), .int(id), .bool(false), .int(MetadataTransaction.now()),
                    terms.device.map(SQLValue.text) ?? .null,
                    .bool(scope.readOnly), scope.container.map(SQLValue.text) ?? .null,
                    expires.map(SQLValue.int) ?? .null
                ])
            return TokenSummary(
                id: TokenHash.publicID(ofHash: tokenHash), account: account.value, admin: false, device: terms.device,
                scope: scope, createdAt: MetadataTransaction.now(), expiresAt: expires.map { $0 / 1_000_000_000 },
                expired: false)
        }
    }

    public func tokens(account: AccountName) async throws -> [TokenSummary] {
        try await read { tx in
            let id = try tx.accountID(account)
            let now = try tx.clock()
            return try tx.sql.rows(
                """
                SELECT hash, admin, device, read_only, container, created_at, expires_at FROM tokens WHERE account_id = ? ORDER BY created_at, hash
                """, id
            ).map { row in
                let expires = try row.optionalInt("expires_at")
                return TokenSummary(
                    id: TokenHash.publicID(ofHash: try row.blob("hash")), account: account.value,
                    admin: try row.bool("admin"),
                    device: try row.optionalText("device"),
                    scope: TokenScope(
                        readOnly: try row.bool("read_only"), container: try row.optionalText("container")),
                    createdAt: try row.int("created_at"), expiresAt: expires.map { $0 / 1_000_000_000 },
                    expired: expires.map { $0 <= now } ?? false)
            }
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await write { tx in try tx.revokeToken(hash: hash) }
    }

    public func revokeToken(id: String, account: AccountName?) async throws -> Bool {
        try await write { tx in
            // The hashes that begin with the id's 8 bytes: a range of the primary key.
            let prefix = Sealing.hexBytes(id) ?? []
            var upper = prefix
            while let last = upper.last, last == 0xFF { upper.removeLast() }
            if !upper.isEmpty { upper[upper.count - 1] += 1 }
            var clauses = ["hash >= ?"]
            var values: [SQLValue] = [.blob(prefix)]
            if !upper.isEmpty {
                clauses.append("hash < ?")
                values.append(.blob(upper))
            }
            if let account {
                clauses.append("account_id = ?")
                values.append(.int(try tx.accountID(account)))
            }
            let found = try tx.sql.rows("SELECT hash FROM tokens WHERE \(clauses.joined(separator: " AND "))", values)
            // Two tokens whose hashes share 64 bits: none in any server's life; refused rather than guessed.
            guard found.count <= 1 else {
                throw XferError(.conflict, "two tokens have id \(id); revoke the token itself")
            }
            guard let row = found.first else { return false }
            return try tx.revokeToken(hash: try row.blob("hash"))
        }
    }

    /// Test seam: moves a token's expiry to `expiresAt` (store clock, ns), as time passing would.
    func setTokenExpiry(hash: [UInt8], at expiresAt: Int64) async throws {
        try await write { tx in _ = try tx.sql.rows("UPDATE tokens SET expires_at = ? WHERE hash = ?", expiresAt, hash)
        }
    }

    public func removeExpiredTokens(before cutoff: Int64) async throws -> Int {
        try await write { tx in
            try tx.sql.rows(
                "DELETE FROM web_sessions WHERE token_hash IN (SELECT hash FROM tokens WHERE expires_at <= ?)", cutoff)
            return try tx.sql.rows(
                "DELETE FROM tokens WHERE expires_at <= ? AND admin = ? RETURNING hash", cutoff, false
            ).count
        }
    }

    public func revokeTokens(account: AccountName) async throws -> Int {
        try await write { tx in
            let id = try tx.accountID(account)
            try tx.sql.rows("DELETE FROM web_sessions WHERE account_id = ?", id)
            return try tx.sql.rows("DELETE FROM tokens WHERE account_id = ? RETURNING hash", id).count
        }
    }

    public func account(_ accountID: Int64) async throws -> AccountInfo {
        try await read { tx in
            guard
                let row = try tx.sql.one(
                    "SELECT name, quota, used, version_bytes FROM accounts WHERE id = ?", accountID)
            else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(
                name: try row.text("name"), quota: try row.int("quota"), used: try row.int("used"),
                versionBytes: try row.int("version_bytes"))
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await read { tx in
            try tx.sql.rows(
                """
                SELECT a.id, a.name, a.used, CAST(COALESCE(h.held, 0) AS BIGINT) AS held, a.version_bytes,
                  CAST(COALESCE(r.kept, 0) AS BIGINT) AS version_bytes_kept
                FROM accounts a
                LEFT JOIN (SELECT account_id, SUM(length) AS held FROM account_chunks GROUP BY account_id) h ON h.account_id = a.id
                LEFT JOIN (SELECT account_id, SUM(cost) AS kept FROM (
                             SELECT c.account_id, \(QuotaRules.versionRecordBytes) + COALESCE(LENGTH(v.manifest), 0) AS cost
                             FROM versions v JOIN containers c ON c.id = v.container_id WHERE v.state != 'uploading'
                             UNION ALL
                             SELECT c.account_id, \(QuotaRules.versionRecordBytes) + LENGTH(r.fields) AS cost
                             FROM records r JOIN record_zones z ON z.id = r.zone_id JOIN containers c ON c.id = z.container_id
                             WHERE r.fields IS NOT NULL) costs
                           GROUP BY account_id) r ON r.account_id = a.id
                ORDER BY a.id
                """
            ).map {
                AccountUsage(
                    id: try $0.int("id"), name: try $0.text("name"), used: try $0.int("used"), held: try $0.int("held"),
                    versionBytes: try $0.int("version_bytes"), versionBytesKept: try $0.int("version_bytes_kept"))
            }
        }
    }
}

// What the admin sees of accounts, and their quotas.
extension SQLMetadataStore {
    public func accountSummaries(named name: AccountName?) async throws -> [AccountSummary] {
        try await read { tx in
            let found = try tx.accountSummaries(named: name)
            if let name, found.isEmpty { throw XferError(.notFound, "no account named \"\(name)\"") }
            return found
        }
    }

    public func setQuota(account: AccountName, quota: Int64) async throws -> AccountSummary {
        guard quota >= 0 else { throw XferError(.badRequest, "a quota is 0 bytes or more") }
        return try await write { tx in
            let id = try tx.accountID(account)
            try tx.sql.rows("UPDATE accounts SET quota = ? WHERE id = ?", quota, id)
            guard let summary = try tx.accountSummaries(named: account).first else {
                throw XferError(.notFound, "no account named \"\(account)\"")
            }
            return summary
        }
    }
}

// Deleting an account: everything of it, one transaction, both backends.
extension SQLMetadataStore {
    public func deleteAccount(_ name: AccountName, dryRun: Bool) async throws -> AccountDeletion {
        try await write { tx in
            let id = try tx.accountID(name)
            // Its containers' rows, then its own, locked as a commit takes them (container, then
            // account): a write of the account's that is under way finishes first or waits, and
            // finds nothing after (on PostgreSQL; SQLite runs one write at a time).
            try tx.sql.rows("SELECT id FROM containers WHERE account_id = ? ORDER BY id\(tx.dialect.forUpdate)", id)
            try tx.sql.rows("SELECT id FROM accounts WHERE id = ?\(tx.dialect.forUpdate)", id)
            let owned = "SELECT id FROM containers WHERE account_id = ?"
            guard let summary = try tx.accountSummaries(named: name).first else {
                throw XferError(.notFound, "no account named \"\(name)\"")
            }
            let versions = try tx.sql.int("SELECT COUNT(*) FROM versions WHERE container_id IN (\(owned))", id) ?? 0
            let deletion = AccountDeletion(
                name: name.value, containers: summary.containers, documents: summary.documents, versions: versions,
                tokens: summary.tokens, used: summary.used, dryRun: dryRun)
            guard !dryRun else { return deletion }
            // The container's rows first (versions before their documents), then the account's.
            let zones = "SELECT id FROM record_zones WHERE container_id IN (\(owned))"
            for table in ["record_values", "record_locations", "records"] {
                try tx.sql.rows("DELETE FROM \(table) WHERE zone_id IN (\(zones))", id)
            }
            for table in [
                "record_webhooks", "record_notifications", "record_subscriptions", "record_zones", "container_members",
                "container_key_links", "dav_locks", "dav_properties",
                "container_keys", "kv", "versions", "documents"
            ] {
                try tx.sql.rows("DELETE FROM \(table) WHERE container_id IN (\(owned))", id)
            }
            // Its memberships in others' containers end with it.
            for table in [
                "container_members", "containers", "share_links", "web_sessions", "tokens", "account_chunks",
                "account_keys"
            ] {
                try tx.sql.rows("DELETE FROM \(table) WHERE account_id = ?", id)
            }
            try tx.sql.rows("DELETE FROM accounts WHERE id = ?", id)
            return deletion
        }
    }
}

extension MetadataTransaction {
    func accountSummaries(named name: AccountName?) throws -> [AccountSummary] {
        let filter = name == nil ? "" : "WHERE a.name = ?"
        return try sql.rows(
            """
            SELECT a.name, a.quota, a.used, a.version_bytes, a.created_at,
              (SELECT COUNT(*) FROM tokens t WHERE t.account_id = a.id) AS tokens,
              (SELECT COUNT(*) FROM containers c WHERE c.account_id = a.id) AS containers,
              (SELECT COUNT(*) FROM versions v JOIN containers c ON c.id = v.container_id
                 WHERE c.account_id = a.id AND v.state = '\(VersionState.current.rawValue)') AS documents
            FROM accounts a \(filter) ORDER BY a.name
            """, name.map { [SQLValue.text($0.value)] } ?? []
        ).map { row in
            AccountSummary(
                name: try row.text("name"), quota: try row.int("quota"), used: try row.int("used"),
                versionBytes: try row.int("version_bytes"), createdAt: try row.int("created_at"),
                tokens: try row.int("tokens"), containers: try row.int("containers"),
                documents: try row.int("documents"))
        }
    }

    func accountID(_ name: AccountName) throws -> Int64 {
        guard let id = try sql.int("SELECT id FROM accounts WHERE name = ?", name.value) else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
    }
}

// A token's row as who a request acts for, read one way everywhere (the /v1 routes, WebDAV, the
// web view's sessions).
extension MetadataTransaction {
    /// The columns ``principal(_:)`` reads, from `tokens t` left-joined with `accounts a`, and
    /// the store's clock as `now` (in the same round trip).
    var principalColumns: String {
        "t.hash, t.admin, t.device, t.read_only, t.container, t.expires_at, a.id, a.name, \(dialect.clock) AS now"
    }

    /// The principal of a row of ``principalColumns``, expired or not (the caller refuses an
    /// expired one, saying so); `nil` for an account token whose account is gone.
    static func principal(_ row: SQLRow) throws -> Principal? {
        let now = try row.int("now")
        let scope = TokenScope(readOnly: try row.bool("read_only"), container: try row.optionalText("container"))
        let device = try row.optionalText("device")
        let expires = try row.optionalInt("expires_at")
        if try row.bool("admin") {
            return Principal(
                accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now, device: device, scope: scope,
                expiresAt: expires)
        }
        guard let id = try row.optionalInt("id"), let name = try row.optionalText("name") else { return nil }
        return Principal(
            accountID: id, name: name, isAdmin: false, authenticatedAt: now, device: device, scope: scope,
            expiresAt: expires)
    }

    /// The principal a token hash belongs to, or `nil`.
    func principal(tokenHash: [UInt8]) throws -> Principal? {
        guard
            let row = try sql.one(
                "SELECT \(principalColumns) FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id WHERE t.hash = ?",
                tokenHash)
        else { return nil }
        // The lookup is by hash of a 256-bit secret; the comparison itself is constant-time.
        guard TokenHash.equal(try row.blob("hash"), tokenHash) else { return nil }
        return try Self.principal(row)
    }

    /// Revokes the token of `hash`, unless it is the last admin token; its web sessions end with it.
    func revokeToken(hash: [UInt8]) throws -> Bool {
        // Every admin token locked first (in one order), so two revocations cannot each see
        // another admin token left and together remove the last two.
        try sql.rows("SELECT 1 FROM tokens WHERE admin = ? ORDER BY hash\(dialect.forUpdate)", true)
        guard let row = try sql.one("SELECT admin FROM tokens WHERE hash = ?\(dialect.forUpdate)", hash) else {
            return false
        }
        if try row.bool("admin"), try sql.int("SELECT COUNT(*) FROM tokens WHERE admin = ?", true) ?? 0 <= 1 {
            throw XferError(.badRequest, "that is the only admin token; the server would have none left")
        }
        try sql.rows("DELETE FROM tokens WHERE hash = ?", hash)
        try sql.rows("DELETE FROM web_sessions WHERE token_hash = ?", hash)
        return true
    }
}
