import Foundation
import XferCore
import XferProtocol

/// Verification: each store checked against itself and against the others, the checks of one
/// manifest, record or account decided apart from the reading.
extension Maintenance {
    /// Checks everything the stores promise of each other:
    /// - every stored chunk decodes to bytes whose SHA-256 is its id;
    /// - every committed manifest decodes, matches its recorded digest, and each chunk it
    ///   references is held by its account and stored intact;
    /// - each account's reference counts equal the committed versions that use the chunk, and
    ///   its recorded use equals the bytes it holds.
    /// - Parameter progress: Called now and then with chunks checked so far.
    public func verify(progress: @Sendable (Int) -> Void = { _ in }) async throws -> ServerVerifyReport {
        let start = ContinuousClock.now
        var report = ServerVerifyReport()
        let (intact, damaged) = try await verifyChunks(&report, progress: progress)
        let references = try await verifyManifests(&report, intact: intact, damaged: damaged)
        try await verifyRecords(&report, references: references)
        for account in try await metadata.accounts() {
            for problem in Self.usageProblems(account) { report.record(problem: problem) }
        }
        report.milliseconds = Int64((ContinuousClock.now - start).seconds * 1000)
        return report
    }

    /// Reads every stored chunk and checks its SHA-256.
    /// - Returns: The intact chunks and the damaged ones.
    func verifyChunks(_ report: inout ServerVerifyReport, progress: @Sendable (Int) -> Void) async throws
        -> (intact: Set<ChunkID>, damaged: Set<ChunkID>)
    {
        var intact: Set<ChunkID> = []
        var damaged: Set<ChunkID> = []
        let chunks = chunks
        for shard in UInt8.min...UInt8.max {
            // As many reads in flight as a download keeps (one at a time would pay a round
            // trip per chunk on an object store).
            let results = Locked<[(id: ChunkID, bytes: Result<Int, XferError>)]>([])
            try await concurrentForEach(try await chunks.list(shard: shard), width: chunks.readAhead) { file in
                let bytes: Result<Int, XferError>
                do {
                    bytes = .success(try await chunks.verify(file.id))
                } catch let error as XferError {
                    bytes = .failure(error)
                }
                results.withLock { $0.append((file.id, bytes)) }
            }
            for (id, bytes) in results.value {
                switch bytes {
                case .success(let count):
                    report.bytesChecked += Int64(count)
                    intact.insert(id)
                case .failure(let error):
                    report.record(problem: "chunk \(id.hex): \(error.message)")
                    damaged.insert(id)
                }
                report.chunksChecked += 1
            }
            progress(report.chunksChecked)
        }
        return (intact, damaged)
    }

    /// Checks every committed manifest (``manifestCheck(_:intact:damaged:)``).
    /// - Returns: The references each account's committed versions make, counted per distinct
    ///   chunk per version.
    func verifyManifests(_ report: inout ServerVerifyReport, intact: Set<ChunkID>, damaged: Set<ChunkID>)
        async throws -> [Int64: [ChunkID: Int64]]
    {
        var references: [Int64: [ChunkID: Int64]] = [:]
        var cursor: StoredVersionKey? = nil
        while true {
            let page = try await metadata.storedManifests(after: cursor, limit: 500)
            guard let last = page.last else { break }
            cursor = last.key
            for stored in page {
                report.versionsChecked += 1
                let check = try Self.manifestCheck(stored, intact: intact, damaged: damaged)
                for problem in check.problems { report.record(problem: problem) }
                for id in check.uses { references[stored.account, default: [:]][id, default: 0] += 1 }
            }
        }
        return references
    }

    /// Checks every account's chunk records against the `references` its committed versions
    /// make: each counts them, and each chunk referenced is held.
    func verifyRecords(_ report: inout ServerVerifyReport, references: [Int64: [ChunkID: Int64]]) async throws {
        var record: ChunkRecordKey? = nil
        var seen: [Int64: Set<ChunkID>] = [:]
        while true {
            let page = try await metadata.chunkRecords(after: record, limit: 2000)
            guard let last = page.last else { break }
            record = last.key
            for row in page {
                report.recordsChecked += 1
                seen[row.account, default: []].insert(row.id)
                if let problem = Self.recordProblem(row, expected: references[row.account]?[row.id] ?? 0) {
                    report.record(problem: problem)
                }
            }
        }
        for (account, ids) in references {
            for id in ids.keys where seen[account]?.contains(id) != true {
                report.record(
                    problem: "account \(account): chunk \(id.hex) is used by a committed version but not held")
            }
        }
    }

    /// What is wrong with one stored manifest: a digest it does not match, no decoding, chunks
    /// not stored intact (`damaged` ones corrupt, those in neither set missing).
    /// - Returns: The problems, and the distinct chunks it uses (none if it does not decode).
    /// - Throws: What decoding throws other than an ``XferError``.
    static func manifestCheck(_ stored: StoredManifest, intact: Set<ChunkID>, damaged: Set<ChunkID>) throws
        -> (problems: [String], uses: Set<ChunkID>)
    {
        var problems: [String] = []
        let name = "\(stored.container)/\(stored.path) version \(stored.key.version)"
        if let digest = stored.digest, digest != ChunkID.of(stored.encoded).bytes {
            problems.append("\(name): the manifest does not match its recorded digest")
        }
        let manifest: Manifest
        do {
            manifest = try Manifest(decoding: stored.encoded)
        } catch let error as XferError {
            return (problems + ["\(name): the manifest does not decode: \(error.message)"], [])
        }
        let uses = Set(manifest.allChunks.map(\.id))
        for id in uses where !intact.contains(id) {
            problems.append("\(name): chunk \(id.hex) is \(damaged.contains(id) ? "corrupt" : "missing")")
        }
        return (problems, uses)
    }

    /// A chunk record whose reference count is not `expected`, the committed versions that use it.
    static func recordProblem(_ row: ChunkRecordRow, expected: Int64) -> String? {
        guard row.refs != expected else { return nil }
        return
            "account \(row.account): chunk \(row.id.hex) counts \(row.refs) references, but \(expected) committed versions use it"
    }

    /// An account whose recorded use or version cost differs from what it holds and keeps.
    static func usageProblems(_ account: AccountUsage) -> [String] {
        var problems: [String] = []
        if account.used != account.held {
            problems.append("account \(account.name): records \(account.used) bytes used, but holds \(account.held)")
        }
        if account.versionBytes != account.versionBytesKept {
            problems.append(
                "account \(account.name): records \(account.versionBytes) bytes of version records, but its versions cost \(account.versionBytesKept)"
            )
        }
        return problems
    }
}
