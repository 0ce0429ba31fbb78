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
    public func pushMany(_ items: [PushItem], progress: @escaping @Sendable (TransferProgress) -> Void = { _ in })
        async throws
        -> [Result<PushReport, any Error>]
    {
        try await ClientThreads.run {
            var batch = BatchPush(engine: self, items: items, progress: progress)
            return try await batch.run()
        }
    }

    /// The files of a snapshot at tree indexes `only` (those a push read) with their stamps and
    /// chunk lists: what the state records of them.
    static func knownFiles(_ snapshot: LocalSnapshot, _ chunkLists: FileChunkLists, only: [Int]) -> KnownFiles {
        KnownFiles(snapshot: snapshot, chunkLists: chunkLists, only: only)
    }
}

/// One batch push under way (``PushEngine/pushMany(_:progress:)``): its items, the documents it
/// reads and commits together, and each item's outcome so far. Each step does what
/// ``BatchPushDecisions`` decide.
struct BatchPush {
    let engine: PushEngine
    let items: [PushItem]
    let progress: @Sendable (TransferProgress) -> Void
    let started = ContinuousClock.now
    /// Each item's outcome, once it has one.
    var results: [Result<PushReport, any Error>?]
    /// The path the server keeps each item at (sealed, end to end); `nil` for one that has none.
    var serverNames: [DocumentPath?] = []
    /// The documents read and committed together (a document's number is its position here).
    var documents: [BatchDocument] = []

    init(engine: PushEngine, items: [PushItem], progress: @escaping @Sendable (TransferProgress) -> Void) {
        self.engine = engine
        self.items = items
        self.progress = progress
        results = Array(repeating: nil, count: items.count)
    }

    var remote: Remote { engine.remote }
    var connection: ServerConnection { engine.remote.connection }

    /// Every item's outcome: what the batch returns.
    func allResults() -> [Result<PushReport, any Error>] {
        results.map { $0 ?? .failure(XferError(.internal, "no outcome")) }
    }

    /// Runs the batch: finds what each document is, reads and uploads what must be, commits the
    /// documents that changed, and records them.
    mutating func run() async throws -> [Result<PushReport, any Error>] {
        // Chunks go up before the commit: never plain ones into an end-to-end encrypted
        // container. An encrypted one's documents are sealed here, each to the version it is to
        // become, which a server must enforce.
        let endToEnd = remote.endToEnd
        if !items.isEmpty && endToEnd == nil { try await refuseIfEncrypted() }
        let features = await connection.features()
        if endToEnd != nil && !features.contains(.batchCommitVersions) { return try await alone(Array(items.indices)) }
        nameItems()
        try await prepare()
        let reading = BatchPushDecisions.reading(
            documents, sendAgainst: features.contains(.chunksAgainst) && remote.codec.sendsAgainst)
        let counters = Locked(PushEngine.Counters(bytesHashed: reading.knownBytes))
        // One document's trouble (a file gone or unreadable mid-read) stops a shared read: each
        // document goes on alone, with the single push's rules (chunks sent so far are kept).
        guard let hashed = try await read(reading, counters: counters) else {
            return try await alone(documents.map(\.item))
        }
        let made = makeManifests(hashed.lists, files: reading.files, changed: hashed.changed)
        var commits = made.commits
        let foundAsItWas = made.foundAsItWas
        // No version for those, once the server confirms it holds that one; else it goes in
        // full (its chunks too, asked for by the commit's missing_chunks).
        let found = BatchPushDecisions.sortByHolds(
            foundAsItWas,
            answers: try await remote.holds(
                foundAsItWas.map {
                    (documents[$0].basis!, serverNames[documents[$0].item]!)
                }))
        for (number, error) in found.failed { results[documents[number].item] = .failure(error) }
        let unchanged = found.held  // read again (their stamps moved) and the same as the synced version
        for number in found.lacking {
            documents[number].basis = nil
            commits.append(number)
        }
        try recordRead()
        if let endToEnd {
            do {
                try await sealForCommit(commits, endToEnd: endToEnd)
            } catch let error as XferError where !error.stopsEveryDocument {
                return try await alone((commits + unchanged).map { documents[$0].item })
            }
        } else {
            for number in commits { documents[number].sent = documents[number].encoded }
        }
        var outcomes: [Int: Result<DocumentInfo, XferError>]
        do {
            outcomes = try await commit(commits)
        } catch let error as XferError where !error.stopsEveryDocument {
            // The batch itself refused (a server without batch commits answers "no such
            // route"): each document goes alone; its chunks are on the server already.
            return try await alone((commits + unchanged).map { documents[$0].item })
        }
        try await commitMissing(&outcomes, total: reading.totalBytes, counters: counters)
        try record(commits: commits, unchanged: unchanged, outcomes: outcomes, sent: counters.value.byOwner)
        if endToEnd != nil {
            let (current, refused) = BatchPushDecisions.afterSealedCommit(commits, outcomes: outcomes)
            // What this device committed current, it has seen current.
            try remote.seenVersions()?.raise(current.map { (items[documents[$0.document].item].name, $0.version) })
            // Refused end to end (another version taken meanwhile, say): each goes alone, announced first.
            if !refused.isEmpty { _ = try await alone(refused.map { documents[$0].item }) }
        }
        return allResults()
    }

    /// Pushes these items one at a time (the single push's rules) and answers for all.
    mutating func alone(_ indexes: [Int]) async throws -> [Result<PushReport, any Error>] {
        let engine = engine
        let progress = progress
        for index in indexes {
            let item = items[index]
            let outcome = try await documentOutcome {
                try await engine.push(
                    item.path, as: item.name, state: item.state, directoryItself: item.directoryItself,
                    progress: progress)
            }
            results[index] = outcome
        }
        return allResults()
    }

    /// Throws `encrypted_container` if the container is end-to-end encrypted, as this push was
    /// not given its key: asked of the server, and of this device's keys, so a server cannot
    /// talk it into sending plain data where it holds a key.
    func refuseIfEncrypted() async throws {
        let refusal = XferError(
            .encryptedContainer,
            "container \(remote.container) is end-to-end encrypted, and this push was not given its key (Remote.unlocked()); nothing was sent"
        )
        do {
            if try await remote.unlocked().endToEnd != nil { throw refusal }
        } catch let error as XferError where error.code == .unauthorized {
            throw refusal  // encrypted, and this device holds no key
        }
    }

    /// Finds the path the server keeps each item at (sealed, end to end): an item without one fails.
    mutating func nameItems() {
        for (index, item) in items.enumerated() {
            do {
                serverNames.append(try remote.serverPath(item.name))
            } catch {
                serverNames.append(nil)
                results[index] = .failure(error)
            }
        }
    }

    /// Finds each named item's files and the version its root synced. One unchanged since it
    /// synced here makes no version once the server confirms it holds that version (the single
    /// push's rule); one it lacks goes in full, as if new there.
    mutating func prepare() async throws {
        var unchangedHere: [BatchDocument] = []
        for (index, item) in items.enumerated() where serverNames[index] != nil {
            do {
                let snapshot = try LocalSnapshot(
                    path: item.path, state: item.state, exclude: engine.options.exclude,
                    directoryItself: item.directoryItself)
                let synced = try item.state.document(
                    server: connection.server, container: remote.container, path: item.name)
                let chunkLists = try snapshot.knownChunks(item.state)
                let document = BatchDocument(
                    item: index, snapshot: snapshot, chunkLists: chunkLists, synced: synced, basis: synced)
                if let synced, snapshot.isUnchanged(since: synced, chunks: chunkLists) {
                    unchangedHere.append(document)
                } else {
                    documents.append(document)
                }
            } catch {
                results[index] = .failure(error)
            }
        }
        let answers = try await remote.holds(unchangedHere.map { ($0.synced!, serverNames[$0.item]!) })
        let found = BatchPushDecisions.sortByHolds(unchangedHere, answers: answers)
        for (document, error) in found.failed { results[document.item] = .failure(error) }
        for document in found.held {
            results[document.item] = .success(
                PushEngine.unchangedReport(items[document.item].name, document.synced!, started: started))
        }
        for var document in found.lacking {
            document.basis = nil
            documents.append(document)
        }
    }

    /// Hashes the documents' files to read in one pipeline run while the chunks the server lacks
    /// go up, the known files' first.
    /// - Returns: The chunk list of each file read, by position in `reading.files`, and the error
    ///   of each document with a file written while it was read (by number); `nil` when one
    ///   document's trouble stopped the shared read.
    func read(_ reading: BatchPushDecisions.Reading, counters: Locked<PushEngine.Counters>) async throws
        -> (lists: ChunkLists, changed: [Int: any Error])?
    {
        let files = reading.files
        let snapshots = documents.map(\.snapshot)
        let changedWhileRead = Locked<[Int: any Error]>([:])  // by document
        let toRead = PushEngine.FilesToRead(
            owners: files.map(\.document),
            path: { position in
                let (number, entry) = files[position]
                return snapshots[number].fullPath(at: entry)
            },
            stamp: { position in
                let (number, entry) = files[position]
                return snapshots[number].stamps[entry]
            }, changed: changedWhileRead)
        do {
            let lists = try await engine.upload(
                initial: reading.initial, files: toRead, skip: reading.onServer.union(reading.queued),
                total: reading.totalBytes, previous: reading.previous,
                cache: remote.codec.isSealed
                    ? nil
                    : items.first.map {
                        ChunkCache(database: $0.state.database, maximumBytes: engine.options.cacheBytes)
                    }, counters: counters, progress: progress)
            return (lists, changedWhileRead.value)
        } catch let error as XferError where !error.stopsEveryDocument {
            return nil
        }
    }

    /// Puts the chunk lists read (`lists`, of `files`) into their documents, a document with a
    /// file written while it was read (`changed`) failing, and makes each document's manifest.
    /// - Returns: The documents to commit, and those read again and found as their basis, byte
    ///   for byte (by number).
    mutating func makeManifests(_ lists: ChunkLists, files: [(document: Int, entry: Int)], changed: [Int: any Error])
        -> (commits: [Int], foundAsItWas: [Int])
    {
        for (number, error) in changed { results[documents[number].item] = .failure(error) }
        for (position, chunks) in lists.enumerated() {
            let (number, entry) = files[position]
            guard changed[number] == nil else { continue }
            documents[number].chunkLists[entry] = chunks
            documents[number].hashed.insert(entry)
        }
        var commits: [Int] = []
        var foundAsItWas: [Int] = []
        for number in documents.indices where changed[number] == nil {
            let document = documents[number]
            do {
                let chunker = PushDecisions.chunker(
                    readAny: !document.hashed.isEmpty, synced: document.synced,
                    configured: engine.options.pipeline.chunker)
                let manifest = try document.snapshot.manifest(document.chunkLists, chunker: chunker)
                documents[number].manifest = manifest
                documents[number].encoded = manifest.encoded()
                // Byte for byte, as the single push's no-op check (LocalSnapshot.isUnchanged)
                // compares: a name rewritten to another Unicode form is a change either way.
                if let basis = document.basis, documents[number].encoded == basis.manifest.encoded() {
                    foundAsItWas.append(number)
                } else {
                    commits.append(number)
                }
            } catch {
                results[document.item] = .failure(error)
            }
        }
        return (commits, foundAsItWas)
    }

    /// Records what was read, even if a commit fails, so the next pass does not read it again.
    func recordRead() throws {
        try items.first?.state.database.batch {
            for document in documents where !document.hashed.isEmpty {
                try items[document.item].state.record(
                    files: PushEngine.knownFiles(
                        document.snapshot, document.chunkLists,
                        only: document.hashed.sorted()))
            }
        }
    }

    /// Seals the manifests of documents `numbers` for a batch commit into an end-to-end
    /// encrypted container: each to the version after the server's current one (asked a
    /// thousand documents a request; 1 for a document it does not list; one whose next
    /// version is another, announced elsewhere, is refused and pushed alone), its carrier
    /// set to be sent and its pieces uploaded.
    mutating func sealForCommit(_ numbers: [Int], endToEnd: EndToEndKeys) async throws {
        let names = Dictionary(
            numbers.map { ($0, serverNames[documents[$0].item]!) }, uniquingKeysWith: { first, _ in first })
        var current: [Int: Int64] = [:]
        for batch in numbers.batched(atMost: ProtocolLimits.maximumBatchDocuments) {
            let answers = try await connection.manifests(
                container: remote.container, batch.map { ManifestBatchRequest.Wanted(path: names[$0]!) })
            for (number, answer) in zip(batch, answers) {
                if let info = answer.document, info.path == names[number] { current[number] = info.version }
            }
        }
        var pieces: [ArraySlice<UInt8>] = []
        var owners: [Int] = []  // each piece's document
        for number in numbers {
            let version = (current[number] ?? 0) + 1
            let (carrier, plain) = try endToEnd.carrier(
                of: documents[number].manifest!, sealedPath: names[number]!.value, version: version)
            documents[number].version = version
            documents[number].sent = carrier.encoded()
            pieces += plain
            owners += plain.map { _ in number }
        }
        for (number, bytes) in zip(owners, try await engine.uploadPieces(pieces, endToEnd: endToEnd)) {
            documents[number].pieceBytes += bytes
        }
    }

    /// Commits documents `numbers` in batches under the server's body limit, as many a request
    /// as it answers quickly (``BatchPace``).
    /// - Returns: Each document's outcome.
    /// - Throws: What the first request met, when nothing was committed yet.
    func commit(_ numbers: [Int]) async throws -> [Int: Result<DocumentInfo, XferError>] {
        var outcomes: [Int: Result<DocumentInfo, XferError>] = [:]
        var pace = BatchPace(maximum: ProtocolLimits.maximumBatchDocuments)
        var rest = numbers[...]
        while !rest.isEmpty {
            // Under the body limit: base64 manifests, with room for each document's other fields.
            let batch = pace.next(
                from: &rest, budget: ProtocolLimits.maximumBatchBody * 3 / 4 - (64 << 10),
                cost: { documents[$0].sent.count + 1024 })
            let started = ContinuousClock.now
            let request = BatchCommitRequest(
                documents: batch.map { number in
                    let document = documents[number]
                    return DirectCommit(
                        announce: engine.announcement(
                            serverNames[document.item]!, document.snapshot, baseVersion: document.basis?.version),
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
                    outcomes[number] = .failure(
                        outcome.error?.xferError ?? XferError(.internal, "the server gave no outcome"))
                }
            }
        }
        return outcomes
    }

    /// Sends the chunks the server lacked though this client believed it had them, and commits
    /// their documents again, once (``BatchPushDecisions/missingChunks(_:)``).
    func commitMissing(
        _ outcomes: inout [Int: Result<DocumentInfo, XferError>], total: Int64,
        counters: Locked<PushEngine.Counters>
    ) async throws {
        var (again, missing) = BatchPushDecisions.missingChunks(outcomes)
        guard !again.isEmpty else { return }
        var resend: [PushEngine.Location] = []
        for number in again {
            let snapshot = documents[number].snapshot
            resend += PushDecisions.locations(
                documents[number].chunkLists, path: { snapshot.fullPath(at: $0) }, owner: number
            ) {
                missing.remove($0) != nil
            }
        }
        _ = try await engine.upload(
            initial: resend, files: .none, skip: ChunkIDPrefixes(), total: total, counters: counters, progress: progress
        )
        again.sort()
        outcomes.merge(try await commit(again)) { $1 }
    }

    /// Records every committed document, and those found unchanged, in one client-state
    /// transaction (what was read has its new stamps already: it is not read again), and
    /// reports each; `sent` is what was uploaded for each document.
    mutating func record(
        commits: [Int], unchanged: [Int], outcomes: [Int: Result<DocumentInfo, XferError>],
        sent: [Int: PushEngine.Counters]
    ) throws {
        let sealed = remote.endToEnd != nil
        var reports: [(item: Int, result: Result<PushReport, any Error>)] = []
        try items.first?.state.database.batch {
            for number in unchanged {
                let document = documents[number]
                let synced = document.synced!
                let item = items[document.item]
                try item.state.recordPushed(
                    server: connection.server, container: remote.container, path: item.name, document: synced)
                reports.append(
                    (document.item, .success(PushEngine.unchangedReport(item.name, synced, started: started))))
            }
            for number in commits {
                let document = documents[number]
                let item = items[document.item]
                switch outcomes[number] {
                case .success(let info):
                    try item.state.recordPushed(
                        server: connection.server, container: remote.container, path: item.name,
                        document: SyncedDocument(
                            version: info.version, manifest: document.manifest!,
                            serverDigest: sealed ? ChunkID.of(document.sent).hex : nil))
                    var report = PushEngine.report(
                        item.name, info.version, document.manifest!, sent[number] ?? PushEngine.Counters(),
                        manifestBytes: document.sent.count + document.pieceBytes, started: started)
                    report.state = info.state
                    report.conflicts = info.conflicts ?? []
                    reports.append((document.item, .success(report)))
                case .failure(let error):
                    reports.append((document.item, .failure(error)))
                case nil:
                    reports.append((document.item, .failure(XferError(.internal, "\(item.name) was not committed"))))
                }
            }
        }
        for (item, result) in reports { results[item] = result }
    }
}
