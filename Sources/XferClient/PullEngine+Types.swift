import XferCore
import XferProtocol

extension PullEngine {
    /// A place a chunk's bytes go: a file (by index) and offset.
    struct Target: Sendable, Equatable {
        var file: Int
        var offset: Int64
    }

    /// What a pull has done so far, for its report and its progress.
    struct Counters: Sendable {
        var bytesDone: Int64 = 0
        var chunksFetched = 0
        var bytesFetched: Int64 = 0
        var chunksReused = 0
    }

    /// A version fetched with others' for one pull: its state, its manifest (checked against
    /// the state's digest) and the plain bytes of those of its chunks that came with it
    /// (each checked against its id).
    struct Prefetched: Sendable {
        var info: DocumentInfo
        var manifest: Manifest
        var chunks: [ChunkID: [UInt8]]
        /// The batch's downloads charged to this document (each chunk to the first document
        /// of the batch that wanted it), so a pass's report counts every byte on the wire once.
        var chunksFetched = 0
        var bytesFetched: Int64 = 0
        /// The digest the server records for the version: its carrier's, end to end (`nil`:
        /// the manifest's own).
        var digest: ChunkID? = nil
    }

    /// What one pull works on once it knows the version, handed to each of its steps.
    struct Job {
        /// The document as this device knows it (its state, its trash, the report).
        let document: DocumentPath
        /// The document as the server knows it: its sealed path in an end-to-end encrypted container.
        let name: DocumentPath
        /// The destination's directory (every write goes through its descriptor) and the name in it.
        let parent: ConfinedDirectory
        let baseName: String
        /// The destination's state.
        let state: ClientState
        /// The version this state last synced there, if any.
        let synced: SyncedDocument?
        /// The files of this state's root as last synced, by path.
        let known: [String: KnownFile]
        /// Where what the pull replaces goes first (a synced directory's trash).
        let trash: Trash?
        let started: ContinuousClock.Instant

        /// The destination's path, for messages and the checks that look at it.
        var target: String { parent.describe(baseName) }
    }

    /// A staging copy being built: where it is, its files and what writes them out early.
    struct StagingCopy {
        /// The directory it is built in, and its name there.
        let area: ConfinedDirectory
        let name: String
        /// A package's opened tree; `nil` for a single file's staging file.
        let tree: ConfinedDirectory?
        /// The version's symlinks in it, to be given their modification times at the end.
        let links: [(entry: Manifest.Entry, directory: ConfinedDirectory, name: String)]
        /// Its files, by index among the version's files.
        let files: StagingFiles
        /// The file system's writeback started as the pull writes (a package one syncfs makes durable).
        let early: EarlyWriteback?

        /// Its path, for messages.
        var path: String { area.describe(name) }

        /// Closes what it holds open.
        func close() {
            early?.close()
            files.closeAll()
        }
    }
}
