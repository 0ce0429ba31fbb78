import Testing
import XferCore

@testable import XferClient

/// The pure half of a pull: where each chunk comes from, decided without touching a disk.
@Suite struct ChunkSourcingTests {
    /// Files with these chunk lists, as a pull reads them: from a manifest's entries.
    static func files(_ lists: [[Manifest.ChunkReference]]) -> FileChunks {
        let manifest = try! Manifest(
            kind: .package, chunker: .default,
            entries: lists.enumerated().map { index, chunks in
                .init(path: "f\(index)", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: chunks)
            })
        return FileChunks(manifest.entries, entryIndexes: SpillArray(manifest.entries.indices))
    }

    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        Manifest.ChunkReference(id: ChunkID.of([byte]), length: length)
    }

    @Test func eachPlaceTriesTheStagingCopyThenADiskThenTheBatch() {
        let a = Self.chunk(1)
        let b = Self.chunk(2, 20)
        let c = Self.chunk(3)
        let plan = ChunkSourcing.make(
            files: Self.files([[a, b], [c]]), resuming: true, local: [b.id: ("/x/old.bin", 100, 20)], prefetched: [c.id]
        )
        #expect(
            plan.steps == [
                .init(chunk: a, file: 0, offset: 0, sources: [.staging]),
                .init(chunk: b, file: 0, offset: 10, sources: [.staging, .local(path: "/x/old.bin", offset: 100)]),
                .init(chunk: c, file: 1, offset: 0, sources: [.staging, .prefetched])
            ])
        // A place only the server has is no step: it is downloaded.
        let fresh = ChunkSourcing.make(
            files: Self.files([[a, b]]), resuming: false, local: [b.id: ("/x/old.bin", 100, 20)], prefetched: [])
        #expect(
            fresh.steps == [.init(chunk: b, file: 0, offset: 10, sources: [.local(path: "/x/old.bin", offset: 100)])])
        #expect(fresh.downloads(failed: []).map(\.chunk) == [a])
        #expect(fresh.downloads(failed: [0]).map(\.chunk) == [a, b])
    }

    @Test func aChunkThatNoSourceYieldsIsDownloadedOnceForEveryPlaceItGoes() {
        let a = Self.chunk(1)
        let b = Self.chunk(2)
        // a three times (twice in the first file), b once.
        let plan = ChunkSourcing.make(files: Self.files([[a, b, a], [a]]), resuming: false, local: [:], prefetched: [])
        let order = plan.downloads(failed: Array(plan.steps.indices))
        #expect(order.map(\.chunk) == [a, b])
        #expect(order[0].targets.map { [Int64($0.file), $0.offset] } == [[0, 0], [0, 20], [1, 0]])
        #expect(order[1].targets.map { [Int64($0.file), $0.offset] } == [[0, 10]])
        #expect(order[1].more.isEmpty, "one place: held inline")
        // What a source yielded is not downloaded.
        let resumed = ChunkSourcing.make(
            files: Self.files([[a, b, a], [a]]), resuming: true, local: [:], prefetched: [])
        #expect(resumed.steps.count == 4)
        #expect(resumed.downloads(failed: [1]).map(\.chunk) == [b])
        #expect(
            resumed.downloads(failed: [2, 3]).map { $0.targets.map { [Int64($0.file), $0.offset] } } == [
                [[0, 20], [1, 0]]
            ])
        #expect(resumed.downloads(failed: []).isEmpty)
    }

    @Test func theDownloadsCountTheFilesTheyWrite() {
        // 70 files of one chunk each, all downloaded: 70 files written.
        let many = (0..<70).map { [Self.chunk(UInt8($0))] }
        let all = ChunkSourcing.make(files: Self.files(many), resuming: false, local: [:], prefetched: [])
            .downloads(failed: [])
        #expect(all.writeFiles(atLeast: 64) && all.writeFiles(atLeast: 70) && !all.writeFiles(atLeast: 71))
        // The same package with all but one file on disk: one file written, however many chunks.
        let local = Dictionary(
            uniqueKeysWithValues: (1..<70).map { (Self.chunk(UInt8($0)).id, ("/x/\($0)", Int64(0), 10)) })
        let big = (0..<5).map { Self.chunk(200 + UInt8($0)) }
        let edit = ChunkSourcing.make(
            files: Self.files([big] + many.dropFirst()), resuming: false, local: local, prefetched: []
        )
        .downloads(failed: [])
        #expect(edit.count == 5)
        #expect(edit.writeFiles(atLeast: 1) && !edit.writeFiles(atLeast: 2))
        // A file made only of chunks an earlier file holds is not counted (a lower bound).
        let a = Self.chunk(1)
        let repeated = ChunkSourcing.make(files: Self.files([[a], [a]]), resuming: false, local: [:], prefetched: [])
            .downloads(failed: [])
        #expect(repeated.writeFiles(atLeast: 1) && !repeated.writeFiles(atLeast: 2))
        // Downloaded files apart from each other (the one between them on disk) are each counted.
        let apart = ChunkSourcing.make(
            files: Self.files([[Self.chunk(1)], [Self.chunk(2)], [Self.chunk(3)]]), resuming: false,
            local: [Self.chunk(2).id: ("/x/2", 0, 10)], prefetched: []
        ).downloads(failed: [])
        #expect(apart.count == 2 && apart.writeFiles(atLeast: 2) && !apart.writeFiles(atLeast: 3))
        let empty = ChunkSourcing.make(files: Self.files([]), resuming: false, local: [:], prefetched: []).downloads(
            failed: [])
        #expect(empty.writeFiles(atLeast: 0) && !empty.writeFiles(atLeast: 1))
    }

    @Test func chunksSharingTheirFirst64BitsAreStillTwoDownloads() {
        // Two ids alike in their first 8 bytes (the planner keys by those first).
        let x = Manifest.ChunkReference(
            id: ChunkID(bytes: [UInt8](repeating: 7, count: 8) + [UInt8](repeating: 1, count: 24))!, length: 10)
        let y = Manifest.ChunkReference(
            id: ChunkID(bytes: [UInt8](repeating: 7, count: 8) + [UInt8](repeating: 2, count: 24))!, length: 10)
        let plan = ChunkSourcing.make(files: Self.files([[x, y, x], [y]]), resuming: false, local: [:], prefetched: [])
        let order = plan.downloads(failed: Array(plan.steps.indices))
        #expect(order.map(\.chunk) == [x, y])
        #expect(order[0].targets.map { [Int64($0.file), $0.offset] } == [[0, 0], [0, 20]])
        #expect(order[1].targets.map { [Int64($0.file), $0.offset] } == [[0, 10], [1, 0]])
    }

    @Test func prefixPositionsFindWhatWasSetAndNothingElse() {
        // Keys that share their low bits, zero among them, and a table filled to what it was made for.
        let keys: [UInt64] =
            (0..<5_000).map { UInt64($0) << 32 } + (1..<3_000).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
        var positions = PrefixPositions(capacity: keys.count)
        for (position, key) in keys.enumerated() { positions[key] = position }
        for (position, key) in keys.enumerated() { #expect(positions[key] == position) }
        #expect(positions[1] == nil && positions[UInt64.max] == nil && positions[5_000 << 32] == nil)
    }
}
