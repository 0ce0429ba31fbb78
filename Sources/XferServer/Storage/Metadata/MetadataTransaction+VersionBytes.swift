import Synchronization
import XferCore
import XferProtocol

// What an account's versions cost its quota (``QuotaRules/versionCost(manifestBytes:)``), one
// rule for both backends. Each transaction tallies what it charges and gives back, checks a
// refusable charge against the account's row (read once, locked), and writes the tally once
// before it commits (``recordVersionBytes()``): a batch of 500 commits updates the account's
// row once, not 500 times (on PostgreSQL each update of one row leaves a version the next walks).
extension MetadataTransaction {
    /// Charges a version of `manifestBytes` (as stored) to the account. A `refusable` charge
    /// (a new committed version) is refused past the quota: chunks and version records together.
    /// A deletion is not refusable: an account at its quota can always delete.
    /// - Throws: `quota_exceeded`, charging nothing.
    func chargeVersion(account: Int64, manifestBytes: Int, refusable: Bool) throws {
        let cost = QuotaRules.versionCost(manifestBytes: manifestBytes)
        if refusable {
            let base = try versionBytes.base(account) ?? readQuota(account)
            _ = try QuotaRules.charge(adding: cost, used: base.used + versionBytes.tally(account), quota: base.quota)
        }
        versionBytes.add(cost, account: account)
    }

    /// Gives back what a removed version (`state` as it was stored) cost its account.
    func releaseVersion(account: Int64, state: String, manifestBytes: Int) {
        guard state != VersionState.uploading.rawValue else { return }  // a pending version was never charged
        versionBytes.add(-QuotaRules.versionCost(manifestBytes: manifestBytes), account: account)
    }

    /// Runs `body` in a savepoint (``SQLSession/savepoint(_:)``), and forgets what it charged if
    /// it throws: the tally follows the rows.
    func savepoint<T>(_ body: () throws -> T) throws -> T {
        let mark = versionBytes.snapshot()
        do {
            return try sql.savepoint(body)
        } catch {
            versionBytes.restore(mark)
            throw error
        }
    }

    /// Writes each account's tally, before the transaction commits (``SQLMetadataStore/write(_:)``).
    func recordVersionBytes() throws {
        for (account, delta) in versionBytes.unwritten() where delta != 0 {
            try sql.rows(
                "UPDATE accounts SET version_bytes = CASE WHEN version_bytes + ? > 0 THEN version_bytes + ? ELSE 0 END WHERE id = ?",
                delta, delta, account)
        }
    }

    /// The account's quota and all it uses (chunks and version records), its row locked to the
    /// end of the transaction, as a chunk upload locks it.
    func readQuota(_ account: Int64) throws -> VersionBytes.Base {
        guard
            let row = try sql.one(
                "SELECT quota, used, version_bytes FROM accounts WHERE id = ?\(dialect.forUpdate)", account)
        else {
            throw XferError(.notFound, "no such account")
        }
        let base = VersionBytes.Base(
            quota: try row.int("quota"), used: try row.int("used") + (try row.int("version_bytes")))
        versionBytes.setBase(base, account: account)
        return base
    }
}

/// What one transaction has charged (and given back) for versions, by account, and each
/// account's row as the transaction first read it.
final class VersionBytes: Sendable {
    struct Base: Sendable {
        var quota: Int64
        var used: Int64
    }
    private struct State: Sendable {
        var tally: [Int64: Int64] = [:]
        var bases: [Int64: Base] = [:]
    }
    private let state = Mutex(State())

    func base(_ account: Int64) -> Base? { state.withLock { $0.bases[account] } }
    func setBase(_ base: Base, account: Int64) { state.withLock { $0.bases[account] = base } }
    func tally(_ account: Int64) -> Int64 { state.withLock { $0.tally[account, default: 0] } }
    func add(_ bytes: Int64, account: Int64) { state.withLock { $0.tally[account, default: 0] += bytes } }
    func snapshot() -> [Int64: Int64] { state.withLock { $0.tally } }
    func restore(_ tally: [Int64: Int64]) { state.withLock { $0.tally = tally } }

    /// Each account's tally, counted as written.
    func unwritten() -> [(account: Int64, delta: Int64)] {
        state.withLock { state in
            defer { state.tally = [:] }
            return state.tally.map { ($0.key, $0.value) }
        }
    }
}
