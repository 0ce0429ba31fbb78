import Foundation
import Logging
import NIOCore
import PostgresNIO
import Synchronization
import XferCore
import XferProtocol

// Accounts and tokens: who a request acts for, and the admin operations on accounts.
extension PostgresMetadataStore {
    public func principal(tokenHash: [UInt8]) async throws -> Principal? {
        try await transaction { tx in
            guard let row = try await tx.one("""
                SELECT t.hash, t.admin, a.id, a.name, (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint AS now
                FROM tokens t LEFT JOIN accounts a ON a.id = t.account_id WHERE t.hash = \(Data(tokenHash))
                """) else { return nil }
            guard TokenHash.equal(Array(try row["hash"].decode(Data.self)), tokenHash) else { return nil }
            let now = try row["now"].decode(Int64.self)
            if try row["admin"].decode(Bool.self) { return Principal(accountID: 0, name: "admin", isAdmin: true, authenticatedAt: now) }
            guard let id = try row["id"].decode(Int64?.self), let name = try row["name"].decode(String?.self) else { return nil }
            return Principal(accountID: id, name: name, isAdmin: false, authenticatedAt: now)
        }
    }

    public func deploymentID() async throws -> String {
        try await transaction { tx in try await tx.one("SELECT id FROM deployment LIMIT 1").map { try $0["id"].decode(String.self) } ?? "" }
    }

    public func hasAdminToken() async throws -> Bool {
        try await transaction { tx in try await tx.one("SELECT 1 FROM tokens WHERE admin") != nil }
    }

    public func addAdminToken(hash: [UInt8]) async throws {
        try await transaction { tx in
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(hash)), NULL, true, \(Self.now()))")
        }
    }

    public func createAccount(name: AccountName, quota: Int64, tokenHash: [UInt8]) async throws -> AccountInfo {
        try await transaction { tx in
            guard let id = try await tx.int("""
                INSERT INTO accounts (name, quota, created_at) VALUES (\(name.value), \(quota), \(Self.now()))
                ON CONFLICT (name) DO NOTHING RETURNING id
                """) else {
                throw XferError(.alreadyExists, "an account named \"\(name)\" already exists")
            }
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(tokenHash)), \(id), false, \(Self.now()))")
            return AccountInfo(name: name.value, quota: quota, used: 0)
        }
    }

    public func addToken(account: AccountName, tokenHash: [UInt8]) async throws {
        try await transaction { tx in
            let id = try await Self.accountID(tx, account)
            try await tx.run("INSERT INTO tokens (hash, account_id, admin, created_at) VALUES (\(Data(tokenHash)), \(id), false, \(Self.now()))")
        }
    }

    public func revokeToken(hash: [UInt8]) async throws -> Bool {
        try await transaction { tx in
            // Every admin token locked first (in one order), so two revocations cannot each see
            // another admin token left and together remove the last two.
            try await tx.run("SELECT 1 FROM tokens WHERE admin ORDER BY hash FOR UPDATE")
            guard let row = try await tx.one("SELECT admin FROM tokens WHERE hash = \(Data(hash)) FOR UPDATE") else { return false }
            if try row[0].decode(Bool.self), try await tx.int("SELECT COUNT(*) FROM tokens WHERE admin") ?? 0 <= 1 {
                throw XferError(.badRequest, "that is the only admin token; the server would have none left")
            }
            try await tx.run("DELETE FROM tokens WHERE hash = \(Data(hash))")
            return true
        }
    }

    public func revokeTokens(account: AccountName) async throws -> Int {
        try await transaction { tx in
            let id = try await Self.accountID(tx, account)
            return try await tx.rows("DELETE FROM tokens WHERE account_id = \(id) RETURNING hash").count
        }
    }

    static func accountID(_ tx: Transaction, _ name: AccountName) async throws -> Int64 {
        guard let id = try await tx.int("SELECT id FROM accounts WHERE name = \(name.value)") else {
            throw XferError(.notFound, "no account named \"\(name)\"")
        }
        return id
    }

    public func account(_ accountID: Int64) async throws -> AccountInfo {
        try await transaction { tx in
            guard let row = try await tx.one("SELECT name, quota, used FROM accounts WHERE id = \(accountID)") else {
                throw XferError(.notFound, "no such account")
            }
            return AccountInfo(name: try row["name"].decode(String.self), quota: try row["quota"].decode(Int64.self), used: try row["used"].decode(Int64.self))
        }
    }

    public func accounts() async throws -> [AccountUsage] {
        try await transaction { tx in
            try await tx.rows("""
                SELECT a.id, a.name, a.used, (SELECT COALESCE(SUM(length), 0) FROM account_chunks WHERE account_id = a.id)::bigint AS held
                FROM accounts a ORDER BY a.id
                """).map {
                AccountUsage(id: try $0["id"].decode(Int64.self), name: try $0["name"].decode(String.self), used: try $0["used"].decode(Int64.self),
                             held: try $0["held"].decode(Int64.self))
            }
        }
    }
}
