import Foundation
import Testing
import XferCore

@testable import XferClient

@Suite("SegmentChunkCache")
struct SegmentChunkCacheTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("segments-\(UUID().uuidString)").path

    static func chunk(_ seed: Int, size: Int = 4096) -> (EncodedChunk, [UInt8]) {
        var generator = SplitMix64(seed: UInt64(seed))
        let plain = (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
        let chunk = try! plain.withUnsafeBytes {
            try ChunkCodec.plain.encode($0, id: ChunkID.of(plain), policy: .default)
        }
        return (chunk, plain)
    }

    @Test("kept chunks come back checked; chunks not kept do not")
    func roundTrip() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try SegmentChunkCache(directory: directory, maximumBytes: 1 << 20)
        let kept = (0..<10).map { Self.chunk($0) }
        try cache.keep(kept.map(\.0))
        try cache.keep(kept.map(\.0))  // again: nothing new written
        let other = Self.chunk(99)
        let found = try cache.plain(kept.map(\.0.id) + [other.0.id], codec: .plain)
        #expect(found.count == 10)
        for (chunk, plain) in kept { #expect(found[chunk.id] == plain) }
        let usage = try cache.usage()
        #expect(usage.chunks == 10 && usage.bytes == Int64(kept.reduce(0) { $0 + $1.0.payload.count }))
        // Another opening of the same directory (a later mount) finds them.
        let reopened = try SegmentChunkCache(directory: directory, maximumBytes: 1 << 20)
        #expect(try reopened.plain(kept.map(\.0.id), codec: .plain).count == 10)
    }

    @Test("the least recently used segments go once the cache passes its bound")
    func eviction() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try SegmentChunkCache(directory: directory, maximumBytes: 64 << 10, segmentBytes: 16 << 10)
        let first = (0..<4).map { Self.chunk($0) }
        try cache.keep(first.map(\.0))
        let used = first[0]
        for batch in 1..<12 {
            _ = try cache.plain([used.0.id], codec: .plain)  // the first segment stays in use
            try cache.keep((0..<4).map { Self.chunk(batch * 10 + $0).0 })
            #expect(try cache.usage().bytes <= (64 << 10) + (16 << 10))
        }
        #expect(try cache.plain([used.0.id], codec: .plain)[used.0.id] == used.1)
        #expect(try cache.plain([Self.chunk(11).0.id], codec: .plain).isEmpty)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".seg") }
        #expect(files.count <= 6)
    }

    @Test("a chunk whose bytes on disk are damaged or gone is dropped, not returned")
    func damage() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try SegmentChunkCache(directory: directory, maximumBytes: 1 << 20)
        let (chunk, _) = Self.chunk(5)
        try cache.keep([chunk])
        let segment = try #require(
            try FileManager.default.contentsOfDirectory(atPath: directory).first { $0.hasSuffix(".seg") })
        let handle = try #require(FileHandle(forUpdatingAtPath: directory + "/" + segment))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 64))
        try handle.close()
        #expect(try cache.plain([chunk.id], codec: .plain).isEmpty)
        #expect(try cache.usage().chunks == 0)
    }

    @Test("pinned chunks stay whatever is read after them, outside the bound, until unpinned")
    func pinning() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try SegmentChunkCache(directory: directory, maximumBytes: 32 << 10, segmentBytes: 8 << 10)
        let held = Self.chunk(1)
        let absent = Self.chunk(2)
        try cache.keep([held.0])
        let missing = try cache.pin("doc", version: 3, chunks: [held.0.id, absent.0.id])
        #expect(missing == [absent.0.id])
        try cache.keep([absent.0], pinned: true)
        #expect(try cache.pins() == ["doc": 3])
        for batch in 10..<30 { try cache.keep((0..<2).map { Self.chunk(batch * 10 + $0).0 }) }
        #expect(try cache.usage().bytes <= (32 << 10) + (8 << 10))
        #expect(try cache.plain([held.0.id, absent.0.id], codec: .plain).count == 2)
        #expect(try cache.unpin("doc") && !(try cache.unpin("doc")))
        for batch in 30..<50 { try cache.keep((0..<2).map { Self.chunk(batch * 10 + $0).0 }) }
        #expect(try cache.plain([held.0.id, absent.0.id], codec: .plain).isEmpty)
    }

    @Test("a kept manifest is found by name and version; an older one does not replace a newer")
    func manifests() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try SegmentChunkCache(directory: directory, maximumBytes: 1 << 20)
        try cache.keepManifest("a", version: 2, bytes: [2])
        try cache.keepManifest("a", version: 1, bytes: [1])
        #expect(try cache.manifest("a", version: 2) == [2])
        #expect(try cache.manifest("a", version: 1) == nil)
    }
}
