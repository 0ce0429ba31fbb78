import Foundation
import XferCore
import XferProtocol

// Containers shared with other accounts (docs/SHARING.md): the member rows, written once for
// both backends.
extension SQLMetadataStore {
    public func setMember(owner: Int64, container: ContainerName, member: AccountName, role: ContainerRole)
        async throws -> MemberInfo
    {
        try await write { tx in
            let memberID = try tx.accountID(member)
            guard memberID != owner else {
                throw XferError(.badRequest, "\(member) owns container \(container): share it with another account")
            }
            let containerID = try tx.shareableContainer(owner: owner, name: container)
            let count =
                try tx.sql.int(
                    "SELECT COUNT(*) FROM container_members WHERE container_id = ? AND account_id != ?", containerID,
                    memberID) ?? 0
            guard count < MemberList.maximumMembers else {
                throw XferError(
                    .tooLarge,
                    "container \(container) is shared with \(count) accounts, the most it may be; unshare one first")
            }
            let now = try tx.clock()
            try tx.sql.rows(
                """
                INSERT INTO container_members (container_id, account_id, role, added_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (container_id, account_id) DO UPDATE SET role = excluded.role, added_at = excluded.added_at
                """, containerID, memberID, role.rawValue, now)
            return MemberInfo(account: member.value, role: role, addedAt: now)
        }
    }

    public func removeMember(owner: Int64, container: ContainerName, member: AccountName) async throws -> Bool {
        try await write { tx in
            guard let containerID = try tx.containerID(account: owner, name: container, create: false) else {
                return false
            }
            return try !tx.sql.rows(
                """
                DELETE FROM container_members WHERE container_id = ?
                  AND account_id = (SELECT id FROM accounts WHERE name = ?) RETURNING account_id
                """, containerID, member.value
            ).isEmpty
        }
    }

    public func members(owner: Int64, container: ContainerName) async throws -> [MemberInfo] {
        try await read { tx in
            guard let containerID = try tx.containerID(account: owner, name: container, create: false) else {
                return []
            }
            return try tx.sql.rows(
                """
                SELECT a.name, m.role, m.added_at, m.key_id FROM container_members m JOIN accounts a ON a.id = m.account_id
                WHERE m.container_id = ? ORDER BY a.name\(tx.dialect.bytewise)
                """, containerID
            ).map {
                try MemberInfo(
                    account: $0.text("name"), role: Self.role($0), addedAt: $0.int("added_at"),
                    keyID: $0.optionalText("key_id"))
            }
        }
    }

    public func grant(member: Int64, owner: AccountName, container: ContainerName) async throws
        -> (owner: Int64, role: ContainerRole)?
    {
        try await read { tx in
            try tx.sql.one(
                """
                SELECT c.account_id, m.role FROM container_members m JOIN containers c ON c.id = m.container_id
                  JOIN accounts a ON a.id = c.account_id
                WHERE m.account_id = ? AND a.name = ? AND c.name = ?
                """, member, owner.value, container.name.value
            ).map { (try $0.int("account_id"), try Self.role($0)) }
        }
    }

    public func containerList(account: Int64) async throws -> [ContainerEntry] {
        try await read { tx in
            let encrypted =
                "CASE WHEN EXISTS (SELECT 1 FROM container_keys k WHERE k.container_id = c.id) THEN 1 ELSE 0 END"
            let own = try tx.sql.rows(
                """
                SELECT c.name, \(encrypted) AS encrypted,
                  (SELECT COUNT(*) FROM container_members m WHERE m.container_id = c.id) AS members
                FROM containers c WHERE c.account_id = ? ORDER BY c.name\(tx.dialect.bytewise)
                """, account
            ).map {
                ContainerEntry(
                    container: try $0.text("name"), role: .owner, encrypted: try $0.int("encrypted") != 0,
                    members: Int(try $0.int("members")))
            }
            let shared = try tx.sql.rows(
                """
                SELECT a.name AS owner, c.name, m.role, \(encrypted) AS encrypted
                FROM container_members m JOIN containers c ON c.id = m.container_id JOIN accounts a ON a.id = c.account_id
                WHERE m.account_id = ? ORDER BY a.name\(tx.dialect.bytewise), c.name\(tx.dialect.bytewise)
                """, account
            ).map {
                ContainerEntry(
                    container: "\(try $0.text("owner"))/\(try $0.text("name"))", role: try Self.role($0),
                    encrypted: try $0.int("encrypted") != 0, members: 0)
            }
            return own + shared
        }
    }

    private static func role(_ row: SQLRow) throws -> ContainerRole {
        let text = try row.text("role")
        guard let role = ContainerRole(rawValue: text), role != .owner else {
            throw XferError(.internal, "a member row holds the role \"\(text)\"")
        }
        return role
    }
}

extension MetadataTransaction {
    /// The owner's container to share, made if absent. An end-to-end encrypted one may be
    /// shared: the member opens it once the owner wraps the key to its account's public key.
    func shareableContainer(owner: Int64, name: ContainerName) throws -> Int64 {
        if let id = try containerID(account: owner, name: name, create: false) {
            return id
        }
        guard let id = try containerID(account: owner, name: name, create: true) else {
            throw XferError(.internal, "container \(name) could not be made")
        }
        return id
    }
}
