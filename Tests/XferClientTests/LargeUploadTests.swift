import Foundation
import Testing
import XferCore
import XferProtocol
import XferServer

@testable import XferClient

/// Large upload bodies (``ServerFeature/largeUploads``): a server that offers them reads up to
/// 16,384 frames in a body sent while it is made; one that does not still gets bodies of 1,024.
@Suite struct LargeUploadTests {
    static func chunks(_ count: Int, seed: UInt64) throws -> [EncodedChunk] {
        try (0..<count).map { index in
            let bytes = Files.random(count: 64 + index % 50, seed: seed &+ UInt64(index))
            return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes)) }
        }
    }

    /// A body of more than 1,024 frames, sent in pieces: stored whole by a server that offers
    /// large uploads, refused (`too_large`) by one that does not, which stores none of it.
    @Test func moreThan1024FramesGoInOneBodyOnlyWhereOffered() async throws {
        let chunks = try Self.chunks(1_500, seed: 1)
        let body = ChunkFrames.encode(chunks)
        try await LiveServer.run { server in
            #expect(await server.remote.connection.features().contains(.largeUploads))
            let pieces = Locked([Array(body[0..<1_000]), Array(body[1_000..<40_000]), Array(body[40_000...])])
            let result = try await server.remote.connection.upload(pieces: {
                pieces.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            })
            #expect(result.received == 1_500 && result.stored == 1_500)
            #expect(try await server.remote.connection.missing(chunks.map(\.id)).isEmpty)
        }
        var limits = ServerLimits()
        limits.features.remove(.largeUploads)
        try await LiveServer.run(limits: limits) { server in
            #expect(await !server.remote.connection.features().contains(.largeUploads))
            await #expect(throws: XferError.self) { _ = try await server.remote.connection.upload(frames: body) }
            #expect(try await server.remote.connection.missing(chunks.map(\.id)).count == 1_500)
            let first = try await server.remote.connection.upload(
                frames: ChunkFrames.encode(Array(chunks.prefix(1_024))))
            #expect(first.stored == 1_024)
        }
    }

    /// An error the body's maker throws (a file shorter than when it was chunked) ends the
    /// request and comes back as itself, not as a broken connection.
    @Test func anErrorMakingTheBodyIsThrownAsItself() async throws {
        try await LiveServer.run { server in
            let chunks = try Self.chunks(10, seed: 2)
            let sent = Locked(0)
            await #expect {
                _ = try await server.remote.connection.upload(pieces: {
                    try sent.withLock { count in
                        count += 1
                        if count == 1 { return ChunkFrames.encode(chunks) }
                        throw XferError(.io, "the file changed while it was being pushed")
                    }
                })
            } throws: { error in
                (error as? XferError)?.code == .io
            }
        }
    }

    /// A push of more small files than one small body holds, to a server with and without large
    /// uploads: every file arrives, and a server with them gets fewer requests (after the first
    /// `uploadsInFlight`, which are small so every upload starts at once).
    @Test func aPushOfManySmallFilesArrivesWholeEitherWay() async throws {
        for offered in [true, false] {
            var limits = ServerLimits()
            if !offered { limits.features.remove(.largeUploads) }
            let uploads = Locked(0)
            try await LiveServer.run(
                limits: limits,
                intercept: { request in
                    if request.method == .post && request.uri.path == "/v1/chunks" { uploads.withLock { $0 += 1 } }
                    return nil
                }
            ) { server in
                let source = server.root + "/many"
                for index in 0..<2_100 {
                    try Files.write(
                        source + "/d\(index % 10)/f\(index)", Files.random(count: 40 + index % 200, seed: UInt64(index))
                    )
                }
                var options = PushOptions()
                options.uploadsInFlight = 1
                options.largeUploadFrames = 2_048
                let pushed = try await PushEngine(remote: server.remote, options: options).push(
                    source, as: try DocumentPath("many"))
                #expect(pushed.chunksSent == 2_100)
                _ = try await server.pull("many", server.root + "/copy", from: server.otherDevice("b"))
                #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(source))
            }
            // 1,024 chunks, then up to 2,048 a request where offered (2 requests); 1,024 each where not (3);
            // end to end, one more for the sealed manifest's pieces.
            #expect(
                uploads.value == (offered ? 2 : 3) + (LiveServer.endToEnd ? 1 : 0), "\(uploads.value) upload requests")
        }
    }
}
