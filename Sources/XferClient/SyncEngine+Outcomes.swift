import XferCore
import XferProtocol

// What a pass makes of each document's outcome and of what it holds back: counted in the
// pass's summary and said once on ``SyncEngine/events``.
extension SyncEngine {
    /// Runs one document's step; a failure other than the server's absence is reported and
    /// skipped (`nil`), so one bad document does not stop the others.
    /// A document the local tree moved under (gone, or written while it was read) is left for
    /// the next pass (`retried`), with nothing committed for it.
    func attempt<T: Sendable>(
        _ summary: inout SyncSummary, _ path: DocumentPath,
        _ body: @Sendable () async throws -> T
    ) async throws -> T? {
        do {
            return try await body()
        } catch {
            try settle(error, &summary, path)
            return nil
        }
    }

    /// What a pass holds back and why, each said once: deletions over the mass-deletion rule,
    /// deletions from a view that may lack a document (names that do not open) or that no
    /// device sealed, and documents the server shows older than it showed this device.
    func reportHeld(_ pass: SyncDirectory.PassPlan, _ summary: inout SyncSummary) throws {
        // Documents, as the mass-deletion rule counts them (a directory's removal loses nothing).
        summary.deletionsHeld = pass.held.count { !$0.isDirectory }
        if pass.heldCounts.local + pass.heldCounts.remote > 0 {
            let held = pass.heldCounts
            continuation.yield(.deletionsHeld(local: held.local, remote: held.remote, total: held.total))
        }
        if pass.unopened > 0 {
            continuation.yield(.namesUnopened(count: pass.unopened, deletionsHeld: pass.heldForNames.count))
        }
        for plan in pass.plans where plan.action == .rolledBack {
            summary.rolledBack += 1
            continuation.yield(
                .rolledBack(plan.path, server: plan.remote?.version ?? 0, seen: try directory.seen(plan.path) ?? 0))
        }
        summary.unverified += pass.unopened
        for path in pass.heldUnsealed.sorted(by: { $0.value < $1.value }) {
            summary.failed += 1
            summary.unverified += 1
            continuation.yield(
                .failed(
                    path,
                    XferError(
                        .invalidManifest,
                        "deleted on the server, but no device holding the container's key sealed that deletion (of the version here): this copy was kept; remove it by hand if the deletion was meant"
                    )))
        }
    }

    /// The local names a pass skips, each said as a failure: names that are not valid
    /// document paths, and paths that cannot be read (nothing under them is uploaded,
    /// downloaded or deleted).
    func reportSkipped(_ pass: SyncDirectory.PassPlan, _ summary: inout SyncSummary) {
        for name in pass.invalid {
            summary.failed += 1
            continuation.yield(
                .failed(
                    nil,
                    XferError(
                        .invalidPath,
                        "\(name) is not a valid document name (see docs/PROTOCOL.md, Names); it is not synced")))
        }
        for (name, why) in pass.unreadable.sorted(by: { $0.key < $1.key }) {
            summary.failed += 1
            continuation.yield(
                .failed(
                    nil,
                    XferError(
                        .io,
                        "cannot read \(directory.directory)/\(name) (\(why)); nothing under it is uploaded, downloaded or deleted until it can be read"
                    )))
        }
    }

    /// What one document's failure means for the pass: the server's absence, a refused token or
    /// cancellation stops it (rethrown); a local change is retried next pass; the rest is reported.
    func settle(_ error: any Error, _ summary: inout SyncSummary, _ path: DocumentPath) throws {
        if let error = error as? XferError, error.stopsEveryDocument {
            throw error
        } else if let error = error as? XferError, error.isLocalChange || error.cause is ChangedSinceListed {
            summary.retried += 1
            continuation.yield(.retrying(path, error.message))
        } else {
            summary.failed += 1
            if let error = error as? XferError, [.corruptChunk, .invalidManifest, .rolledBack].contains(error.code) {
                // What the server sent is not what a device wrote: the run's exit says so.
                if error.code == .rolledBack { summary.rolledBack += 1 } else { summary.unverified += 1 }
            }
            continuation.yield(.failed(path, error as? XferError ?? XferError(.io, "\(error)")))
        }
    }
}
