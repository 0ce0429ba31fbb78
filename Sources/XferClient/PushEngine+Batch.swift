import Foundation
import XferCore
import XferProtocol

/// One document of a batch push.
public struct PushItem: Sendable {
    /// The local file, symlink or package.
    public var path: String
    /// The document's path in the container.
    public var name: DocumentPath
    /// Its root's client state.
    public var state: ClientState
    /// A directory at `path` is the directory alone (a `directory` document), not a package.
    public var directoryItself: Bool

    /// Creates an item.
    public init(path: String, name: DocumentPath, state: ClientState, directoryItself: Bool = false) {
        self.path = path
        self.name = name
        self.state = state
        self.directoryItself = directoryItself
    }
}

extension PushEngine {
    /// Pushes many small documents together: one hashing run over all their files to read, one
    /// question about the chunks the server lacks, uploads in shared bodies, and a batch commit
    /// (`POST …/commits`: no announce, one server transaction per batch), then one client-state
    /// transaction. What a sync pass does with small documents, where a round trip per step
    /// would cost far more than their bytes.
    ///
    /// Each document succeeds or fails on its own, with the single push's rules: a file written
    /// while it was read is not committed, a stale base is kept as a conflict, an unchanged
    /// document makes no version (`committed` false). `force` is not honoured here.
    /// - Returns: One result per item, in order.
    /// - Throws: Only what stops every item: `unavailable`, `unauthorized`, `cancelled`,
    ///   `encrypted_container`, or a client state that cannot be written.
    public func pushMany(_ items: [PushItem], progress: @escaping @Sendable (TransferProgress) -> Void = { _ in }) async throws
        -> [Result<PushReport, any Error>] {
        try await ClientThreads.run {
            let started = ContinuousClock.now
            let connection = remote.connection
            // Chunks go up before the commit: never plain ones into an end-to-end encrypted
            // container (asked of the server, and of this device's keys, so a server cannot talk
            // it into sending plain data where it holds a key). An encrypted one's documents are
            // sealed here, each to the version it is to become, which a server must enforce.
            let endToEnd = remote.endToEnd
            if !items.isEmpty && endToEnd == nil {
                let refusal = XferError(.encryptedContainer, "container \(remote.container) is end-to-end encrypted, and this push was not given its key (Remote.unlocked()); nothing was sent")
                do {
                    if try await remote.unlocked().endToEnd != nil { throw refusal }
                } catch let error as XferError where error.code == .unauthorized {
                    throw refusal  // encrypted, and this device holds no key
                }
            }
            let features = await connection.features()
            var results = [Result<PushReport, any Error>?](repeating: nil, count: items.count)
            /// Pushes these items one at a time (the single push's rules) and answers for all.
            func alone(_ indexes: [Int]) async throws -> [Result<PushReport, any Error>] {
                for index in indexes {
                    let item = items[index]
                    results[index] = try await documentOutcome { try await push(item.path, as: item.name, state: item.state, directoryItself: item.directoryItself, progress: progress) }
                }
                return results.map { $0 ?? .failure(XferError(.internal, "no outcome")) }
            }
            if endToEnd != nil && !features.contains(.batchCommitVersions) { return try await alone(Array(items.indices)) }
            // The path the server keeps each document at (sealed, end to end).
            var serverNames: [DocumentPath?] = []
            for (index, item) in items.enumerated() {
                do {
                    serverNames.append(try remote.serverPath(item.name))
                } catch {
                    serverNames.append(nil)
                    results[index] = .failure(error)
                }
            }

            /// A document to commit: what was found locally and what the state holds.
            struct Prepared {
                var item: Int
                var snapshot: LocalSnapshot
                var chunkLists: FileChunkLists
                var synced: SyncedDocument?
                /// What the server is taken to hold of the document: `synced`, unless the server
                /// said it lacks that version (then nothing: the document goes as if new there).
                var basis: SyncedDocument?
                var hashed: Set<Int> = []
                var manifest: Manifest? = nil
                var encoded: [UInt8] = []
                /// What the server is to keep: `encoded`, or end to end its carrier's encoding.
                var sent: [UInt8] = []
                /// End to end, the version its manifest is sealed to, and its pieces' bytes.
                var version: Int64? = nil
                var pieceBytes = 0
            }
            var prepared: [Prepared] = []
            var unchangedHere: [Prepared] = []  // unchanged since they synced here, if the server holds them
            for (index, item) in items.enumerated() where serverNames[index] != nil {
                do {
                    let snapshot = try LocalSnapshot(path: item.path, state: item.state, exclude: options.exclude,
                                                     directoryItself: item.directoryItself)
                    let synced = try item.state.document(server: connection.server, container: remote.container, path: item.name)
                    let chunkLists = try snapshot.knownChunks(item.state)
                    let document = Prepared(item: index, snapshot: snapshot, chunkLists: chunkLists, synced: synced, basis: synced)
                    if let synced, snapshot.isUnchanged(since: synced, chunks: chunkLists) {
                        unchangedHere.append(document)
                    } else {
                        prepared.append(document)
                    }
                } catch {
                    results[index] = .failure(error)
                }
            }

            // Nothing to send for those, once the server confirms it holds their versions (the
            // single push's rule); one it lacks goes in full, as if new there.
            for (document, answer) in zip(unchangedHere, try await remote.holds(unchangedHere.map { ($0.synced!, serverNames[$0.item]!) })) {
                guard case .success(let held) = answer else {
                    if case .failure(let error) = answer { results[document.item] = .failure(error) }
                    continue
                }
                if held {
                    let item = items[document.item], synced = document.synced!
                    var report = Self.report(item.name, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
                    report.committed = false
                    results[document.item] = .success(report)
                } else {
                    var alone = document
                    alone.basis = nil
                    prepared.append(alone)
                }
            }
            unchangedHere = []

            // Chunks the server surely has (each document's synced version's) are never asked about.
            // By prefix: one taken for them by mistake is sent when the commit misses it (ChunkIDPrefixes).
            var onServer = ChunkIDPrefixes()
            for document in prepared { if let basis = document.basis { onServer.formUnion(chunksOf: basis.manifest) } }
            var queued = ChunkIDPrefixes()
            var initial: [Location] = []
            var where_: [(document: Int, entry: Int)] = []  // the files to read: document and tree entry
            var total: Int64 = 0
            var unchangedBytes: Int64 = 0
            var previous = PreviousChunks()  // changed small files' previous chunks, to send against
            let sendAgainst = features.contains(.chunksAgainst) && remote.codec.sendsAgainst
            for (number, document) in prepared.enumerated() {
                let snapshot = document.snapshot
                total += snapshot.totalSize
                for (entry, chunks) in document.chunkLists.enumerated() {
                    guard let chunks else { continue }
                    unchangedBytes += snapshot.stamps[entry]?.size ?? 0
                    var offset: Int64 = 0
                    for chunk in chunks {
                        if !onServer.contains(chunk.id) && queued.insert(chunk.id) {
                            initial.append(Location(id: chunk.id, file: snapshot.fullPath(at: entry), offset: offset,
                                                    length: chunk.length, owner: number))
                        }
                        offset += Int64(chunk.length)
                    }
                }
                for entry in snapshot.toHash + snapshot.unchanged.filter({ document.chunkLists[$0] == nil }) {
                    where_.append((number, entry))
                    if sendAgainst {
                        previous.add(fullPath: snapshot.fullPath(at: entry), relativePath: snapshot.tree.relativePath(at: entry),
                                     previous: document.synced?.manifest)
                    }
                }
            }
            let counters = Locked(Counters(bytesHashed: unchangedBytes))
            let hashed: ChunkLists
            let snapshots = prepared.map(\.snapshot)
            let changedWhileRead = Locked<[Int: any Error]>([:])  // by document (number in prepared)
            let reading = FilesToRead(owners: where_.map(\.document), path: { [where_] position in
                let (number, entry) = where_[position]
                return snapshots[number].fullPath(at: entry)
            }, stamp: { [where_] position in
                let (number, entry) = where_[position]
                return snapshots[number].stamps[entry]
            }, changed: changedWhileRead)
            do {
                hashed = try await upload(initial: initial, files: reading, skip: onServer.union(queued), total: total,
                                          previous: previous, cache: remote.codec.isSealed ? nil : items.first.map { ChunkCache(database: $0.state.database, maximumBytes: options.cacheBytes) },
                                          counters: counters, progress: progress)
            } catch let error as XferError where !error.stopsEveryDocument {
                // One document's trouble (a file gone or unreadable mid-read) stops a shared read:
                // each document goes on alone, with the single push's rules (chunks sent so far are kept).
                return try await alone(prepared.map(\.item))
            }

            // Chunk lists into their documents; a file written while it was read fails its document.
            let failed = changedWhileRead.value
            for (number, error) in failed { results[prepared[number].item] = .failure(error) }
            for (position, chunks) in hashed.enumerated() {
                let (number, entry) = where_[position]
                guard failed[number] == nil else { continue }
                prepared[number].chunkLists[entry] = chunks
                prepared[number].hashed.insert(entry)
            }
            var commits: [Int] = []  // indexes into prepared
            var unchanged: [Int] = []  // read again (their stamps moved) and the same as the synced version
            var foundAsItWas: [Int] = []  // the same as the synced version, if the server holds it
            for number in prepared.indices where failed[number] == nil {
                let document = prepared[number]
                do {
                    let chunker = document.hashed.isEmpty && document.synced != nil ? document.synced!.manifest.chunker : options.pipeline.chunker
                    let manifest = try document.snapshot.manifest(document.chunkLists, chunker: chunker)
                    prepared[number].manifest = manifest
                    prepared[number].encoded = manifest.encoded()
                    // Byte for byte, as the single push's no-op check (LocalSnapshot.isUnchanged)
                    // compares: a name rewritten to another Unicode form is a change either way.
                    if let basis = document.basis, prepared[number].encoded == basis.manifest.encoded() {
                        foundAsItWas.append(number)  // read again and found as it was
                    } else {
                        commits.append(number)
                    }
                } catch {
                    results[document.item] = .failure(error)
                }
            }
            // No version for those, once the server confirms it holds that one; else it goes in
            // full (its chunks too, asked for by the commit's missing_chunks).
            for (number, answer) in zip(foundAsItWas, try await remote.holds(foundAsItWas.map { (prepared[$0].basis!, serverNames[prepared[$0].item]!) })) {
                guard case .success(let held) = answer else {
                    if case .failure(let error) = answer { results[prepared[number].item] = .failure(error) }
                    continue
                }
                if held {
                    unchanged.append(number)
                } else {
                    prepared[number].basis = nil
                    commits.append(number)
                }
            }
            // What was read is remembered even if a commit fails, so the next pass does not read it again.
            try items.first?.state.database.batch {
                for document in prepared where !document.hashed.isEmpty {
                    try items[document.item].state.record(files: Self.knownFiles(document.snapshot, document.chunkLists, only: document.hashed.sorted()))
                }
            }

            /// Seals the manifests of documents `numbers` for a batch commit into an end-to-end
            /// encrypted container: each to the version after the server's current one (asked a
            /// thousand documents a request; 1 for a document it does not list; one whose next
            /// version is another, announced elsewhere, is refused and pushed alone), its carrier
            /// set to be sent and its pieces uploaded.
            func sealForCommit(_ numbers: [Int], endToEnd: EndToEndKeys) async throws {
                func name(_ number: Int) -> DocumentPath { serverNames[prepared[number].item]! }
                var current: [Int: Int64] = [:]
                for batch in numbers.batched(atMost: ProtocolLimits.maximumBatchDocuments) {
                    let answers = try await connection.manifests(container: remote.container, batch.map { ManifestBatchRequest.Wanted(path: name($0)) })
                    for (number, answer) in zip(batch, answers) {
                        if let info = answer.document, info.path == name(number) { current[number] = info.version }
                    }
                }
                var pieces: [ArraySlice<UInt8>] = []
                var owners: [Int] = []  // each piece's document
                for number in numbers {
                    let version = (current[number] ?? 0) + 1
                    let (carrier, plain) = try endToEnd.carrier(of: prepared[number].manifest!, sealedPath: name(number).value, version: version)
                    prepared[number].version = version
                    prepared[number].sent = carrier.encoded()
                    pieces += plain
                    owners += plain.map { _ in number }
                }
                for (number, bytes) in zip(owners, try await uploadPieces(pieces, endToEnd: endToEnd)) { prepared[number].pieceBytes += bytes }
            }
            if let endToEnd {
                do {
                    try await sealForCommit(commits, endToEnd: endToEnd)
                } catch let error as XferError where !error.stopsEveryDocument {
                    return try await alone((commits + unchanged).map { prepared[$0].item })
                }
            } else {
                for number in commits { prepared[number].sent = prepared[number].encoded }
            }

            func commit(_ numbers: [Int]) async throws -> [Int: Result<DocumentInfo, XferError>] {
                var outcomes: [Int: Result<DocumentInfo, XferError>] = [:]
                var pace = BatchPace(maximum: ProtocolLimits.maximumBatchDocuments)
                var rest = numbers[...]
                while !rest.isEmpty {
                    // Under the body limit: base64 manifests, with room for each document's other fields.
                    let batch = pace.next(from: &rest, budget: ProtocolLimits.maximumBatchBody * 3 / 4 - (64 << 10),
                                          cost: { prepared[$0].sent.count + 1024 })
                    let started = ContinuousClock.now
                    let request = BatchCommitRequest(documents: batch.map { number in
                        let document = prepared[number]
                        return DirectCommit(announce: announcement(serverNames[document.item]!, document.snapshot, baseVersion: document.basis?.version),
                                            manifest: document.sent, manifestDigest: ChunkID.of(document.sent), version: document.version)
                    })
                    let answers: [BatchCommitResult.Outcome]
                    do {
                        answers = try await connection.commit(container: remote.container, batch: request)
                    } catch let error as XferError where !error.stopsEveryDocument && !outcomes.isEmpty {
                        // Earlier batches went through: their outcomes stand (pushing those documents
                        // again alone would commit each a second time). This batch and the rest fail
                        // this pass, and the next pass pushes them.
                        for number in batch + rest { outcomes[number] = .failure(error) }
                        break
                    }
                    pace.answered(in: ContinuousClock.now - started)
                    for (number, outcome) in zip(batch, answers) {
                        if let info = outcome.document {
                            outcomes[number] = .success(info)
                        } else {
                            outcomes[number] = .failure(outcome.error?.xferError ?? XferError(.internal, "the server gave no outcome"))
                        }
                    }
                }
                return outcomes
            }
            var outcomes: [Int: Result<DocumentInfo, XferError>]
            do {
                outcomes = try await commit(commits)
            } catch let error as XferError where !error.stopsEveryDocument {
                // The batch itself refused (a server without batch commits answers "no such
                // route"): each document goes alone; its chunks are on the server already.
                return try await alone((commits + unchanged).map { prepared[$0].item })
            }
            // The server lacks chunks this client believed it had: send them and commit again, once.
            var missing = Set<ChunkID>()
            var again: [Int] = []
            for (number, outcome) in outcomes {
                guard case .failure(let error) = outcome, error.code == .missingChunks else { continue }
                missing.formUnion((error.cause as? MissingChunksDetail)?.ids ?? [])
                again.append(number)
            }
            if !again.isEmpty {
                var resend: [Location] = []
                for number in again {
                    let snapshot = prepared[number].snapshot
                    for (entry, chunks) in prepared[number].chunkLists.enumerated() {
                        var offset: Int64 = 0
                        for chunk in chunks ?? [] {
                            if missing.remove(chunk.id) != nil {
                                resend.append(Location(id: chunk.id, file: snapshot.fullPath(at: entry), offset: offset,
                                                       length: chunk.length, owner: number))
                            }
                            offset += Int64(chunk.length)
                        }
                    }
                }
                _ = try await upload(initial: resend, files: .none, skip: ChunkIDPrefixes(), total: total, counters: counters, progress: progress)
                outcomes.merge(try await commit(again.sorted())) { $1 }
            }

            // Every committed document recorded in one client-state transaction (what was read,
            // those found unchanged included, has its new stamps already: it is not read again).
            let sent = counters.value.byOwner
            try items.first?.state.database.batch {
                for number in unchanged {
                    let document = prepared[number], synced = document.synced!
                    let item = items[document.item]
                    try item.state.recordPushed(server: connection.server, container: remote.container, path: item.name, document: synced)
                    var report = Self.report(item.name, synced.version, synced.manifest, Counters(), manifestBytes: 0, started: started)
                    report.committed = false
                    results[document.item] = .success(report)
                }
                for number in commits {
                    let document = prepared[number]
                    let item = items[document.item]
                    switch outcomes[number] {
                    case .success(let info):
                        try item.state.recordPushed(server: connection.server, container: remote.container, path: item.name,
                                                    document: SyncedDocument(version: info.version, manifest: document.manifest!,
                                                                             serverDigest: endToEnd == nil ? nil : ChunkID.of(document.sent).hex))
                        var report = Self.report(item.name, info.version, document.manifest!, sent[number] ?? Counters(),
                                                 manifestBytes: document.sent.count + document.pieceBytes, started: started)
                        report.state = info.state
                        report.conflicts = info.conflicts ?? []
                        results[document.item] = .success(report)
                    case .failure(let error):
                        results[document.item] = .failure(error)
                    case nil:
                        results[document.item] = .failure(XferError(.internal, "\(item.name) was not committed"))
                    }
                }
            }
            if endToEnd != nil {
                // What this device committed current, it has seen current.
                let current = commits.compactMap { number -> (DocumentPath, Int64)? in
                    guard case .success(let info) = outcomes[number], info.state == .current else { return nil }
                    return (items[prepared[number].item].name, info.version)
                }
                try remote.seenVersions()?.raise(current)
                // Refused end to end (another version taken meanwhile, say): each goes alone, announced first.
                let refused = commits.filter { if case .failure(let error) = outcomes[$0] { error.code == .conflict } else { false } }
                if !refused.isEmpty { _ = try await alone(refused.map { prepared[$0].item }) }
            }
            return results.map { $0 ?? .failure(XferError(.internal, "no outcome")) }
        }
    }

    /// The files of a snapshot at tree indexes `only` (those a push read) with their stamps and
    /// chunk lists: what the state records of them.
    static func knownFiles(_ snapshot: LocalSnapshot, _ chunkLists: FileChunkLists, only: [Int]) -> KnownFiles {
        KnownFiles(snapshot: snapshot, chunkLists: chunkLists, only: only)
    }
}

/// Some of a snapshot's files with their stamps and chunk lists, made one at a time as the
/// state database reads them (a tree may have hundreds of thousands: no array of them is built).
struct KnownFiles: Sequence, Sendable {
    let snapshot: LocalSnapshot
    let chunkLists: FileChunkLists
    /// The tree indexes to give, in order.
    let only: [Int]

    struct Iterator: IteratorProtocol {
        let files: KnownFiles
        var position = 0

        mutating func next() -> KnownFile? {
            let tree = files.snapshot.tree
            while position < files.only.count {
                defer { position += 1 }
                let index = files.only[position]
                guard tree.kind(at: index) == .file, let stamp = files.snapshot.stamps[index], let chunks = files.chunkLists[index] else { continue }
                return KnownFile(path: tree.relativePath(at: index), stamp: stamp, chunks: chunks)
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(files: self) }
}

/// The files a push read, as the state records them, made from the manifest the push made
/// (its entries are the tree's, in the same order) and the one thing of each stamp it lacks:
/// 16 bytes a file, so the tree can go before the rows are written.
struct PushedFiles: Sequence, Sendable {
    let manifest: Manifest
    /// The entry indexes of the files read, in order.
    let indexes: SpillArray<Int>
    /// Each one's inode and ctime, by position in `indexes` (size and mtime are the entry's).
    let identities: SpillArray<Identity>
    struct Identity { var inode: UInt64; var ctimeNanoseconds: Int64 }

    /// The files at tree indexes `only` of `snapshot` (files all: ``LocalSnapshot/toHash``),
    /// whose manifest (made from the same tree) is `manifest`.
    init(_ snapshot: LocalSnapshot, manifest: Manifest, only: SpillArray<Int>) {
        self.manifest = manifest
        let tree = snapshot.tree
        indexes = only  // (shared, not copied)
        identities = SpillArray(only.lazy.map { let stamp = tree.stamp(at: $0); return Identity(inode: stamp.inode, ctimeNanoseconds: stamp.ctimeNanoseconds) })
    }

    struct Iterator: IteratorProtocol {
        let files: PushedFiles
        var position = 0

        mutating func next() -> KnownFile? {
            while position < files.indexes.count {
                defer { position += 1 }
                let entry = files.manifest.entries[files.indexes[position]]
                guard entry.kind == .file else { continue }
                let identity = files.identities[position]
                return KnownFile(path: entry.path, stamp: FileStamp(size: entry.size, mtimeNanoseconds: entry.mtimeNanoseconds,
                                                                inode: identity.inode, ctimeNanoseconds: identity.ctimeNanoseconds),
                                 chunks: entry.chunks)
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(files: self) }
}
