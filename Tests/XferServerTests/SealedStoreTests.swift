import Foundation
import Testing
import XferCore
@testable import XferServer

/// Chunks and manifests sealed at rest (`xfer serve --encryption-key`): what the packs hold,
/// what a damaged pack gives, data from before the keys, and the keys a data directory
/// refuses to open with.
@Suite struct SealedStoreTests {
    /// Incompressible chunks (stored as they are), so a plain pack would show their bytes.
    static func rawChunks(_ count: Int, seed: UInt64) throws -> [EncodedChunk] {
        var generator = SplitMix64(seed: seed)
        return try (0..<count).map { _ in
            let bytes = (0..<20_000).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes), policy: .default) }
        }
    }

    /// Every pack's bytes, concatenated.
    static func packBytes(_ store: PackedChunkStore) async throws -> Data {
        var all = Data()
        for object in try await store.storage.list() {
            all.append(contentsOf: try #require(try await store.storage.get(object.name, limit: Int(object.size))))
        }
        return all
    }

    /// Which of the chunks' ids or leading 64 plain bytes appear in `bytes`.
    static func revealed(_ chunks: [EncodedChunk], in bytes: Data) -> Int {
        chunks.filter { chunk in
            bytes.range(of: Data(chunk.id.bytes)) != nil || bytes.range(of: Data(chunk.payload.prefix(64))) != nil
        }.count
    }

    @Test(arguments: PackedChunkStoreTests.storages)
    func sealedPacksShowNoPlainBytesOrIDsAndReadBack(_ kind: String) async throws {
        let chunks = try Self.rawChunks(12, seed: 1)
        #expect(chunks.allSatisfy { $0.encoding == .raw })
        // The check can fail: a plain store shows every id and every chunk's bytes.
        try await PackedChunkStoreTests.withStore(kind) { plain in
            _ = try await plain.store(chunks)
            #expect(Self.revealed(chunks, in: try await Self.packBytes(plain)) == chunks.count)
        }
        try await PackedChunkStoreTests.withStore(kind) { store in
            var store = store
            store.sealing = try SealingKeys([SealingKey.generate()])
            #expect(try await store.store(chunks).allSatisfy { $0 == nil })
            #expect(Self.revealed(chunks, in: try await Self.packBytes(store)) == 0)
            #expect(try await store.load(chunks.map(\.id)) == chunks)
            #expect(try await store.verify(chunks[3].id) == 20_000)

            // A flipped byte in a pack: the chunk it hits is refused, and says where it is.
            let object = try #require(try await store.storage.list().first)
            var bytes = try #require(try await store.storage.get(object.name, limit: Int(object.size)))
            bytes[bytes.count / 2] ^= 0x01
            try await store.storage.put(object.name, bytes)
            let located = try await store.index.locations(chunks.map(\.id))
            let hit = try #require(located.first { $0.pack == object.name && $0.offset <= Int64(bytes.count / 2)
                    && Int64(bytes.count / 2) < $0.offset + Int64($0.length) })
            let error = await #expect(throws: XferError.self) { _ = try await store.load(hit.id) }
            #expect(error?.code == .corruptChunk)
            #expect(error?.message.contains(object.name) == true)
        }
    }

    @Test func chunksStoredBeforeTheKeysStayReadableAndSealedOnesNeedTheirKey() async throws {
        let before = try Self.rawChunks(3, seed: 2)
        let after = try Self.rawChunks(3, seed: 3)
        try await PackedChunkStoreTests.withStore("files") { plain in
            _ = try await plain.store(before)
            var sealed = plain
            let old = SealingKey.generate()
            sealed.sealing = try SealingKeys([old])
            _ = try await sealed.store(after)
            #expect(try await sealed.load((before + after).map(\.id)) == before + after)
            // Without keys the sealed chunks are refused by name of the key; the plain ones read.
            #expect(try await plain.load(before.map(\.id)) == before)
            let refused = await #expect(throws: XferError.self) { _ = try await plain.load(after[0].id) }
            #expect(refused?.code == .invalidConfiguration)
            #expect(refused?.message.contains(old.id.description) == true)
            // Rotated: the new key seals from now on, the old one still opens.
            var rotated = plain
            let new = SealingKey.generate()
            rotated.sealing = try SealingKeys([new, old])
            let later = try Self.rawChunks(2, seed: 4)
            _ = try await rotated.store(later)
            #expect(try await rotated.load((before + after + later).map(\.id)) == before + after + later)
            await #expect(throws: XferError.self) { _ = try await sealed.load(later[0].id) }
            // A compaction rewrites a sparse pack under the current key.
            _ = try await rotated.index.removeLocations([after[0].id, after[1].id])
            let report = try await rotated.compact(modifiedBefore: PackedChunkStoreTests.future())
            #expect(report.packsRewritten >= 1)
            var current = plain
            current.sealing = try SealingKeys([new])
            #expect(try await current.load(after[2].id) == after[2])
        }
    }

    @Test func aDataDirectoryOpensOnlyWithEveryKeyItsDataNeeds() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-sealed-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = SealingKey.generate()
        let b = SealingKey.generate()
        let first = try await ServerData.open(directory, sealing: try SealingKeys([a]))
        #expect(try await first.metadata.sealingKeys() == [a.id])

        let none = await #expect(throws: XferError.self) { _ = try await ServerData.open(directory) }
        #expect(none?.code == .invalidConfiguration)
        #expect(none?.message.contains(a.id.description) == true)
        let other = await #expect(throws: XferError.self) { _ = try await ServerData.open(directory, sealing: try SealingKeys([b])) }
        #expect(other?.message.contains(a.id.description) == true)
        #expect(try await first.metadata.sealingKeys() == [a.id], "a refused open records nothing")

        let rotated = try await ServerData.open(directory, sealing: try SealingKeys([b, a]))
        #expect(try await rotated.metadata.sealingKeys() == [a.id, b.id].sorted())
        // Now data may be sealed with b: a alone is refused too.
        let old = await #expect(throws: XferError.self) { _ = try await ServerData.open(directory, sealing: try SealingKeys([a])) }
        #expect(old?.message.contains(b.id.description) == true)
    }
}
