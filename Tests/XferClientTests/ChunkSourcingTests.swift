import Testing
import XferCore
@testable import XferClient

/// The pure half of a pull: where each chunk comes from, decided without touching a disk.
@Suite struct ChunkSourcingTests {
    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        Manifest.ChunkReference(id: ChunkID.of([byte]), length: length)
    }

    @Test func eachPlaceTriesTheStagingCopyThenADiskThenTheBatch() {
        let a = Self.chunk(1), b = Self.chunk(2, 20), c = Self.chunk(3)
        let plan = ChunkSourcing.make(files: [[a, b], [c]], resuming: true, local: [b.id: ("/x/old.bin", 100, 20)], prefetched: [c.id])
        #expect(plan.steps == [
            .init(chunk: a, file: 0, offset: 0, sources: [.staging]),
            .init(chunk: b, file: 0, offset: 10, sources: [.staging, .local(path: "/x/old.bin", offset: 100)]),
            .init(chunk: c, file: 1, offset: 0, sources: [.staging, .prefetched]),
        ])
        let fresh = ChunkSourcing.make(files: [[a]], resuming: false, local: [:], prefetched: [])
        #expect(fresh.steps == [.init(chunk: a, file: 0, offset: 0, sources: [])])
    }

    @Test func aChunkThatNoSourceYieldsIsDownloadedOnceForEveryPlaceItGoes() {
        let a = Self.chunk(1), b = Self.chunk(2)
        // a three times (twice in the first file), b once.
        let plan = ChunkSourcing.make(files: [[a, b, a], [a]], resuming: false, local: [:], prefetched: [])
        let (order, targets) = plan.downloads(failed: Array(plan.steps.indices))
        #expect(order.map(\.id) == [a.id, b.id])
        #expect(targets[a.id]?.map { [Int64($0.file), $0.offset] } == [[0, 0], [0, 20], [1, 0]])
        #expect(targets[b.id]?.map { [Int64($0.file), $0.offset] } == [[0, 10]])
        // What a source yielded is not downloaded.
        let some = plan.downloads(failed: [1])
        #expect(some.order.map(\.id) == [b.id] && some.targets[a.id] == nil)
    }
}
