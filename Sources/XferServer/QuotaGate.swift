import Synchronization
import XferCore

/// Holds the quota before a byte reaches the disk: an upload batch reserves the bytes it would
/// add to the account (the chunks the account does not hold yet, at their declared lengths)
/// against the quota, the bytes recorded as used and every other batch in flight on this
/// server, before the chunk store writes anything. A refused batch writes nothing.
///
/// The recording itself (``MetadataStore/addChunks(account:_:uploadStartedAt:)``) checks the
/// quota again in its transaction, so the quota is never exceeded in the records; what the gate
/// adds is that a refused request does not fill the disk first. Servers sharing a database
/// reserve separately, so the disk can run ahead of the quota by at most one batch per server
/// and upload in flight; such unheld chunks are swept by `gc`.
final class QuotaGate: Sendable {
    private let reserved = Mutex<[Int64: Int64]>([:])

    /// Reserves `bytes` for `account` if `used + bytes` and what is already reserved fit `quota`.
    /// Every reservation is given back with ``release(account:bytes:)`` once its batch is
    /// recorded as used (or failed).
    /// - Throws: `quota_exceeded`, reserving nothing.
    func reserve(account: Int64, bytes: Int64, used: Int64, quota: Int64) throws {
        try reserved.withLock { table in
            let pending = table[account, default: 0]
            _ = try QuotaRules.charge(adding: bytes, used: used, quota: quota, pending: pending)
            table[account] = pending + bytes
        }
    }

    /// Gives back a reservation.
    func release(account: Int64, bytes: Int64) {
        reserved.withLock { table in
            let left = table[account, default: 0] - bytes
            table[account] = left > 0 ? left : nil
        }
    }

    /// Bytes reserved and not yet released, for tests.
    func pending(account: Int64) -> Int64 { reserved.withLock { $0[account, default: 0] } }
}
