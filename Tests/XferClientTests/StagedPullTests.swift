import Foundation
import Hummingbird
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// A pull of many files builds its staging copy file by file (each created by its first chunk,
/// finished by its last): a download that stops half way leaves a copy the next pull resumes,
/// and a server that sends a chunk twice publishes nothing.
@Suite struct StagedPullTests {
    /// The files of a package, a plain chunk each, and their frames as a server sends them.
    static func package(_ root: String, count: Int) throws -> [(path: String, bytes: [UInt8], mode: Int)] {
        try (0..<count).map { index in
            let path = "d\(index % 5)/f\(index)"
            let bytes = Files.random(count: 300 + index * 7, seed: UInt64(index) + 50)
            let mode = index % 2 == 0 ? 0o444 : 0o644
            try Files.write(root + "/" + path, bytes, mode: mode)
            return (path, bytes, mode)
        }
    }

    static func frames(_ files: ArraySlice<(path: String, bytes: [UInt8], mode: Int)>) throws -> [UInt8] {
        ChunkFrames.encode(
            try files.map { file in try file.bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(file.bytes)) } }
        )
    }

    static func answer(_ body: [UInt8]) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/octet-stream"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// A live server whose downloads are answered with the bytes `answer` holds while it holds
    /// some (and served as usual while it holds `nil`).
    static func withDownloadsAnswered(_ body: @escaping @Sendable (LiveServer, Locked<[UInt8]?>) async throws -> Void)
        async throws
    {
        let answer = Locked<[UInt8]?>(nil)
        try await LiveServer.run(intercept: { request in
            guard request.method == .post, request.uri.path == "/v1/chunks/download", let bytes = answer.value else {
                return nil
            }
            return Self.answer(bytes)
        }) { server in try await body(server, answer) }
    }

    /// The download breaks after 10 of 70 chunks: the files finished meanwhile that their owner
    /// may not write (0444) still are writable in the staging copy, and the next pull resumes
    /// from it and gives every file its content, mode and time.
    @Test(LiveServer.plainOnly("forges plain chunk frames")) func aPullThatStopsHalfWayIsResumedWithReadOnlyFiles()
        async throws
    {
        try await Self.withDownloadsAnswered { server, breaking in
            let source = server.root + "/src"
            let files = try Self.package(source, count: 70)
            _ = try await server.push(source, "pkg")
            breaking.withLock { $0 = try? Self.frames(files.prefix(10)) }
            let reader = server.otherDevice("reader")
            await #expect(throws: XferError.self) {
                _ = try await server.pull("pkg", server.root + "/copy", from: reader)
            }
            #expect(!FileManager.default.fileExists(atPath: server.root + "/copy"))
            let staging = try FileManager.default.contentsOfDirectory(atPath: server.root).filter {
                $0.hasSuffix(".partial")
            }
            #expect(staging.count == 1)
            for file in files.prefix(10) {
                let info = try FileManager.default.attributesOfItem(
                    atPath: server.root + "/" + staging[0] + "/" + file.path)
                let mode = (info[.posixPermissions] as? Int) ?? -1
                #expect(mode & 0o600 == 0o600, "\(file.path) is \(String(mode, radix: 8)) in the staging copy")
            }

            breaking.withLock { $0 = nil }
            let resumed = try await server.pull("pkg", server.root + "/copy", from: reader)
            #expect(resumed.chunksReused >= 10, "the staged chunks are used again")
            #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(source))
        }
    }

    /// A server that answers a download with one chunk twice and another never gets nothing
    /// published: every asked chunk must come, once.
    @Test(LiveServer.plainOnly("forges plain chunk frames")) func aChunkSentTwiceInsteadOfAnotherPublishesNothing()
        async throws
    {
        try await Self.withDownloadsAnswered { server, body in
            let source = server.root + "/src"
            let files = try Self.package(source, count: 70)
            _ = try await server.push(source, "pkg")
            // Chunk 0 in the place of chunk 1: as many frames as asked for, one of them twice.
            var doubled = Array(files)
            doubled[1] = doubled[0]
            body.withLock { $0 = try? Self.frames(doubled[...]) }
            await #expect {
                _ = try await server.pull("pkg", server.root + "/copy", from: server.otherDevice("reader"))
            } throws: { error in
                (error as? XferError)?.code == .corruptChunk
            }
            #expect(!FileManager.default.fileExists(atPath: server.root + "/copy"))
        }
    }
}
