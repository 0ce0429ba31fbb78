import Foundation
import XferCore

/// When and how soon the client sends a request again (the one rule: every request of
/// ``ServerConnection`` goes through it). A request is sent again, up to ``retries`` times:
///
/// - after a 429 (`rate_limited`: the server's per-token limits) or a 503 (`unavailable`: the
///   server is busy or stopping), whatever the request: the server did nothing for it;
/// - after the server could not be reached (the connection refused or not made in time),
///   whatever the request: nothing was sent;
/// - after a broken connection or a gateway's error (502, 504: a proxy in front lost the
///   server), only a request that may be repeated without effect
///   (``ServerConnection/isIdempotent(method:route:)``: reads, chunk uploads, which name their
///   content), never a commit, a deletion or an admin request, which might have been done.
///
/// The server's own errors (500 `internal` or `io`, 507 `storage_full` or `quota_exceeded`) are
/// answers, not hiccups: they are the caller's at once.
///
/// The wait is the server's `Retry-After` when it gives one (at most ``maximumDelay``), else
/// exponential backoff with full jitter: a random time up to `baseDelay · 2^(n-1)`, capped, so
/// many clients turned away together do not come back together.
public struct RetryPolicy: Sendable, Hashable {
    /// Times a request is sent again after its first try.
    public var retries: Int
    public var baseDelay: Duration
    public var maximumDelay: Duration

    /// Four retries, from 250 ms, at most 30 s apart.
    public init(retries: Int = 4, baseDelay: Duration = .milliseconds(250), maximumDelay: Duration = .seconds(30)) {
        self.retries = max(0, retries)
        self.baseDelay = baseDelay
        self.maximumDelay = maximumDelay
    }

    /// No retry: every failure is the caller's at once.
    public static let none = RetryPolicy(retries: 0)

    /// How long to wait before retry number `attempt` (1 for the first).
    /// - Parameter retryAfter: What the server's `Retry-After` asked, if anything.
    public func delay(attempt: Int, retryAfter: Duration?, random: Double = Double.random(in: 0...1)) -> Duration {
        if let retryAfter { return min(max(retryAfter, .zero), maximumDelay) }
        let ceiling = min(maximumDelay, baseDelay * (1 << min(max(attempt - 1, 0), 20)))
        return ceiling * max(0, min(random, 1))
    }

    /// Whether a failed try is worth another.
    /// - Parameters:
    ///   - status: The answer's status, or `nil` when there was no answer.
    ///   - sent: Whether the request may have reached the server (false: not connected).
    ///   - idempotent: Whether sending it twice does what sending it once does.
    public static func isTransient(status: Int?, sent: Bool, idempotent: Bool) -> Bool {
        switch status {
        case 429?, 503?: return true
        case 502?, 504?: return idempotent
        case nil: return !sent || idempotent
        default: return false
        }
    }

    /// The wait a `Retry-After` header asks: whole seconds (an HTTP date is not used by xfer's
    /// server and is taken as no answer).
    public static func retryAfter(_ header: String?) -> Duration? {
        guard let header, let seconds = Int(header.trimmingCharacters(in: .whitespaces)), seconds >= 0 else {
            return nil
        }
        return .seconds(seconds)
    }
}
