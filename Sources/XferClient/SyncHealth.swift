import Foundation
import XferCore

/// How a synced folder's daemon is doing, for `xfer status`: kept in the folder's sync state
/// by the engine after every pass (one small write), read by anyone.
public struct SyncHealth: Codable, Sendable, Hashable {
    /// What the engine was doing when it last wrote.
    public enum Phase: String, Codable, Sendable {
        /// Passes succeed; waiting for the next change.
        case idle
        /// The server cannot be reached; local changes wait, passes are retried with backoff.
        case offline
        /// The last pass failed for another reason; retried with backoff.
        case failing
        /// The folder's root is gone or unmounted; nothing is decided until it is back.
        case folderMissing = "folder_missing"
        /// The engine stopped (`--once` finished, or the daemon was stopped).
        case stopped
    }

    /// Whether an `xfer sync` holds the folder now (filled in when read, from its lock).
    public var running = false
    /// The process that last wrote (or holds the folder now).
    public var pid: Int32?
    /// Whether that process follows changes (`--watch`) rather than making one pass.
    public var watching = false
    /// What it was doing.
    public var phase: Phase = .idle
    /// When it started, seconds since 1970.
    public var startedAt: Double?
    /// When the last pass ended, seconds since 1970, and what it did.
    public var lastPassAt: Double?
    public var lastPass: SyncSummary?
    /// The last error that failed a pass, and when (cleared by nothing: compare with `lastPassAt`).
    public var lastError: String?
    public var lastErrorAt: Double?
    /// Passes that failed in a row (0 once one succeeds).
    public var failuresInARow = 0

    public init() {}
}

extension SyncState {
    static let healthKey = "health"

    /// The health last written for this folder, with `running` and `pid` from its lock.
    public func health() throws -> SyncHealth? {
        var health = try meta(Self.healthKey).flatMap {
            try? JSONDecoder().decode(SyncHealth.self, from: Data($0.utf8))
        }
        if let holder = DirectoryLock.holder(path: database.path + ".lock") {
            if health == nil { health = SyncHealth() }
            health?.running = true
            health?.pid = holder
        } else {
            health?.running = false
        }
        return health
    }

    /// Records `health` (best effort: a daemon does not stop because it could not say how it is).
    func record(_ health: SyncHealth) {
        guard let data = try? JSONEncoder().encode(health) else { return }
        try? setMeta(Self.healthKey, String(decoding: data, as: UTF8.self))
    }
}
