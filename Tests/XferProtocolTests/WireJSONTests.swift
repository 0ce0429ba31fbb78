import Foundation
import Testing
import XferCore
import XferProtocol

@Suite struct WireJSONTests {
    /// Base64 written straight into a buffer is Foundation's, for every length's padding.
    @Test func base64IntoABufferIsStandardBase64() throws {
        var generator = SystemRandomNumberGenerator()
        for count in Array(0...70) + [1_000, 65_537] {
            let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
            var out: [UInt8] = Array("prefix".utf8)
            Base64.append(bytes, to: &out)
            #expect(out.count == 6 + Base64.encodedCount(count))
            #expect(String(decoding: out.dropFirst(6), as: UTF8.self) == Data(bytes).base64EncodedString())
            #expect(try Base64.decode(String(decoding: out.dropFirst(6), as: UTF8.self)) == bytes)
        }
    }

    /// A commit's body with its delta written in is the same JSON as the request encoded with
    /// the delta inside, and decodes to it, whatever its path holds.
    @Test func aCommitBodyWithItsDeltaWrittenInIsTheRequestsJSON() throws {
        for name in ["notes.txt", #"Documents/"manifest_delta":"" \ odd"#, "Documents/é 📄"] {
            let delta = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let request = CommitRequest(
                path: try DocumentPath(name), version: 3, baseVersion: 2, deltaBase: 2,
                manifestDelta: delta, manifestDigest: ChunkID.of([1, 2, 3]))
            let body = CommitRequest(
                path: try DocumentPath(name), version: 3, baseVersion: 2, deltaBase: 2,
                manifestDelta: [9, 9], manifestDigest: ChunkID.of([1, 2, 3])
            ).body(delta: delta)
            #expect(Array(body) == WireJSON.encode(request))
            let decoded = try WireJSON.decode(CommitRequest.self, from: body)
            let carried = try Base64.decode(decoded.manifestDelta)
            #expect(decoded == request && carried == delta)
        }
    }
}
