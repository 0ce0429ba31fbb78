import Foundation
import XferCore
import XferProtocol

// Accounts and tokens: who a request acts for, and the admin operations on accounts.
extension SQLMetadataStore {
    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        try await read { tx in
            // The clock in the same round trip: the request's start in the store's time.
            guard let row = try tx.sql.one("""
                SELECT t.hash, t.admin, a.id, a.name, \(tx.dialect.clock) AS now
                FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id WHERE t.hash = ?
                """, tokenHash) else { return nil }
            // The lookup is by hash of a 256-bit secret; the comparison itself is constant-time.
            guard TokenHash.equal(try row.blob("hash"), tokenHash) else { return nil }
            let now = try row.int("now")
            if try row.bool("admin") { return Principal(accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now) }
            guard let id = try row.optionalInt("id"), let name = try row.optionalText("name") else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false, authenticatedAt: now)
        }
    }

    public func deploymentID() async throws -> String {
        try await read { tx in try tx.sql.one("SELECT id FROM deployment LIMIT 1")?.text("id") ?? "" }
    }

    public func sealingKeys() async throws -> [SealingKeyID] {
        try await read { tx in
            try tx.sql.rows("SELECT id FROM sealing_keys ORDER BY added_at, id").compactMap { SealingKeyID(hex: try $0.text("id")) }
        }
    }

    public func hasAdminToken() async throws -> Bool {
        try await read { tx in try tx.sql.one("SELECT 1 FROM tokens WHERE admin = ? LIMIT 1", true) != nil }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        try await write { tx in
            try tx.sql.rows("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, NULL, ?, ?)", hash, true, MetadataTransaction.now())
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await write { tx in
            guard let id = try tx.sql.int("""
                INSERT INTO accounts (name, quota, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING RETURNING id
                """, name.value, quota, MetadataTransaction.now()) else {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try tx.sql.rows("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, ?, ?)",
                            tokenHash, id, false, MetadataTransaction.now())
            return AccountInfo(name: name.value, quota: quota, used: 0)
        }
    }

    public func addToken(account: AccountName, tokenHash: [UInt8]) async throws {
        try await write { tx in
            let id = try tx.accountID(account)
            try tx.sql.rows("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, ?, ?)",
                            tokenHash, id, false, MetadataTransaction.now())
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await write { tx in
            // Every admin token locked first (in one order), so two revocations cannot each see
            // another admin token left and together remove the last two.
            try tx.sql.rows("SELECT 1 FROM tokens WHERE admin = ? ORDER BY hash\(tx.dialect.forUpdate)", true)
            guard let row = try tx.sql.one("SELECT admin FROM tokens WHERE hash = ?\(tx.dialect.forUpdate)", hash) else { return false }
            if try row.bool("admin"), try tx.sql.int("SELECT COUNT(*) FROM tokens WHERE admin = ?", true) ?? 0 <= 1 {
                throw XferError(.badRequest, "that is the only admin token; the server would have none left")
            }
            try tx.sql.rows("DELETE FROM tokens WHERE hash = ?", hash)
            // The web sessions it opened end with it.
            try tx.sql.rows("DELETE FROM web_sessions WHERE token_hash = ?", hash)
            return true
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
            guard let row = try tx.sql.one("SELECT name, quota, used FROM accounts WHERE id = ?", accountID) else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(name: try row.text("name"), quota: try row.int("quota"), used: try row.int("used"))
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await read { tx in
            try tx.sql.rows("""
                SELECT a.id, a.name, a.used, CAST(COALESCE(h.held, 0) AS BIGINT) AS held
                FROM accounts a LEFT JOIN (SELECT account_id, SUM(length) AS held FROM account_chunks GROUP BY account_id) h ON h.account_id = a.id
                ORDER BY a.id
                """).map {
                AccountUsage(id: try $0.int("id"), name: try $0.text("name"), used: try $0.int("used"), held: try $0.int("held"))
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
            guard let summary = try tx.accountSummaries(named: account).first else { throw XferError(.notFound, "no account named \"\(account)\"") }
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
            guard let summary = try tx.accountSummaries(named: name).first else { throw XferError(.notFound, "no account named \"\(name)\"") }
            let versions = try tx.sql.int("SELECT COUNT(*) FROM versions WHERE container_id IN (\(owned))", id) ?? 0
            let deletion = AccountDeletion(name: name.value, containers: summary.containers, documents: summary.documents, versions: versions,
                                           tokens: summary.tokens, used: summary.used, dryRun: dryRun)
            guard !dryRun else { return deletion }
            // The container's rows first (versions before their documents), then the account's.
            for table in ["dav_locks", "dav_properties", "container_keys", "kv", "versions", "documents"] {
                try tx.sql.rows("DELETE FROM \(table) WHERE container_id IN (\(owned))", id)
            }
            for table in ["containers", "share_links", "web_sessions", "tokens", "account_chunks"] {
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
        return try sql.rows("""
            SELECT a.name, a.quota, a.used, a.created_at,
              (SELECT COUNT(*) FROM tokens t WHERE t.account_id = a.id) AS tokens,
              (SELECT COUNT(*) FROM containers c WHERE c.account_id = a.id) AS containers,
              (SELECT COUNT(*) FROM versions v JOIN containers c ON c.id = v.container_id
                 WHERE c.account_id = a.id AND v.state = '\(VersionState.current.rawValue)') AS documents
            FROM accounts a \(filter) ORDER BY a.name
            """, name.map { [SQLValue.text($0.value)] } ?? []).map { row in
            AccountSummary(name: try row.text("name"), quota: try row.int("quota"), used: try row.int("used"), createdAt: try row.int("created_at"),
                           tokens: try row.int("tokens"), containers: try row.int("containers"), documents: try row.int("documents"))
        }
    }

    func accountID(_ name: AccountName) throws -> Int64 {
        guard let id = try sql.int("SELECT id FROM accounts WHERE name = ?", name.value) else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
    }
}
