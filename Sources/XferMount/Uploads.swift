import Foundation
import XferClient
import XferCore
import XferProtocol

/// Uploads what a mount's writers closed (``StagedFiles``), oldest first, each as a version
/// based on the one it was edited from, so a stale base becomes a conflict version on the
/// server, never an overwrite. While the server cannot be reached, the records wait on disk
/// and are tried again with backoff; a file open for writing waits until it is closed, and a
/// package changed here until nothing in it has changed for ``quietPeriod``.
final class Uploads: Sendable {
    private let client: DocumentClient
    private let staged: StagedFiles
    private let tree: Locked<MountTree>
    private let invalidate: @Sendable ([MountTree.Invalidation]) -> Void
    /// How long a package changed here rests before its upload (a program saving one writes
    /// several files, each closed in turn).
    static let quietPeriod: Int64 = 2_000_000_000
    /// Whether a document (or anything in a package) is open for writing now.
    private let writing: @Sendable (String) -> Bool
    /// Runs a body while no writer can open the document, if none has it open: `nil` if one has.
    private let whenIdle: @Sendable (String, () -> [MountTree.Invalidation]?) -> [MountTree.Invalidation]?
    private let kicked = Locked(false)
    /// Held by an upload, and by a removal or rename of the same file here.
    let locks = PathLocks()
    init(
        client: DocumentClient, staged: StagedFiles, tree: Locked<MountTree>,
        invalidate: @escaping @Sendable ([MountTree.Invalidation]) -> Void,
        writing: @escaping @Sendable (String) -> Bool,
        whenIdle: @escaping @Sendable (String, () -> [MountTree.Invalidation]?) -> [MountTree.Invalidation]?
    ) {
        self.whenIdle = whenIdle
        self.client = client
        self.staged = staged
        self.tree = tree
        self.invalidate = invalidate
        self.writing = writing
    }

    /// Something new is due.
    func kick() { kicked.withLock { $0 = true } }

    /// Uploads until cancelled.
    func run() async {
        var backoff = Duration.seconds(1)
        while !Task.isCancelled {
            switch await uploadDue() {
            case .offline:
                backoff = min(backoff * 2, .seconds(30))
                await pause(backoff)
            case .resting:
                backoff = .seconds(1)
                await pause(.milliseconds(500))
            case .done:
                backoff = .seconds(1)
                await pause(.seconds(30))
            }
        }
    }

    /// One last round of uploads, for at most `limit` (at unmount), packages without their rest.
    func finish(within limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await self.uploadDue(resting: false) }
            group.addTask { try? await Task.sleep(for: limit) }
            await group.next()
            group.cancelAll()
        }
    }

    /// What is queued, in the order it was done here: an upload or a deletion.
    enum Step {
        case upload(StagedFiles.Record)
        case removal(StagedFiles.Removal)
        case made(StagedFiles.Made)
        case package(StagedFiles.PackageRecord)

        var time: Int64 {
            switch self {
            case .upload(let record): record.closedNs
            case .removal(let removal): removal.queuedNs
            case .made(let made): made.queuedNs
            case .package(let record): record.changedNs
            }
        }

        var path: String {
            switch self {
            case .upload(let record): record.path
            case .removal(let removal): removal.path
            case .made(let made): made.path
            case .package(let record): record.path
            }
        }
    }

    /// What a round of uploads left: nothing, packages resting, or everything (offline).
    enum Outcome {
        case done, resting, offline
    }

    /// Every step queued, oldest first: a deletion queued offline and a file written at the same
    /// name after it reach the server in that order.
    func queued() -> [Step] {
        (staged.due().map(Step.upload) + staged.removals().map(Step.removal) + staged.made().map(Step.made)
            + staged.packageRecords().map(Step.package))
            .sorted { $0.time < $1.time }
    }

    /// Takes every queued step whose file is not open for writing (and, with `resting`, every
    /// package that has rested).
    private func uploadDue(resting: Bool = true) async -> Outcome {
        var outcome = Outcome.done
        for step in queued() {
            do {
                switch step {
                case .upload(let record):
                    guard !writing(record.path) else { continue }
                    try await locks.exclusive([record.path]) {
                        // As it is now: renamed or removed meanwhile, there is nothing to upload.
                        guard let record = staged.record(record.path) else { return }
                        guard staged.exists(record.path) else { return staged.dropRecord(record.path) }
                        try await upload(record)
                    }
                case .removal(let removal):
                    try await remove(removal)
                case .made(let made):
                    try await settle(made)
                case .package(let record):
                    let rested = Syscall.wallClockNanoseconds() - record.changedNs >= Self.quietPeriod || !resting
                    guard rested, !writing(record.path) else {
                        outcome = .resting
                        continue
                    }
                    try await locks.exclusive([record.path]) {
                        guard let record = staged.packageRecord(record.path) else { return }
                        try await upload(record)
                    }
                }
            } catch let error as XferError where error.code == .unavailable {
                return .offline
            } catch {
                FileHandle.standardError.write(Data("xfer mount: \(step.path) stays queued: \(error)\n".utf8))
            }
        }
        return outcome
    }

    /// Deletes what was removed here while the server could not be reached, if the server still
    /// has the version the mount showed; if another device changed it meanwhile, it is kept
    /// and shows again.
    private func remove(_ removal: StagedFiles.Removal) async throws {
        do {
            _ = try await client.delete(removal.path, baseVersion: removal.base)
        } catch let error as XferError where error.code == .conflict {
            FileHandle.standardError.write(
                Data(
                    "xfer mount: \(removal.path) changed on the server after it was removed here; it was kept\n".utf8))
            if let current = try? await client.stat(removal.path) { invalidate(tree.withLock { $0.apply(current) }) }
        } catch let error as XferError where error.code == .notFound {
            // Deleted already: what was asked for.
        }
        staged.dropRemoval(removal.path)
    }

    /// Pushes a directory or symlink made here, or a directory's new mode (built at a scratch
    /// path beside the staging files), as a document of its own.
    /// - Returns: The version it made.
    func send(_ made: StagedFiles.Made) async throws -> DocumentInfo {
        let scratch = staged.directory + "/make-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        if let target = made.target {
            guard Glibc.symlink(target, scratch) == 0 else {
                throw XferError(.io, "cannot make a symlink", cause: SystemErrno(errno))
            }
        } else {
            try FileManager.default.createDirectory(
                atPath: scratch, withIntermediateDirectories: false,
                attributes: [.posixPermissions: Int(made.mode & 0o7777 | 0o700)])
        }
        var options = PushOptions()
        options.basedOn = made.base
        let report = try await client.push(
            scratch, as: made.path, options: options, directoryItself: made.target == nil)
        return try await client.stat(made.path, version: report.version)
    }

    /// Sends `made` now, or, while the server cannot be reached, queues it durably for later.
    func sendOrQueue(_ made: StagedFiles.Made) async throws {
        do {
            try await settle(made)
        } catch let error as XferError where error.code == .unavailable {
            try staged.queueMade(made)
            kick()
        }
    }

    /// Sends a directory or symlink made here, and shows the version it made.
    func settle(_ made: StagedFiles.Made) async throws {
        let ours = try await send(made)
        let current = (try? await client.stat(made.path)) ?? ours
        staged.dropMade(made.path)
        invalidate(tree.withLock { $0.settle(ours, current: current) })
    }

    private func upload(_ record: StagedFiles.Record) async throws {
        let data = staged.dataPath(record.path)
        let before = Self.stamp(data)
        var options = PushOptions()
        options.basedOn = record.base
        let report = try await client.push(data, as: record.path, options: options)
        if MountFileSystem.debugging {
            FileHandle.standardError.write(
                Data(
                    "xfer mount: uploaded \(record.path) v\(report.version) based on \(record.base.map(String.init) ?? "nothing")\n"
                        .utf8))
        }
        let ours = try await client.stat(record.path, version: report.version)
        let current = (try? await client.stat(record.path)) ?? ours
        // Settled only while no writer can open it: the staging file goes and the node shows the
        // version at once, so no open meets one without the other.
        let settled = whenIdle(record.path) {
            guard Self.stamp(data) == before else { return nil }
            staged.drop(record.path)
            return tree.withLock { $0.settle(ours, current: current) }
        }
        if MountFileSystem.debugging {
            FileHandle.standardError.write(
                Data("xfer mount: \(record.path) \(settled == nil ? "not settled" : "settled")\n".utf8))
        }
        if let settled { return invalidate(settled) }
        // Open or written again meanwhile: what comes next is based on this version.
        tree.withLock { $0.rebase(record.path, on: report.version) }
        if staged.record(record.path) != nil { try staged.due(record.path, base: report.version) }
    }

    /// Pushes a package changed here (its staging directory) as its next version, and settles
    /// it if nothing changed in it meanwhile; else the next upload is based on this one.
    private func upload(_ record: StagedFiles.PackageRecord) async throws {
        var options = PushOptions()
        options.basedOn = record.base
        let report = try await client.push(staged.packageDirectory(record.path), as: record.path, options: options)
        let ours = try await client.stat(record.path, version: report.version)
        let current = (try? await client.stat(record.path)) ?? ours
        let settled = whenIdle(record.path) {
            guard staged.packageRecord(record.path)?.changedNs == record.changedNs else { return nil }
            staged.dropPackage(record.path)
            return tree.withLock { $0.settlePackage(ours, current: current) }
        }
        if let settled { return invalidate(settled) }
        tree.withLock { $0.rebasePackage(record.path, on: report.version) }
        try staged.packageChanged(record.path, base: report.version, touched: [])
    }

    /// Sleeps up to `limit`, or until kicked.
    private func pause(_ limit: Duration) async {
        let until = ContinuousClock.now + limit
        while ContinuousClock.now < until, !Task.isCancelled {
            if kicked.withLock({ kicked in
                defer { kicked = false }
                return kicked
            }) {
                return
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// Size and modification time of a file, to see whether it changed.
    static func stamp(_ path: String) -> [Int64] {
        var info = stat()
        guard stat(path, &info) == 0 else { return [] }
        return [Int64(info.st_size), Int64(info.st_mtim.tv_sec), Int64(info.st_mtim.tv_nsec)]
    }
}
