import Foundation
import XferCore
import XferProtocol

// Sharing end-to-end encrypted containers (docs/SHARING.md, "Encrypted containers"): written
// once for both backends.
extension SQLMetadataStore {
    public func setAccountKey(account: Int64, publicKey: [UInt8], replace: Bool) async throws {
        try await write { tx in
            if let kept = try tx.sql.one("SELECT public_key FROM account_keys WHERE account_id = ?", account) {
                let same = try kept.blob(0) == publicKey
                guard same || replace else {
                    throw XferError(
                        .conflict,
                        """
                        this account has another public key already; keys wrapped to it would stop opening on its devices. \
                        Import the account's key on this device (xfer account key import), or replace it (--replace)
                        """)
                }
                if same { return }
            }
            // Two devices making a first key at once: the second finds the first's (`conflict`).
            let update =
                replace ? "UPDATE SET public_key = excluded.public_key, updated_at = excluded.updated_at" : "NOTHING"
            let written = try tx.sql.rows(
                """
                INSERT INTO account_keys (account_id, public_key, updated_at) VALUES (?, ?, ?)
                ON CONFLICT (account_id) DO \(update) RETURNING account_id
                """, account, publicKey, try tx.clock())
            guard !written.isEmpty else {
                throw XferError(.conflict, "another device made this account's key a moment ago; run the command again")
            }
        }
    }

    public func accountKey(named name: AccountName) async throws -> [UInt8]? {
        try await read { tx in
            let id = try tx.accountID(name)
            return try tx.sql.one("SELECT public_key FROM account_keys WHERE account_id = ?", id).map { try $0.blob(0) }
        }
    }

    public func setMemberKey(
        owner: Int64, container: ContainerName, member: AccountName, wrapped: [UInt8], keyID: String
    ) async throws {
        try await write { tx in
            let id = try tx.encryptedContainer(owner: owner, name: container, keyID: keyID)
            let updated = try tx.sql.rows(
                """
                UPDATE container_members SET wrapped_key = ?, key_id = ? WHERE container_id = ?
                  AND account_id = (SELECT id FROM accounts WHERE name = ?) RETURNING account_id
                """, wrapped, keyID, id, member.value)
            guard !updated.isEmpty else {
                throw XferError(.notFound, "container \(container) is not shared with account \(member)")
            }
        }
    }

    public func memberKey(owner: Int64, container: ContainerName, member: Int64) async throws -> (
        wrapped: [UInt8], keyID: String
    )? {
        try await read { tx in
            try tx.sql.one(
                """
                SELECT m.wrapped_key, m.key_id FROM container_members m JOIN containers c ON c.id = m.container_id
                WHERE c.account_id = ? AND c.name = ? AND m.account_id = ? AND m.wrapped_key IS NOT NULL
                """, owner, container.name.value, member
            ).map { (try $0.blob(0), try $0.text(1)) }
        }
    }

    public func containerKeyLinks(account: Int64, container: ContainerName) async throws -> [[UInt8]] {
        try await read { tx in
            try tx.sql.rows(
                """
                SELECT l.link FROM container_key_links l JOIN containers c ON c.id = l.container_id
                WHERE c.account_id = ? AND c.name = ? ORDER BY l.generation DESC
                """, account, container.name.value
            ).map { try $0.blob(0) }
        }
    }

    public func rotateContainerKey(
        account: Int64, container: ContainerName, wrapped: [UInt8], previous: [UInt8], keyID: String, link: [UInt8],
        memberKeys: [AccountName: [UInt8]]
    ) async throws {
        try await write { tx in
            let id = try tx.containerID(account: account, name: container, create: false)
            if let id { try tx.lockContainer(id) }
            guard let id,
                let kept = try tx.sql.one("SELECT wrapped, key_id FROM container_keys WHERE container_id = ?", id)
            else {
                throw XferError(
                    .notFound, "container \(container) is not end-to-end encrypted: it has no key to rotate")
            }
            guard try kept.blob(0) == previous, try kept.text(1) != keyID else {
                throw XferError(
                    .conflict,
                    "the key of container \(container) was changed on another device; unlock it again (xfer key unlock) and retry"
                )
            }
            let links = try tx.sql.int("SELECT COUNT(*) FROM container_key_links WHERE container_id = ?", id) ?? 0
            try tx.sql.rows(
                "INSERT INTO container_key_links (container_id, generation, link) VALUES (?, ?, ?)", id, links + 2, link
            )
            try tx.sql.rows(
                "UPDATE container_keys SET wrapped = ?, key_id = ?, updated_at = ? WHERE container_id = ?", wrapped,
                keyID, try tx.clock(), id)
            try tx.sql.rows("UPDATE container_members SET wrapped_key = NULL, key_id = NULL WHERE container_id = ?", id)
            for (member, sealed) in memberKeys.sorted(by: { $0.key.value < $1.key.value }) {
                guard
                    try !tx.sql.rows(
                        """
                        UPDATE container_members SET wrapped_key = ?, key_id = ? WHERE container_id = ?
                          AND account_id = (SELECT id FROM accounts WHERE name = ?) RETURNING account_id
                        """, sealed, keyID, id, member.value
                    ).isEmpty
                else {
                    throw XferError(.notFound, "container \(container) is not shared with account \(member)")
                }
            }
        }
    }
}

extension MetadataTransaction {
    /// The owner's end-to-end encrypted container whose current key is `keyID`, locked.
    /// - Throws: `not_found` if it does not exist; `conflict` if it is plain or its key is another.
    func encryptedContainer(owner: Int64, name: ContainerName, keyID: String) throws -> Int64 {
        guard let id = try containerID(account: owner, name: name, create: false) else {
            throw XferError(.notFound, "there is no container \(name)")
        }
        try lockContainer(id)
        guard let current = try sql.one("SELECT key_id FROM container_keys WHERE container_id = ?", id) else {
            throw XferError(.conflict, "container \(name) is not end-to-end encrypted: there is no key to wrap")
        }
        guard try current.text(0) == keyID else {
            throw XferError(
                .conflict,
                "container \(name)'s key is \(try current.text(0)), not \(keyID): it was rotated; fetch it again")
        }
        return id
    }
}
