import Foundation
import XferCore
import XferProtocol

// The metadata domain's rules, written once: both metadata backends read and write rows in
// their own SQL and call these for every decision (docs/ARCHITECTURE.md, "where a rule lives").
// `DomainRulesTests` tests them without a database.

/// The account's quota in bytes: what a new holding costs, and what giving one back leaves.
enum QuotaRules {
    /// The use after charging `adding` bytes to an account that uses `used` of `quota`, with
    /// `pending` more already reserved by uploads in flight (``QuotaGate``).
    /// - Throws: `quota_exceeded`, saying what is used, changing nothing.
    static func charge(adding: Int64, used: Int64, quota: Int64, pending: Int64 = 0) throws -> Int64 {
        guard adding >= 0, used + pending + adding <= quota else {
            let inFlight = pending > 0 ? ", \(ByteCount(pending).description) being uploaded" : ""
            throw XferError(
                .quotaExceeded,
                "storing \(ByteCount(adding).description) more would take the account past its quota of \(ByteCount(quota).description) (\(ByteCount(used).description) used\(inFlight)); nothing was stored"
            )
        }
        return used + adding
    }

    /// What keeping one committed version (or deletion) costs its account besides its chunks:
    /// its row, and the manifest as stored. Every version costs something, so an account cannot
    /// keep documents without end in rows alone (empty files, copies sharing chunks, a manifest
    /// naming one chunk a million times): the quota bounds them all.
    static let versionRecordBytes: Int64 = 256

    /// The bytes a version costs the quota: ``versionRecordBytes`` and its stored manifest's
    /// `manifestBytes` (none for a deletion).
    static func versionCost(manifestBytes: Int) -> Int64 {
        versionRecordBytes + Int64(max(0, manifestBytes))
    }
}

/// Deletion marks, the guard between gc deleting a stored chunk no one holds and an upload of
/// the same chunk: a chunk is marked when its deletion starts, the mark's `finished_at` is set
/// when the stored copy is gone, and marks are forgotten once no upload can be that old.
enum DeletionRules {
    /// Whether a mark keeps an upload that started at `uploadStartedAt` (the store's clock, ns)
    /// from recording the chunk: the deletion is still running (`finishedAt` is nil), or it
    /// finished after the upload began, so the bytes the upload stored may be the ones deleted.
    /// The client then finds the chunk missing at commit and sends it again.
    static func refuses(finishedAt: Int64?, uploadStartedAt: Int64) -> Bool {
        guard let finishedAt else { return true }
        return finishedAt >= uploadStartedAt
    }

    /// The oldest a finished mark may be and still matter: requests have deadlines well under
    /// an hour, so no upload still running began before this (ns before `now`).
    static func forgetBefore(now: Int64, grace: Int64) -> Int64 {
        now - max(grace, 3600) * 1_000_000_000
    }
}

/// What one account may hold besides its quota's bytes, the same for every backend.
enum AccountLimits {
    /// Live (unexpired) tokens an account may hold at once: each device, script and WebDAV
    /// client its own, and no table (nor per-token rate) grown without end by a loop.
    static let maximumTokens = 100

    /// Refuses a new container past the policy's count.
    static func checkNewContainer(existing: Int64, policy: StorePolicy) throws {
        guard existing < Int64(policy.maximumContainers) else {
            throw XferError(
                .quotaExceeded, "the account already has \(existing) containers, the most it may; use an existing one")
        }
    }

    /// Refuses a write that leaves the account's metadata (``StorePolicy/accountMetadataBytes``)
    /// past its budget; the write's transaction is then rolled back.
    static func checkMetadata(bytes: Int64, policy: StorePolicy) throws {
        guard bytes <= Int64(policy.accountMetadataBytes) else {
            throw XferError(
                .quotaExceeded,
                "the account keeps \(ByteCount(bytes)) of key-value entries, WebDAV properties and lock owners, "
                    + "more than the \(ByteCount(Int64(policy.accountMetadataBytes))) it may; remove some first; nothing was changed"
            )
        }
    }

    /// Refuses another pending version past the policy's count.
    static func checkNewPending(existing: Int64, policy: StorePolicy) throws {
        guard existing < Int64(policy.maximumPendingVersions) else {
            throw XferError(
                .quotaExceeded,
                "the account already has \(existing) versions announced and not committed, the most it may; commit them, or wait for them to expire"
            )
        }
    }
}

/// What a commit requires of the chunks its manifest references, and what it does to the
/// document's current version: the same for every backend.
enum CommitRules {
    /// What committing a version does to the document's current version.
    enum Outcome: Equatable {
        /// Edited from the current version (or the same content): the current one is superseded.
        case replaces
        /// A stale base and the later edit: this becomes current, the other a conflict version.
        case winsConflict
        /// A stale base and the earlier edit: this is kept as a conflict version.
        case keptAsConflict
    }

    /// The conflict rule (docs/PROTOCOL.md, "Conflicts"): a version based on the current one,
    /// or with its very content, replaces it; one from a stale base is a conflict, and of the
    /// two the later edit (by modification time; a tie goes to the newcomer) stays current.
    static func outcome(
        current: Int64, currentDigest: Data?, currentMtime: Int64, base: Int64?, digest: Data, mtime: Int64
    ) -> Outcome {
        if current == base || currentDigest == digest { return .replaces }
        return mtime >= currentMtime ? .winsConflict : .keptAsConflict
    }

    /// The versions a resolve settles: every contender of `keep` (the current version and the
    /// conflict versions) but `keep` itself, which must be the current version or a conflict one.
    /// - Throws: `bad_request` for any other version.
    static func contenders(resolving request: ResolveRequest, keep: DocumentInfo, current: Int64?) throws -> [Int64] {
        guard keep.state == .current || keep.state == .conflict else {
            throw XferError(
                .badRequest,
                "\(request.path) version \(request.keep) is \(keep.state.rawValue); keep the current version or a conflict version (see `xfer versions`)"
            )
        }
        var others = keep.conflicts ?? []
        if let current, current != request.keep { others.append(current) }
        return others.filter { $0 != request.keep }
    }

    /// The distinct chunks of a manifest with their declared lengths.
    /// - Throws: `invalid_manifest` if one id is declared with two lengths (one content has one length).
    static func distinctChunks(_ manifest: Manifest) throws -> [ChunkID: Int] {
        var lengths: [ChunkID: Int] = [:]
        let entries = manifest.entries
        for index in entries.indices {
            for chunk in entries.chunks(at: index) {
                if let known = lengths.updateValue(chunk.length, forKey: chunk.id), known != chunk.length {
                    throw XferError(
                        .invalidManifest,
                        "the manifest declares chunk \(chunk.id) as both \(known) and \(chunk.length) bytes")
                }
            }
        }
        return lengths
    }

    /// The chunks the account does not hold, given the lengths of those it does.
    /// - Parameter compareLengths: Whether a held chunk's length must be the one declared
    ///   (not in an end-to-end encrypted container, whose manifests the server cannot read).
    /// - Throws: `invalid_manifest` if a held chunk's length differs from the one declared
    ///   (a file would be written at the wrong size).
    static func missing(_ declared: [ChunkID: Int], held: [ChunkID: Int64], compareLengths: Bool = true) throws
        -> [ChunkID]
    {
        var missing: [ChunkID] = []
        for (id, length) in declared {
            guard let stored = held[id] else {
                missing.append(id)
                continue
            }
            guard stored == Int64(length) || !compareLengths else {
                throw XferError(
                    .invalidManifest, "the manifest declares chunk \(id) as \(length) bytes, but it holds \(stored)")
            }
        }
        return missing.sorted()
    }
}

/// The key-value store's rules, the same for every backend.
enum KeyValueRules {
    /// A key in canonical form (NFC), or why it is refused.
    static func check(_ key: String) throws -> String {
        let key = key.precomposedStringWithCanonicalMapping
        guard !key.isEmpty, key.utf8.count <= ProtocolLimits.maximumKeyBytes else {
            throw XferError(
                .tooLarge,
                "a key must be 1 to \(ProtocolLimits.maximumKeyBytes) bytes of UTF-8; \"\(key.prefix(80))\" is \(key.utf8.count)"
            )
        }
        guard !key.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw XferError(.badRequest, "a key must not contain control characters")
        }
        return key
    }

    /// A write's canonical key and JSON text (`nil` for a delete), or why it is refused.
    static func check(_ request: KeyValueWrite) throws -> (key: String, text: String?) {
        let key = try check(request.key)
        try FieldLimit.check(request.device, "device", maximumBytes: ProtocolLimits.maximumDeviceBytes)
        return (key, request.value?.jsonText)
    }

    /// Decides a checked write (``check(_:)``'s key and text) against the entry stored under its
    /// key, given the other live keys' count and bytes: `nil` when it applies, or the stored
    /// entry when that one wins (last writer wins: the later timestamp, then the greater device).
    /// - Throws: `quota_exceeded` past the container's limits; `not_found` deleting a key that
    ///   holds nothing.
    static func decide(
        _ request: KeyValueWrite, key: String, text: String?, existing: KeyValueEntry?,
        usage: (keys: Int, bytes: Int), policy: StorePolicy, container: ContainerName
    ) throws -> KeyValueEntry? {
        if let existing, !existing.isOlder(thanTimestamp: request.timestampNs, device: request.device) {
            return existing
        }
        if let text {
            try checkLimits(keys: usage.keys, bytes: usage.bytes, key: key, text: text, policy: policy)
        } else if existing?.value == nil {
            throw XferError(.notFound, "no key \"\(key)\" in container \(container)")
        }
        return nil
    }

    /// Refuses a write that would take the container past its limits, given the other live
    /// keys' count and bytes.
    static func checkLimits(keys: Int, bytes: Int, key: String, text: String, policy: StorePolicy) throws {
        let adding = key.utf8.count + text.utf8.count
        guard keys + 1 <= policy.keyValueMaximumKeys else {
            throw XferError(
                .quotaExceeded,
                "the container's key-value store already holds \(keys) keys, the most it may; remove one first")
        }
        guard bytes + adding <= policy.keyValueMaximumBytes else {
            throw XferError(
                .quotaExceeded,
                "storing \(adding) bytes for \"\(key)\" would take the key-value store past its \(ByteCount(Int64(policy.keyValueMaximumBytes)).description) (\(bytes) bytes used)"
            )
        }
    }
}
