import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// What verification finds wrong in one stored manifest, chunk record or account, decided
/// without a store (SealedStoreTests and the CLI's verify tests run it whole).
@Suite struct VerifyChecksTests {
    static func stored(_ encoded: [UInt8], digest: [UInt8]?) -> StoredManifest {
        StoredManifest(
            key: StoredVersionKey(document: 1, version: 3), account: 9, container: "box", path: "Documents/a",
            state: "current", encoded: encoded, digest: digest)
    }

    @Test func aManifestIsCheckedAgainstItsDigestAndItsChunks() throws {
        let (x, y, z) = (MetadataStoreTests.chunk(1), MetadataStoreTests.chunk(2), MetadataStoreTests.chunk(3))
        let (_, encoded) = try MetadataStoreTests.manifest([x, y, z, x])
        let digest = ChunkID.of(encoded).bytes
        let whole = try Maintenance.manifestCheck(
            Self.stored(encoded, digest: digest), intact: [x.id, y.id, z.id], damaged: [])
        #expect(whole.problems.isEmpty)
        #expect(whole.uses == [x.id, y.id, z.id], "each chunk once, however often it is used")
        let broken = try Maintenance.manifestCheck(Self.stored(encoded, digest: nil), intact: [x.id], damaged: [y.id])
        #expect(
            Set(broken.problems) == [
                "box/Documents/a version 3: chunk \(y.id.hex) is corrupt",
                "box/Documents/a version 3: chunk \(z.id.hex) is missing"
            ])
        #expect(broken.uses.count == 3, "a damaged chunk is still referenced")
        let moved = try Maintenance.manifestCheck(
            Self.stored(encoded, digest: Array(repeating: 0, count: 32)), intact: [x.id, y.id, z.id], damaged: [])
        #expect(moved.problems == ["box/Documents/a version 3: the manifest does not match its recorded digest"])
    }

    @Test func aManifestThatDoesNotDecodeUsesNothing() throws {
        let check = try Maintenance.manifestCheck(Self.stored([1, 2, 3], digest: [1]), intact: [], damaged: [])
        #expect(check.uses.isEmpty)
        #expect(check.problems.count == 2)
        #expect(check.problems[0].hasSuffix("does not match its recorded digest"))
        #expect(check.problems[1].hasPrefix("box/Documents/a version 3: the manifest does not decode: "))
    }

    @Test func recordsAndAccountsAreComparedWithWhatTheyCount() {
        let row = ChunkRecordRow(account: 4, id: ChunkID.of([1]), length: 10, refs: 2)
        #expect(Maintenance.recordProblem(row, expected: 2) == nil)
        #expect(Maintenance.recordProblem(row, expected: 1)?.contains("counts 2 references, but 1 committed") == true)
        let even = AccountUsage(id: 1, name: "ann", used: 5, held: 5, versionBytes: 7, versionBytesKept: 7)
        #expect(Maintenance.usageProblems(even).isEmpty)
        var off = even
        off.held = 4
        off.versionBytesKept = 8
        #expect(
            Maintenance.usageProblems(off) == [
                "account ann: records 5 bytes used, but holds 4",
                "account ann: records 7 bytes of version records, but its versions cost 8"
            ])
    }
}
