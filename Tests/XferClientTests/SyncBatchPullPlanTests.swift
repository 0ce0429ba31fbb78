import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// The pure half of a batch pull (``BatchPullDecisions``) and of a container's check
/// (``ContainerVerify/Wanted``).
@Suite struct SyncBatchPullPlanTests {
    static func chunk(_ byte: UInt8, _ length: Int = 10) -> Manifest.ChunkReference {
        PushDecisionsTests.chunk(byte, length)
    }

    static func manifest(_ chunks: [Manifest.ChunkReference]) throws -> Manifest {
        try Manifest(
            kind: .file, chunker: .default,
            entries: [Manifest.Entry(path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: chunks)])
    }

    @Test func aBatchAsksForEachChunkNoLocalFileHoldsOnceCountedForItsFirstDocument() throws {
        let (a, b, c, d) = (Self.chunk(1), Self.chunk(2, 20), Self.chunk(3), Self.chunk(4))
        let manifests = [
            5: try Self.manifest([c, a]),
            2: try Self.manifest([a, b, a]),
            9: try Self.manifest([d])
        ]
        let wanted = BatchPullDecisions.wanted(manifests, local: [d.id: "on disk"])
        #expect(wanted.order == [a.id, b.id, c.id], "by document number, each once, none held here")
        #expect(wanted.lengths == [a.id: 10, b.id: 20, c.id: 10])
        #expect(wanted.chargedTo == [a.id: 2, b.id: 2, c.id: 5])
        #expect(BatchPullDecisions.wanted([:], local: [ChunkID: Int]()) == BatchPullDecisions.Wanted())
    }

    @Test func directoriesAndDocumentsWithoutAManifestArePulledAloneFirst() {
        let split = BatchPullDecisions.split(5, kinds: [0: .file, 1: .directory, 3: .package, 4: .file])
        #expect(split.alone == [1, 2])
        #expect(split.together == [0, 3, 4])
        #expect(BatchPullDecisions.used([0, 3, 4], succeeded: { $0 != 3 }) == [0, 4], "in the batch's order")
    }

    @Test func aVerifyAsksForEachChunkOnceNamingAFewOfItsDocuments() {
        let (a, b) = (Self.chunk(1), Self.chunk(2))
        var wanted = ContainerVerify.Wanted()
        #expect(wanted.add([a, b, a], of: "x").isEmpty)
        #expect(wanted.chunks[a.id]?.documents == ["x"], "a document named once for its chunk")
        for name in ["y", "z", "w"] { #expect(wanted.add([a], of: name).isEmpty) }
        #expect(wanted.chunks[a.id]?.documents == ["x", "y", "z"], "at most three")
        let problems = wanted.add([Self.chunk(2, 11)], of: "v")
        #expect(problems.count == 1 && problems[0].contains("another of 10"))
        #expect(wanted.chunks[b.id]?.length == 10 && wanted.chunks[b.id]?.documents == ["x"], "the first length stays")
    }
}
