import XferCore
import XferProtocol

/// One document of a batch push as it goes: what was found of it locally and in the client
/// state, and what the batch made of it.
struct BatchDocument {
    /// Its item's position in the batch.
    var item: Int
    var snapshot: LocalSnapshot
    var chunkLists: FileChunkLists
    var synced: SyncedDocument?
    /// What the server is taken to hold of the document: `synced`, unless the server said it
    /// lacks that version (then nothing: the document goes as if new there).
    var basis: SyncedDocument?
    /// The tree indexes of the files the batch read.
    var hashed: Set<Int> = []
    var manifest: Manifest? = nil
    var encoded: [UInt8] = []
    /// What the server is to keep: `encoded`, or end to end its carrier's encoding.
    var sent: [UInt8] = []
    /// End to end, the version its manifest is sealed to, and its pieces' bytes.
    var version: Int64? = nil
    var pieceBytes = 0
}

/// A batch push's decisions, made without I/O (as ``PushDecisions`` are a single push's): what
/// the server's answers make of each document, what is read and sent first, and what goes again
/// once the commits are answered. ``BatchPush`` gathers the facts and does the I/O these name;
/// `BatchPushDecisionsTests` tests them alone.
enum BatchPushDecisions {
    /// Documents found as a version the server is taken to hold, sorted by its answers.
    struct Held<Document> {
        /// Those it holds: no version is made.
        var held: [Document] = []
        /// Those it lacks: each goes in full, as if new there.
        var lacking: [Document] = []
        /// Those whose answer was an error: each fails with it.
        var failed: [(document: Document, error: any Error)] = []
    }

    /// Sorts `documents` by the server's `answers` (``Remote/holds(_:)``: one per document, in
    /// order), keeping their order within each kind.
    static func sortByHolds<Document>(_ documents: [Document], answers: [Result<Bool, any Error>]) -> Held<Document> {
        var sorted = Held<Document>()
        for (document, answer) in zip(documents, answers) {
            switch answer {
            case .success(true): sorted.held.append(document)
            case .success(false): sorted.lacking.append(document)
            case .failure(let error): sorted.failed.append((document, error))
            }
        }
        return sorted
    }

    /// What a batch reads, and sends before it reads anything, for its documents to commit.
    struct Reading {
        /// Chunks the server surely has (each document's basis'): never asked about. By prefix:
        /// one taken for them by mistake is sent when the commit misses it (``ChunkIDPrefixes``).
        var onServer = ChunkIDPrefixes()
        /// The known files' chunks the server does not surely hold, each once, counted as their
        /// documents' (``PushEngine/Location/owner``): sent before any file is read.
        var initial: [PushEngine.Location] = []
        /// The chunks `initial` picked, so the files read next skip those.
        var queued = ChunkIDPrefixes()
        /// The files to read, in order: each one's document (by position) and tree entry.
        var files: [(document: Int, entry: Int)] = []
        /// The bytes of all the documents' files.
        var totalBytes: Int64 = 0
        /// The bytes of the files whose chunk lists are known: counted as hashed from the start.
        var knownBytes: Int64 = 0
        /// Changed small files' previous chunks, to send against.
        var previous = PreviousChunks()
    }

    /// What a batch of `documents` reads and sends first: each document's files to read (as a
    /// single push's, ``PushDecisions/filesToRead(changed:unchanged:chunkLists:)``) and its known
    /// files' chunks. With `sendAgainst` (a server that reads chunks sent against others, a
    /// codec that sends them so), files read are sent against their synced version's chunks.
    static func reading(_ documents: [BatchDocument], sendAgainst: Bool) -> Reading {
        var onServer = ChunkIDPrefixes()
        for document in documents { if let basis = document.basis { onServer.formUnion(chunksOf: basis.manifest) } }
        var queued = ChunkIDPrefixes()
        var reading = Reading()
        for (number, document) in documents.enumerated() {
            let snapshot = document.snapshot
            reading.totalBytes += snapshot.totalSize
            reading.knownBytes += PushDecisions.knownBytes(document.chunkLists, size: { snapshot.stamps[$0]?.size })
            reading.initial += PushDecisions.locations(
                document.chunkLists, path: { snapshot.fullPath(at: $0) }, owner: number
            ) {
                !onServer.contains($0) && queued.insert($0)
            }
            for entry in PushDecisions.filesToRead(
                changed: snapshot.toHash, unchanged: snapshot.unchanged, chunkLists: document.chunkLists)
            {
                reading.files.append((number, entry))
                if sendAgainst {
                    reading.previous.add(
                        fullPath: snapshot.fullPath(at: entry), relativePath: snapshot.tree.relativePath(at: entry),
                        previous: document.synced?.manifest)
                }
            }
        }
        reading.onServer = onServer
        reading.queued = queued
        return reading
    }

    /// The documents whose commit the server refused for chunks this client believed it had
    /// (`missing_chunks`), in order, and those chunks: sent, then the documents committed again, once.
    static func missingChunks(_ outcomes: [Int: Result<DocumentInfo, XferError>]) -> (
        documents: [Int], chunks: Set<ChunkID>
    ) {
        var chunks = Set<ChunkID>()
        var documents: [Int] = []
        for (number, outcome) in outcomes {
            guard case .failure(let error) = outcome, error.code == .missingChunks else { continue }
            chunks.formUnion((error.cause as? MissingChunksDetail)?.ids ?? [])
            documents.append(number)
        }
        return (documents.sorted(), chunks)
    }

    /// Of the documents `commits` committed into an end-to-end encrypted container, by their
    /// `outcomes`: those made current, with the version (this device has seen it current), and
    /// those refused as a conflict (another version taken meanwhile, say), in order: each is
    /// pushed alone then, announced first.
    static func afterSealedCommit(_ commits: [Int], outcomes: [Int: Result<DocumentInfo, XferError>])
        -> (current: [(document: Int, version: Int64)], refused: [Int])
    {
        let current = commits.compactMap { number -> (document: Int, version: Int64)? in
            guard case .success(let info) = outcomes[number], info.state == .current else { return nil }
            return (number, info.version)
        }
        let refused = commits.filter {
            if case .failure(let error) = outcomes[$0] { error.code == .conflict } else { false }
        }
        return (current, refused)
    }
}
