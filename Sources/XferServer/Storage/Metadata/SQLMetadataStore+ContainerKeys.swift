import Foundation
import XferCore
import XferProtocol

// End-to-end encrypted containers: the wrapped key kept for each (docs/SECURITY.md,
// "End-to-end encryption").
extension SQLMetadataStore {
    public func containerKey(account: Int64, container: ContainerName) async throws -> (
        wrapped: [UInt8], keyID: String
    )? {
        try await read { tx in
            try tx.sql.one(
                """
                SELECT k.wrapped, k.key_id FROM container_keys k JOIN containers c ON c.id = k.container_id
                WHERE c.account_id = ? AND c.name = ?
                """, account, container.value
            ).map { (try $0.blob(0), try $0.text(1)) }
        }
    }

    public func setContainerKey(
        account: Int64, container: ContainerName, wrapped: [UInt8], previous: [UInt8]?, keyID: String
    ) async throws {
        try await write { tx in
            // A new container is made plain first (it has no key yet, so the write check passes).
            let existing = try tx.sql.int(
                "SELECT id FROM containers WHERE account_id = ? AND name = ?", account, container.value)
            let id =
                try existing
                ?? (previous == nil ? tx.containerID(account: account, name: container, create: true) : nil)
            guard let id else {
                throw XferError(.notFound, "container \(container) does not exist, so it has no key to replace")
            }
            try tx.lockContainer(id)
            let row = try tx.sql.one("SELECT wrapped, key_id FROM container_keys WHERE container_id = ?", id)
            let kept = try row.map { try $0.blob(0) }
            switch (kept, previous) {
            case (nil, nil):
                let holds =
                    try tx.sql.one("SELECT 1 FROM documents WHERE container_id = ? LIMIT 1", id) != nil
                    || tx.sql.one("SELECT 1 FROM kv WHERE container_id = ? LIMIT 1", id) != nil
                guard !holds else {
                    throw XferError(
                        .encryptedContainer,
                        """
                        container \(container) already holds documents or values; a container with data cannot be made end-to-end \
                        encrypted (its data would stay readable): create a new container
                        """)
                }
                try tx.sql.rows(
                    "INSERT INTO container_keys (container_id, wrapped, key_id, updated_at) VALUES (?, ?, ?, ?)",
                    id, wrapped, keyID, try tx.clock())
            case (nil, .some):
                throw XferError(
                    .notFound, "container \(container) is not end-to-end encrypted, so it has no key to replace")
            case (.some, nil):
                throw XferError(
                    .alreadyExists,
                    "container \(container) is end-to-end encrypted already; to change its passphrase, give the wrapped key it replaces"
                )
            case (.some(let kept), .some(let previous)):
                let keptID = try row!.text(1)
                guard keptID == keyID else {
                    throw XferError(
                        .conflict,
                        "container \(container)'s key is \(keptID), not \(keyID): a passphrase change keeps the key")
                }
                guard kept == previous else {
                    throw XferError(
                        .conflict,
                        "the passphrase of container \(container) was changed on another device; unlock it again (xfer key unlock) and retry"
                    )
                }
                try tx.sql.rows(
                    "UPDATE container_keys SET wrapped = ?, updated_at = ? WHERE container_id = ?", wrapped,
                    try tx.clock(), id)
            }
        }
    }
}
