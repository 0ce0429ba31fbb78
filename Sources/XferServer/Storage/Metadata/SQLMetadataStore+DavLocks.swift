import XferCore
import XferProtocol

// WebDAV's locks (docs/WEBDAV.md), one rule for both backends: which locks conflict is
// ``DavLock/conflicts(with:)``, decided here inside the write that takes the lock, under the
// container's row lock, so two servers never grant two conflicting locks.
extension SQLMetadataStore {
    public func davLocks(account: Int64, container: ContainerName) async throws -> (locks: [DavLock], now: Int64) {
        try await read { tx in
            let now = try tx.clock()
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return ([], now)
            }
            return (try tx.davLocks(containerID, now: now), now)
        }
    }

    public func takeDavLock(account: Int64, container: ContainerName, _ lock: DavLock) async throws -> [DavLock] {
        guard (lock.owner?.utf8.count ?? 0) <= DavLock.maximumOwnerBytes else {
            throw XferError(.tooLarge, "a lock's owner is at most \(DavLock.maximumOwnerBytes) bytes")
        }
        return try await write { tx in
            let now = try tx.clock()
            guard let containerID = try tx.containerID(account: account, name: container, create: true) else {
                return []
            }
            try tx.sql.rows("DELETE FROM dav_locks WHERE container_id = ? AND expires_at <= ?", containerID, now)
            let held = try tx.davLocks(containerID, now: now)
            let conflicts = held.filter { $0.conflicts(with: lock) }
            guard conflicts.isEmpty else { return conflicts }
            guard held.count < DavLock.maximumPerContainer else {
                throw XferError(
                    .tooLarge,
                    "a container holds at most \(DavLock.maximumPerContainer) WebDAV locks; unlock some first")
            }
            guard held.filter({ $0.path == lock.path }).count < DavLock.maximumPerPath else {
                throw XferError(
                    .tooLarge,
                    "a file or folder holds at most \(DavLock.maximumPerPath) WebDAV locks; unlock some first")
            }
            let timeout = min(max(lock.timeout, 1), DavLock.maximumTimeout)
            try tx.sql.rows(
                """
                INSERT INTO dav_locks (token, container_id, path, exclusive, infinite, owner, timeout, expires_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(lock.token), .int(containerID), .text(lock.path), .bool(lock.exclusive), .bool(lock.infinite),
                    lock.owner.map { .text($0) } ?? .null, .int(timeout), .int(now + timeout * 1_000_000_000)
                ])
            if lock.owner != nil { try tx.checkMetadataBudget(account: account) }
            return []
        }
    }

    public func refreshDavLock(account: Int64, container: ContainerName, token: String, timeout: Int64) async throws
        -> DavLock?
    {
        try await write { tx in
            let now = try tx.clock()
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return nil
            }
            let seconds = min(max(timeout, 1), DavLock.maximumTimeout)
            try tx.sql.rows(
                "UPDATE dav_locks SET timeout = ?, expires_at = ? WHERE container_id = ? AND token = ? AND expires_at > ?",
                seconds, now + seconds * 1_000_000_000, containerID, token, now)
            return try tx.davLocks(containerID, now: now).first { $0.token == token }
        }
    }

    public func releaseDavLock(account: Int64, container: ContainerName, token: String) async throws -> Bool {
        try await write { tx in
            let now = try tx.clock()
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return false
            }
            let held = try tx.davLocks(containerID, now: now).contains { $0.token == token }
            try tx.sql.rows("DELETE FROM dav_locks WHERE container_id = ? AND token = ?", containerID, token)
            return held
        }
    }

    public func releaseDavLocks(account: Int64, container: ContainerName, below path: String) async throws {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else { return }
            let (clause, values) = tx.paths(below: path)
            try tx.sql.rows("DELETE FROM dav_locks WHERE container_id = ? AND \(clause)", [.int(containerID)] + values)
        }
    }
}

extension MetadataTransaction {
    /// The container's locks that have not expired at `now`, oldest first.
    func davLocks(_ containerID: Int64, now: Int64) throws -> [DavLock] {
        try sql.rows(
            """
            SELECT token, path, exclusive, infinite, owner, timeout, expires_at FROM dav_locks
            WHERE container_id = ? AND expires_at > ? ORDER BY expires_at - timeout * 1000000000, token
            """, containerID, now
        ).map { row in
            DavLock(
                token: try row.text("token"), path: try row.text("path"), exclusive: try row.bool("exclusive"),
                infinite: try row.bool("infinite"),
                owner: try row.optionalText("owner"), timeout: try row.int("timeout"),
                expiresAt: try row.int("expires_at"))
        }
    }
}
