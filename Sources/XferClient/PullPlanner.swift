import Foundation
import XferCore
import XferProtocol

/// A pull's decisions, made without I/O: what it may replace and what it checks again just
/// before it does, how its staging copy is laid out, where each chunk comes from
/// (``ChunkSourcing``), and how the copy is made durable. ``PullEngine`` gathers the facts (what
/// is at the destination, the client state, the server's answers) and performs the steps a
/// ``Plan`` names; `PullPlannerTests` tests them alone.
enum PullPlanner {
    /// Whether a document of `kind` pulled over what is at the destination (`existing`, its file
    /// type; `nil` for nothing) is a directory over a directory: that replaces nothing, what is
    /// in it stays.
    static func isDirectoryOverDirectory(_ kind: DocumentKind, existing: mode_t?) -> Bool {
        kind == .directory && existing == S_IFDIR
    }

    /// Whether a pull asks, before anything moves, that what is at the destination be this
    /// client's own unchanged copy (``PullEngine/checkReplaceable(target:exists:synced:known:name:)``):
    /// always but with `force`, or for a directory over a directory (which replaces nothing).
    static func checksDestination(force: Bool, directoryOverDirectory: Bool) -> Bool {
        !force && !directoryOverDirectory
    }

    /// Checks the server's manifest against what the pull was told before it: a version the
    /// server described as a directory, pulled over a directory without the destination's check,
    /// must have a directory's manifest.
    /// - Throws: `invalid_manifest`, saying nothing was changed, if it does not.
    static func checkKind(
        of manifest: Manifest, directoryOverDirectory: Bool, document: DocumentPath, version: Int64
    ) throws {
        guard !directoryOverDirectory || manifest.kind == .directory else {
            throw XferError(
                .invalidManifest,
                "the server describes \(document) version \(version) as a directory, but its manifest is a \(DocumentKind(manifest.kind).rawValue); nothing was changed"
            )
        }
    }

    /// What a pull checks of the destination just before it puts the new version in place.
    enum Recheck: Equatable {
        /// Nothing: `--force` replaces whatever is there.
        case none
        /// What is there (not this client's own copy) held the very version being pulled when
        /// the pull began (``PullEngine/holds(_:_:codec:)``): it must still, or it is not replaced.
        case stillHoldsVersion
        /// What is there is this client's own copy: it must be unchanged since it was synced
        /// (``PullEngine/checkUnchanged(target:known:name:)``).
        case unchangedSinceSynced
    }

    /// The check before putting the version in place: none with `force`; else, when the check
    /// before anything moved refused the destination (`refused`) and the pull went on because it
    /// holds the version already, that it still does; else that it is unchanged since synced.
    static func recheck(force: Bool, refused: Bool) -> Recheck {
        force ? .none : refused ? .stillHoldsVersion : .unchangedSinceSynced
    }

    /// The name of the staging copy of `version` among those `prefix` names
    /// (``PullEngine/stagingPlace(_:in:as:area:)``).
    static func stagingName(prefix: String, version: Int64) -> String { "\(prefix)\(version).partial" }

    /// The directory part and the last component of a manifest entry's path ("" for an entry at the root).
    static func split(_ path: String) -> (parent: Substring, leaf: Substring) {
        guard let slash = path.lastIndex(of: "/") else { return ("", path[...]) }
        return (path[..<slash], path[path.index(after: slash)...])
    }

    /// How the staging copy gets one entry of the version. Every name is made in a directory
    /// opened beneath the staging copy, never through a symlink.
    enum Step: Equatable {
        /// A directory; `clear`: what a resumed copy holds under its name is removed first unless a directory.
        case directory(clear: Bool)
        /// A symlink; `clear`: what a resumed copy holds under its name is removed first.
        case symlink(clear: Bool)
        /// A file of a new package copy, created (exclusively: a name that appears meanwhile
        /// stops the pull) by its first chunk's write; an empty one has none, so it is created now.
        case createdByFirstWrite(empty: Bool)
        /// A file of a resumed copy, or a single file's staging file: what is there is removed
        /// unless a regular file, then the file is opened (created if missing), set to `size`
        /// and closed (``StagingFiles`` opens it again to write).
        case sized(Int64)
    }

    /// How a pull's staging copy is made durable.
    struct Durability: Equatable {
        /// One syncfs of the copy's file system at the end, not an fsync per file and directory.
        var wholeFileSystem: Bool

        /// A package of ``PullEngine/syncWholeFileSystemFrom`` files or more is made durable by
        /// one syncfs; anything else by fsyncs.
        init(package: Bool, files: Int) {
            wholeFileSystem = package && files >= PullEngine.syncWholeFileSystemFrom
        }

        /// Whether a file's writeback starts as its last chunk is written: always, but not a file's
        /// under ``PullEngine/writebackFrom`` when one syncfs writes the small files out together
        /// (not a write request per file of a few kB).
        func startsWriteback(size: Int64) -> Bool { !wholeFileSystem || size >= PullEngine.writebackFrom }

        /// Whether a file is finished (its mode and mtime set, then closed for good) as its last
        /// chunk is written: only with no fsync of its own to come, and only with a mode its
        /// owner can read and write (a pull resumed from this staging copy opens the file again
        /// to write; a read-only one is given its mode at the end).
        func finishesOnLastWrite(mode: UInt32) -> Bool {
            wholeFileSystem && PullEngine.safeMode(mode) & 0o600 == 0o600
        }
    }

    /// The steps of a pull of a file or package version, decided once its manifest is checked.
    struct Plan {
        /// The staging copy's name in its area.
        var stagingName: String
        /// A package's tree (a directory named ``stagingName``), else a single file.
        var package: Bool
        /// A staging copy of this version is there already (an interrupted pull's): its chunks
        /// are tried first, where they are, and what it holds that the version does not have is removed.
        var resuming: Bool
        /// The manifest's file entries, in order: the pull's files, by index.
        var files: SpillArray<Int>
        var durability: Durability
        /// Where each chunk comes from: the staging copy, a file on disk, the batch, or the server.
        var sourcing: ChunkSourcing
        /// What is checked of the destination just before the copy is put in place.
        var recheck: Recheck
        /// With `--force` nothing at the destination is kept.
        var force: Bool

        /// A new package copy: empty, nothing in it to remove first, files created by their first write.
        var fresh: Bool { package && !resuming }

        /// How the staging copy gets `entry`.
        func step(for entry: Manifest.Entry) -> Step {
            switch entry.kind {
            case .directory: return .directory(clear: !fresh)
            case .symlink: return .symlink(clear: !fresh)
            case .file: return fresh ? .createdByFirstWrite(empty: entry.size == 0) : .sized(entry.size)
            }
        }

        /// Whether the files the package's ignore rules leave out (never on any server) go on
        /// into the new tree from the old one: not with `--force`, and only from a package
        /// that is a directory at the destination (`destinationIsDirectory`).
        func carriesIgnoredFiles(destinationIsDirectory: Bool) -> Bool {
            !force && package && destinationIsDirectory
        }

        /// Which files of a new package copy are created by their first write (all but the
        /// empty ones, made at layout); `nil` when the files are made at layout.
        func creating(_ entries: Manifest.Entries) -> [Bool]? {
            fresh ? files.map { entries.size(at: $0) > 0 } : nil
        }
    }

    /// Plans the pull of a file or package version whose manifest is `manifest`.
    /// - Parameters:
    ///   - stagingName: The staging copy's name (``stagingName(prefix:version:)``).
    ///   - resuming: A staging copy of that name is there.
    ///   - force: `--force`.
    ///   - refused: The check before anything moved refused the destination; the pull goes on
    ///     because it holds this version already.
    ///   - local: Where chunks are on disk (``ChunkSources``).
    ///   - prefetched: The chunks the batch fetched already.
    static func plan(
        _ manifest: Manifest, stagingName: String, resuming: Bool, force: Bool, refused: Bool,
        local: [ChunkID: ChunkSources.Location], prefetched: Set<ChunkID>
    ) -> Plan {
        let entries = manifest.entries
        var files = SpillArray<Int>()
        files.reserveCapacity(entries.indices.reduce(0) { $0 + (entries.kind(at: $1) == .file ? 1 : 0) })
        for index in entries.indices where entries.kind(at: index) == .file { files.append(index) }
        let package = manifest.kind == .package
        return Plan(
            stagingName: stagingName, package: package, resuming: resuming, files: files,
            durability: Durability(package: package, files: files.count),
            sourcing: ChunkSourcing.make(
                files: FileChunks(entries, entryIndexes: files), resuming: resuming, local: local,
                prefetched: prefetched),
            recheck: recheck(force: force, refused: refused), force: force)
    }
}
