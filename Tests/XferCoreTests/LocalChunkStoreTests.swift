import Dispatch
import Testing
import XferCore

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct LocalChunkStoreTests {
    @Test func putGetAndDedup() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path + "/chunks")
        let text = TestData.text(count: 70_000, seed: 1)
        let random = TestData.random(count: 70_000, seed: 2)
        let textID = try store.put(plain: text)
        let randomID = try store.put(plain: random)
        #expect(store.contains(textID) && store.contains(randomID))
        #expect(try store.read(textID) == text)
        #expect(try store.read(randomID) == random)
        #expect(try store.get(textID).encoding == .zstd)
        #expect(try store.get(randomID).encoding == .raw)
        #expect(try store.put(try store.get(textID)) == false)  // already there
        #expect(Set(try store.allIDs()) == [textID, randomID])
        try store.remove(textID)
        #expect(!store.contains(textID))
        #expect { try store.read(textID) } throws: { ($0 as? XferError)?.code == .notFound }
    }

    @Test func refusesChunksThatDoNotMatchTheirIdAndStoresNothing() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path)
        let data = TestData.text(count: 5000, seed: 3)
        var chunk = try data.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(data)) }
        chunk.id = ChunkID.of([1, 2, 3])
        #expect { try store.put(chunk) } throws: { ($0 as? XferError)?.code == .corruptChunk }
        #expect(!store.contains(chunk.id))
        #expect(try store.allIDs().isEmpty)
    }

    @Test func refusesOversizedChunks() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path, maximumChunkSize: 1024)
        #expect { try store.put(plain: [UInt8](repeating: 1, count: 2048)) } throws: {
            ($0 as? XferError)?.code == .tooLarge
        }
        #expect(try store.allIDs().isEmpty)
    }

    @Test func detectsCorruptionOnRead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path)
        let data = TestData.records(count: 30_000, seed: 4)
        let id = try store.put(plain: data)
        let path = store.path(for: id)
        let relative = String(path.dropFirst(dir.path.count + 1))
        var bytes = dir.read(relative)!
        // A flipped payload bit, a truncated file, an empty file: all refused, never returned.
        bytes[bytes.count / 2] ^= 0x10
        dir.write(relative, bytes)
        #expect { try store.read(id) } throws: { ($0 as? XferError)?.code == .corruptChunk }
        dir.write(relative, Array(bytes.prefix(20)))
        #expect { try store.read(id) } throws: { ($0 as? XferError)?.code == .corruptChunk }
        dir.write(relative, [])
        #expect { try store.read(id) } throws: { ($0 as? XferError)?.code == .corruptChunk }
    }

    @Test func temporaryFilesAreNeverChunksAndAreCleanedUp() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path)
        let id = try store.put(plain: Array("hello".utf8))
        let fan = String(id.hex.prefix(2))
        // What a crash between write and rename leaves behind.
        dir.write("\(fan)/.tmp-\(id.hex.prefix(16)).abc", [1, 2, 3])
        #expect(try store.allIDs() == [id])
        #expect(try store.removeTemporaryFiles() == 1)
        #expect(try store.read(id) == Array("hello".utf8))
    }

    @Test func concurrentPutsOfTheSameChunkAllSucceed() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = try LocalChunkStore(root: dir.path)
        let data = TestData.text(count: 40_000, seed: 5)
        let id = ChunkID.of(data)
        let chunk = try data.withUnsafeBytes { try Zstd.encode($0, id: id) }
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            #expect((try? store.put(chunk)) != nil)
        }
        #expect(try store.read(id) == data)
        #expect(try store.removeTemporaryFiles() == 0)
    }
}
