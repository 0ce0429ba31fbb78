import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// The pure half of a pull: what it may replace and checks again, how its staging copy is laid
/// out, where each chunk comes from and how the copy is made durable, decided without a disk
/// or a server.
@Suite struct PullPlannerTests {
    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        Manifest.ChunkReference(id: ChunkID.of([byte]), length: length)
    }

    static func file(_ path: String, _ chunks: [Manifest.ChunkReference], mode: UInt32 = 0o644) -> Manifest.Entry {
        Manifest.Entry(path: path, kind: .file, mode: mode, mtimeNanoseconds: 0, chunks: chunks)
    }

    /// A package: a directory `d` holding a symlink, an empty file and two files of chunks.
    static func package() throws -> Manifest {
        try Manifest(
            kind: .package, chunker: .default,
            entries: [
                file("a", [chunk(1), chunk(2, 20)]),
                Manifest.Entry(path: "d", kind: .directory, mode: 0o700, mtimeNanoseconds: 0),
                file("d/empty", []),
                Manifest.Entry(path: "d/link", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0, symlinkTarget: "../a"),
                file("d/z", [chunk(2, 20)])
            ])
    }

    static func plan(
        _ manifest: Manifest, resuming: Bool = false, force: Bool = false, refused: Bool = false,
        local: [ChunkID: ChunkSources.Location] = [:], prefetched: Set<ChunkID> = []
    ) -> PullPlanner.Plan {
        PullPlanner.plan(
            manifest, stagingName: ".doc.xfer-7.partial", resuming: resuming, force: force, refused: refused,
            local: local, prefetched: prefetched)
    }

    @Test func onlyADirectoryOverADirectoryOrForceSkipsTheDestinationCheck() {
        #expect(PullPlanner.isDirectoryOverDirectory(.directory, existing: S_IFDIR))
        #expect(!PullPlanner.isDirectoryOverDirectory(.directory, existing: S_IFREG))
        #expect(!PullPlanner.isDirectoryOverDirectory(.directory, existing: nil))
        #expect(!PullPlanner.isDirectoryOverDirectory(.package, existing: S_IFDIR), "a package replaces a tree")
        #expect(PullPlanner.checksDestination(force: false, directoryOverDirectory: false))
        #expect(!PullPlanner.checksDestination(force: true, directoryOverDirectory: false))
        #expect(!PullPlanner.checksDestination(force: false, directoryOverDirectory: true))
    }

    @Test func aServerThatCalledTheVersionADirectoryMustSendADirectorysManifest() throws {
        let document = try DocumentPath("doc")
        let package = try Self.package()
        #expect(throws: XferError.self) {
            try PullPlanner.checkKind(of: package, directoryOverDirectory: true, document: document, version: 3)
        }
        do {
            try PullPlanner.checkKind(of: package, directoryOverDirectory: true, document: document, version: 3)
        } catch let error as XferError {
            #expect(error.code == .invalidManifest)
            #expect(error.message.contains("nothing was changed"))
        }
        try PullPlanner.checkKind(
            of: .directory(mode: 0o755), directoryOverDirectory: true, document: document, version: 3)
        try PullPlanner.checkKind(of: package, directoryOverDirectory: false, document: document, version: 3)
    }

    @Test func theDestinationIsCheckedAgainAsItWasFirstAllowed() throws {
        #expect(PullPlanner.recheck(force: true, refused: false) == .none)
        #expect(PullPlanner.recheck(force: true, refused: true) == .none)
        #expect(PullPlanner.recheck(force: false, refused: false) == .unchangedSinceSynced)
        #expect(
            PullPlanner.recheck(force: false, refused: true) == .stillHoldsVersion,
            "not this client's copy, but the version itself: it must still be")
        #expect(Self.plan(try Self.package(), refused: true).recheck == .stillHoldsVersion)
    }

    @Test func stagingNamesAndPathsSplit() {
        #expect(PullPlanner.stagingName(prefix: ".doc.xfer-", version: 12) == ".doc.xfer-12.partial")
        #expect(PullPlanner.split("a/b/c") == ("a/b", "c"))
        #expect(PullPlanner.split("c") == ("", "c"))
        #expect(PullPlanner.split("") == ("", ""))
    }

    @Test func aNewPackageCopyRemovesNothingAndCreatesFilesByTheirFirstWrite() throws {
        let manifest = try Self.package()
        let plan = Self.plan(manifest)
        #expect(plan.package && !plan.resuming && plan.fresh)
        #expect(Array(plan.files) == [0, 2, 4])
        #expect(
            manifest.entries.map(plan.step(for:)) == [
                .createdByFirstWrite(empty: false), .directory(clear: false), .createdByFirstWrite(empty: true),
                .symlink(clear: false), .createdByFirstWrite(empty: false)
            ])
        #expect(plan.creating(manifest.entries) == [true, false, true], "an empty file is made at layout")
    }

    @Test func aResumedCopyClearsWhatIsInTheWayAndSizesEveryFile() throws {
        let manifest = try Self.package()
        let plan = Self.plan(manifest, resuming: true)
        #expect(!plan.fresh)
        #expect(
            manifest.entries.map(plan.step(for:)) == [
                .sized(30), .directory(clear: true), .sized(0), .symlink(clear: true), .sized(20)
            ])
        #expect(plan.creating(manifest.entries) == nil)
        // Its chunks are tried where they are first.
        #expect(plan.sourcing.steps.count == 3)
        #expect(plan.sourcing.steps.allSatisfy { $0.sources.first == .staging })
    }

    @Test func aSingleFileIsAStagingFileSizedInPlace() throws {
        let manifest = try Manifest(kind: .file, chunker: .default, entries: [Self.file("", [Self.chunk(1)])])
        let plan = Self.plan(manifest)
        #expect(!plan.package && !plan.fresh)
        #expect(manifest.entries.map(plan.step(for:)) == [.sized(10)])
        #expect(!plan.durability.wholeFileSystem)
        #expect(!plan.carriesIgnoredFiles(destinationIsDirectory: true), "a file carries nothing")
    }

    @Test func chunksComeFromDiskOrTheBatchAndTheRestIsDownloadedOnce() throws {
        let manifest = try Self.package()
        let plan = Self.plan(
            manifest, local: [Self.chunk(1).id: ("/old/a", 0, 10)], prefetched: [Self.chunk(2, 20).id])
        #expect(
            plan.sourcing.steps == [
                .init(chunk: Self.chunk(1), file: 0, offset: 0, sources: [.local(path: "/old/a", offset: 0)]),
                .init(chunk: Self.chunk(2, 20), file: 0, offset: 10, sources: [.prefetched]),
                .init(chunk: Self.chunk(2, 20), file: 2, offset: 0, sources: [.prefetched])
            ])
        #expect(plan.sourcing.downloads(failed: []).isEmpty)
        // Both places of chunk 2 fall through: one download writes both.
        let order = plan.sourcing.downloads(failed: [1, 2])
        #expect(order.map(\.chunk) == [Self.chunk(2, 20)])
        #expect(order[0].targets == [.init(file: 0, offset: 10), .init(file: 2, offset: 0)])
        // With nothing on disk, every chunk is downloaded once.
        #expect(Self.plan(manifest).sourcing.downloads(failed: []).map(\.chunk) == [Self.chunk(1), Self.chunk(2, 20)])
    }

    @Test func aPackageOfManyFilesIsMadeDurableByOneSyncfs() {
        let many = PullEngine.syncWholeFileSystemFrom
        #expect(PullPlanner.Durability(package: true, files: many).wholeFileSystem)
        #expect(!PullPlanner.Durability(package: true, files: many - 1).wholeFileSystem)
        #expect(!PullPlanner.Durability(package: false, files: many * 10).wholeFileSystem, "a file: fsyncs")

        let fsyncs = PullPlanner.Durability(package: true, files: 1)
        #expect(fsyncs.startsWriteback(size: 1), "every file's writeback starts, its fsync waits on it")
        #expect(!fsyncs.finishesOnLastWrite(mode: 0o644), "finished with its fsync")

        let syncfs = PullPlanner.Durability(package: true, files: many)
        #expect(!syncfs.startsWriteback(size: PullEngine.writebackFrom - 1), "a small file is left to the syncfs")
        #expect(syncfs.startsWriteback(size: PullEngine.writebackFrom))
        #expect(syncfs.finishesOnLastWrite(mode: 0o644))
        #expect(syncfs.finishesOnLastWrite(mode: 0o4600), "setuid never travels; the owner can write")
        #expect(!syncfs.finishesOnLastWrite(mode: 0o444), "a read-only file gets its mode at the end")
        #expect(!syncfs.finishesOnLastWrite(mode: 0o200))
    }

    @Test func ignoredFilesAreCarriedIntoAPackageOverADirectoryUnlessForced() throws {
        let manifest = try Self.package()
        #expect(Self.plan(manifest).carriesIgnoredFiles(destinationIsDirectory: true))
        #expect(!Self.plan(manifest).carriesIgnoredFiles(destinationIsDirectory: false))
        #expect(!Self.plan(manifest, force: true).carriesIgnoredFiles(destinationIsDirectory: true))
    }
}
