import Foundation
import GRDB
import XferCore
import XferProtocol

// Accounts and tokens: who a request acts for, and the admin operations on accounts.
extension SQLiteMetadataStore {
    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        let now = try await clock()
        return try await read { db in
            guard let row = try Row.fetchOne(db, sql: """
                SELECT t.hash, t.admin, a.id, a.name FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id
                WHERE t.hash = ?
                """, arguments: [Data(tokenHash)]) else { return nil }
            // The lookup is by hash of a 256-bit secret; the comparison itself is constant-time.
            let stored: Data = row["hash"]
            guard TokenHash.equal(Array(stored), tokenHash) else { return nil }
            let admin: Bool = row["admin"]
            if admin { return Principal(accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now) }
            guard let id: Int64 = row["id"], let name: String = row["name"] else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false, authenticatedAt: now)
        }
    }

    public func deploymentID() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "SELECT id FROM deployment LIMIT 1") ?? "" }
    }

    public func hasAdminToken() async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM tokens WHERE admin = 1)") ?? false }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        try await write { db in
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, NULL, 1, ?)",
                           arguments: [Data(hash), Self.now()])
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await write { db in
            if try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM accounts WHERE name = ?)", arguments: [name.value]) == true {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try db.execute(sql: "INSERT INTO accounts (name, quota, created_at) VALUES (?, ?, ?)",
                           arguments: [name.value, quota, Self.now()])
            let id = db.lastInsertedRowID
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, 0, ?)",
                           arguments: [Data(tokenHash), id, Self.now()])
            return AccountInfo(name: name.value, quota: quota, used: 0)
        }
    }

    public func addToken(account: AccountName, tokenHash: [UInt8]) async throws {
        try await write { db in
            let id = try Self.accountID(db, account)
            try db.execute(sql: "INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (?, ?, 0, ?)",
                           arguments: [Data(tokenHash), id, Self.now()])
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await write { db in
            guard let admin = try Bool.fetchOne(db, sql: "SELECT admin FROM tokens WHERE hash = ?", arguments: [Data(hash)]) else { return false }
            if admin, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM tokens WHERE admin = 1") ?? 0 <= 1 {
                throw XferError(.badRequest, "that is the only admin token; the server would have none left")
            }
            try db.execute(sql: "DELETE FROM tokens WHERE hash = ?", arguments: [Data(hash)])
            return true
        }
    }

    public func revokeTokens(account: AccountName) async throws -> Int {
        try await write { db in
            let id = try Self.accountID(db, account)
            try db.execute(sql: "DELETE FROM tokens WHERE account_id = ?", arguments: [id])
            return db.changesCount
        }
    }

    static func accountID(_ db: Database, _ name: AccountName) throws -> Int64 {
        guard let id = try Int64.fetchOne(db, sql: "SELECT id FROM accounts WHERE name = ?", arguments: [name.value]) else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
    }

    public func account(_ accountID: Int64) async throws -> AccountInfo {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT name, quota, used FROM accounts WHERE id = ?", arguments: [accountID]) else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(name: row["name"], quota: row["quota"], used: row["used"])
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await read { db in
            try Row.fetchAll(db, sql: """
                SELECT a.id, a.name, a.used, (SELECT COALESCE(SUM(length), 0) FROM account_chunks WHERE account_id = a.id) AS held
                FROM accounts a ORDER BY a.id
                """).map { AccountUsage(id: $0["id"], name: $0["name"], used: $0["used"], held: $0["held"]) }
        }
    }
}
