import Synchronization
import XferCore

/// How much one token may ask of a server (``TokenLimiter``).
public struct TokenLimits: Sendable, Hashable {
    /// Requests a second one token may make, sustained; 0 for no limit.
    public var requestsPerSecond: Double = 200
    /// Requests one token may make at once after a quiet time, above the sustained rate.
    public var burst: Double = 2_000
    /// Uploads (chunk uploads, WebDAV PUTs) one token may have running at once; 0 for no limit.
    /// xfer's own client runs 4.
    public var uploadsAtOnce = 32

    public init() {}
}

/// The detail of a `rate_limited` error: when to ask again, sent as `Retry-After`.
public struct RetryAfter: Error, Sendable, Hashable {
    /// Whole seconds, at least 1.
    public var seconds: Int
}

/// Per-token request rate and concurrent uploads (docs/SECURITY.md): a token bucket for each
/// token, holding ``TokenLimits/burst`` requests and refilled at
/// ``TokenLimits/requestsPerSecond``, and a count of the token's running uploads. A request past
/// either is answered 429 `rate_limited` with `Retry-After`, before any work is done for it;
/// xfer's client waits that long and sends it again (``RetryPolicy``).
///
/// Keyed by the token's hash, and only for tokens that authenticated: unknown tokens make no
/// entry. Each server process keeps its own buckets (servers behind one address each allow the
/// rate). Entries of tokens quiet long enough to have a full bucket and no upload are dropped
/// when the table passes ``maximumTracked``.
final class TokenLimiter: Sendable {
    let limits: TokenLimits
    static let maximumTracked = 50_000

    private struct Entry {
        var available: Double
        var updated: ContinuousClock.Instant
        var uploads = 0
    }

    private let table = Mutex<[[UInt8]: Entry]>([:])

    init(_ limits: TokenLimits) {
        self.limits = limits
    }

    /// Takes one request from `key`'s bucket.
    /// - Throws: `rate_limited` (cause ``RetryAfter``) if the bucket is empty; nothing is taken.
    func admit(_ key: [UInt8], now: ContinuousClock.Instant = .now) throws {
        guard limits.requestsPerSecond > 0 else { return }
        let wait: Double? = table.withLock { table in
            if table.count >= Self.maximumTracked, table[key] == nil { Self.dropQuiet(&table, limits, now) }
            var entry = table[key] ?? Entry(available: limits.burst, updated: now)
            entry.available = min(
                limits.burst, entry.available + (now - entry.updated).seconds * limits.requestsPerSecond)
            entry.updated = now
            defer { table[key] = entry }
            guard entry.available >= 1 else { return (1 - entry.available) / limits.requestsPerSecond }
            entry.available -= 1
            return nil
        }
        if let wait {
            throw XferError(
                .rateLimited,
                "this token sends more than \(Self.rate(limits.requestsPerSecond)) requests a second; wait and send again",
                cause: RetryAfter(seconds: max(1, Int(wait.rounded(.up)))))
        }
    }

    /// Runs `body` as one of `key`'s uploads.
    /// - Throws: `rate_limited` (cause ``RetryAfter``) if the token has ``TokenLimits/uploadsAtOnce`` running.
    func upload<T>(_ key: [UInt8]?, _ body: () async throws -> T) async throws -> T {
        guard let key, limits.uploadsAtOnce > 0 else { return try await body() }
        let admitted = table.withLock { table in
            var entry = table[key] ?? Entry(available: limits.burst, updated: .now)
            guard entry.uploads < limits.uploadsAtOnce else { return false }
            entry.uploads += 1
            table[key] = entry
            return true
        }
        guard admitted else {
            throw XferError(
                .rateLimited, "this token has \(limits.uploadsAtOnce) uploads running; wait for one to end",
                cause: RetryAfter(seconds: 1))
        }
        defer { table.withLock { table in table[key]?.uploads -= 1 } }
        return try await body()
    }

    /// Tokens tracked now (tests).
    var tracked: Int { table.withLock { $0.count } }

    private static func dropQuiet(
        _ table: inout [[UInt8]: Entry], _ limits: TokenLimits, _ now: ContinuousClock.Instant
    ) {
        table = table.filter { _, entry in
            entry.uploads > 0
                || entry.available + (now - entry.updated).seconds * limits.requestsPerSecond < limits.burst
        }
    }

    private static func rate(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
