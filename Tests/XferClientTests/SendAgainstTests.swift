import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// Changed small files sent against their previous content (``ChunkEncoding/zstdAgainst``),
/// both ways, with the client's cache of recently synced small chunks.
@Suite(LiveServer.plainOnly("a sealed chunk is never sent against another, nor kept in the chunk cache"))
struct SendAgainstTests {
    /// A package of small files (random bytes, so a file sent whole costs its whole size).
    static func writeTree(_ root: String, count: Int) throws -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for index in 0..<count {
            let bytes = Files.random(count: 2_000 + index * 1_500, seed: UInt64(100 + index))
            files["src/file\(index).c"] = bytes
            try Files.write(root + "/src/file\(index).c", bytes)
        }
        return files
    }

    /// A random file pushed as document `name`, and a second device (`reader`) that pulled it
    /// into `copy-NAME`: the file's path and bytes, and the reader.
    static func pushedAndPulled(_ server: LiveServer, _ name: String, count: Int, seed: UInt64) async throws
        -> (path: String, bytes: [UInt8], reader: Remote)
    {
        let path = server.root + "/" + name
        let bytes = Files.random(count: count, seed: seed)
        try Files.write(path, bytes)
        _ = try await server.push(path, name)
        let reader = server.otherDevice("reader")
        _ = try await server.pull(name, server.root + "/copy-" + name, from: reader)
        return (path, bytes, reader)
    }

    @Test func smallEditsOfSmallFilesMoveBytesOnTheOrderOfTheEditBothWays() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/src-tree"
            var files = try Self.writeTree(source, count: 40)
            let first = try await server.push(source, "Documents/tree")
            #expect(first.chunksSent == first.chunks)
            // The pushing device keeps the small files' chunks.
            let cache = ChunkCache(
                database: try ClientState(root: source, stateDirectory: server.stateDirectory).database)
            #expect(try cache.usage().chunks == first.chunksSent)

            let reader = server.otherDevice("reader")
            _ = try await server.pull("Documents/tree", server.root + "/copy", from: reader)

            // Ten files edited: a few bytes inserted into each, one overwritten, one appended to.
            var editedBytes = 0
            for index in stride(from: 0, to: 40, by: 4) {
                let name = "src/file\(index).c"
                var bytes = files[name]!
                switch index % 3 {
                case 0: bytes.insert(contentsOf: Array("/* edit \(index) */".utf8), at: bytes.count / 2)
                case 1: bytes.replaceSubrange(10..<30, with: Files.random(count: 20, seed: UInt64(index)))
                default: bytes += Array("\nint added\(index);\n".utf8)
                }
                files[name] = bytes
                editedBytes += bytes.count
                try Files.write(source + "/" + name, bytes)
            }
            let second = try await server.push(source, "Documents/tree")
            #expect(second.version == 2 && second.chunksSent == 10)
            // Sent whole, the ten files would cost every byte (random data does not compress).
            #expect(
                second.bytesSent < 10 * 200, "sent \(second.bytesSent) bytes for \(editedBytes) bytes of edited files")

            let pulled = try await server.pull("Documents/tree", server.root + "/copy", from: reader)
            #expect(pulled.version == 2 && pulled.chunksFetched == 10)
            #expect(
                pulled.bytesFetched < 10 * 200,
                "fetched \(pulled.bytesFetched) bytes for \(editedBytes) bytes of edited files")
            #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(source))

            // A third device with no earlier copy gets the files whole, and the same content.
            let fresh = try await server.pull(
                "Documents/tree", server.root + "/fresh", from: server.otherDevice("fresh"))
            #expect(fresh.bytesFetched >= Int64(files.values.reduce(0) { $0 + $1.count }))
            #expect(try Files.snapshot(server.root + "/fresh") == Files.snapshot(source))
        }
    }

    @Test func aPullWithoutTheCacheGoesAgainstTheFileOnDisk() async throws {
        try await LiveServer.run { server in
            var (path, bytes, reader) = try await Self.pushedAndPulled(server, "notes.txt", count: 50_000, seed: 5)
            // The reader's cache is emptied: its copy on disk still holds the previous chunk.
            let readerCache = ChunkCache(
                database: try ClientState(root: server.root + "/copy-notes.txt", stateDirectory: reader.stateDirectory)
                    .database)
            #expect(try readerCache.usage().chunks == 1)
            try readerCache.removeAll()
            #expect(try readerCache.usage().chunks == 0)

            bytes.insert(contentsOf: Array("a new line\n".utf8), at: 25_000)
            try Files.write(path, bytes)
            let pushed = try await server.push(path, "notes.txt")
            #expect(pushed.bytesSent < 300)
            let pulled = try await server.pull("notes.txt", server.root + "/copy-notes.txt", from: reader)
            #expect(pulled.bytesFetched < 300)
            #expect(Files.read(server.root + "/copy-notes.txt") == bytes)
        }
    }

    @Test func aSyncPassSendsAndFetchesEditsAgainstThePreviousContent() async throws {
        try await LiveServer.run { server in
            func engine(_ name: String) throws -> (String, SyncEngine) {
                let directory = server.root + "/" + name
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                return (directory, try SyncEngine(directory: directory, remote: server.otherDevice(name)))
            }
            let (a, syncA) = try engine("a")
            let (b, syncB) = try engine("b")
            var files: [String: [UInt8]] = [:]
            for index in 0..<30 {
                files["Documents/src/f\(index).c"] = Files.random(
                    count: 5_000 + index * 1_000, seed: UInt64(500 + index))
                try Files.write(a + "/Documents/src/f\(index).c", files["Documents/src/f\(index).c"]!)
            }
            #expect(try await syncA.syncOnce().uploaded == 30)
            #expect(try await syncB.syncOnce().downloaded == 30)

            // Six files edited on A: a line inserted into each.
            for index in stride(from: 0, to: 30, by: 5) {
                let name = "Documents/src/f\(index).c"
                files[name]!.insert(contentsOf: Array("// changed \(index)\n".utf8), at: 1_000 + index)
                try Files.write(a + "/" + name, files[name]!)
            }
            let sent = try await syncA.syncOnce()
            #expect(sent.uploaded == 6 && sent.bytesSent < 6 * 200, "sent \(sent.bytesSent) bytes")
            let fetched = try await syncB.syncOnce()
            #expect(
                fetched.downloaded == 6 && fetched.bytesFetched > 0 && fetched.bytesFetched < 6 * 200,
                "fetched \(fetched.bytesFetched) bytes")
            for (name, bytes) in files { #expect(Files.read(b + "/" + name) == bytes, "\(name)") }
        }
    }

    @Test func theCacheStaysWithinItsBoundAndDropsWhatDoesNotVerify() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-cache-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let database = try StateDatabase(path: root + "/state.sqlite")
        let cache = ChunkCache(database: database, maximumBytes: 100_000)
        let chunks = try (0..<30).map { index in
            let plain = Files.random(count: 10_000, seed: UInt64(index))
            return try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain)) }
        }
        for chunk in chunks { try cache.keep([chunk]) }
        let usage = try cache.usage()
        #expect(usage.bytes <= 100_000 && usage.chunks == 10)
        // The least recently used went first: the last ten are there.
        #expect(Set(try cache.plain(chunks.map(\.id)).keys) == Set(chunks.suffix(10).map(\.id)))
        // One used now outlives newer ones.
        _ = try cache.plain([chunks[20].id])
        try cache.keep(Array(chunks[0..<9]))
        #expect(try cache.plain([chunks[20].id]).count == 1)

        // A chunk kept under another's id never comes back.
        var lying = chunks[0]
        lying.id = ChunkID.of([9, 9, 9])
        try cache.keep([lying])
        #expect(try cache.plain([lying.id]).isEmpty)
    }

    @Test func aTransferOffersTheCacheOnlyWhatItsBoundHolds() {
        var admission = ChunkCache.Admission(maximumBytes: 10_000)
        let verdicts = [
            admission.admits(1_000, ofFileSized: ChunkCache.fileLimit + 1),  // a large file's chunk
            admission.admits(6_000, ofFileSized: 6_000),
            admission.admits(5_000, ofFileSized: 5_000),  // over what is left
            admission.admits(4_000, ofFileSized: 4_000),
            admission.admits(1, ofFileSized: 1)
        ]
        #expect(verdicts == [false, true, false, true, false])
        #expect(admission.left == 0)
    }

    /// A push or pull of more small files than the cache holds writes only what it keeps (the
    /// first files, in the order they are read), not every file for the cache to evict again.
    @Test func aTransferLargerThanTheCacheKeepsItsFirstFilesAndWritesNoMore() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/src-tree"
            var files: [String: [UInt8]] = [:]  // 314 kB, each file under the smallest chunk: one chunk a file
            for index in 0..<40 {
                files["src/file\(index).c"] = Files.random(count: 2_000 + index * 300, seed: UInt64(500 + index))
                try Files.write(source + "/src/file\(index).c", files["src/file\(index).c"]!)
            }
            let bound = 100_000
            var options = PushOptions()
            options.cacheBytes = bound
            _ = try await PushEngine(remote: server.remote, options: options).push(
                source, as: try DocumentPath("Documents/tree"))

            // The files a push reads come in bytewise path order; the first that fit are kept.
            var admission = ChunkCache.Admission(maximumBytes: bound)
            let admitted = files.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
                .filter { admission.admits(files[$0]!.count, ofFileSized: Int64(files[$0]!.count)) }
            #expect(admitted.count > 3 && admitted.count < 40)
            let cache = ChunkCache(
                database: try ClientState(root: source, stateDirectory: server.stateDirectory).database)
            let usage = try cache.usage()
            #expect(usage.chunks == admitted.count, "\(usage) \(admitted)")
            #expect(Set(try cache.plain(admitted.map { ChunkID.of(files[$0]!) }).keys).count == admitted.count)

            // A reader with the same bound keeps the same number of chunks.
            let reader = server.otherDevice("reader")
            var pullOptions = PullOptions()
            pullOptions.cacheBytes = bound
            _ = try await PullEngine(remote: reader, options: pullOptions).pull(
                try DocumentPath("Documents/tree"), into: server.root + "/copy")
            let readerCache = ChunkCache(
                database: try ClientState(root: server.root + "/copy", stateDirectory: reader.stateDirectory).database)
            let held = try readerCache.usage()
            #expect(held.chunks > 3 && held.chunks < 40)

            // A kept file's edit still goes against its previous content; one not kept goes whole.
            let kept = admitted[0]
            let notKept = files.keys.first { !admitted.contains($0) }!
            for name in [kept, notKept] {
                files[name]!.insert(contentsOf: Array("/* edit */".utf8), at: 100)
                try Files.write(source + "/" + name, files[name]!)
            }
            let second = try await PushEngine(remote: server.remote, options: options).push(
                source, as: try DocumentPath("Documents/tree"))
            #expect(second.chunksSent == 2)
            #expect(
                second.bytesSent >= Int64(files[notKept]!.count)
                    && second.bytesSent < Int64(files[notKept]!.count) + 500,
                "sent \(second.bytesSent) bytes for a \(files[notKept]!.count)-byte file sent whole and a kept one's edit"
            )
        }
    }

    /// A push's cache budget goes to chunks it sends: chunks the server has already (another
    /// device pushed them) are not sent, so not kept, and use none of it.
    @Test func chunksTheServerHasUseNoneOfAPushsCacheBudget() async throws {
        try await LiveServer.run { server in
            var files: [String: [UInt8]] = [:]  // one chunk a file
            for index in 0..<20 {
                files["src/file\(index + 10).c"] = Files.random(count: 3_000 + index * 100, seed: UInt64(700 + index))
            }
            let names = files.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
            let (held, fresh) = (Array(names.prefix(10)), Array(names.suffix(10)))
            // Another device pushes the first ten files: the server has their chunks.
            let other = server.root + "/other"
            for name in held { try Files.write(other + "/" + name, files[name]!) }
            _ = try await PushEngine(remote: server.otherDevice("other")).push(
                other, as: try DocumentPath("Documents/theirs"))

            // This device pushes all twenty, with room in its cache for about ten files.
            let source = server.root + "/mine"
            for name in names { try Files.write(source + "/" + name, files[name]!) }
            var options = PushOptions()
            options.cacheBytes = fresh.reduce(0) { $0 + files[$1]!.count }
            let pushed = try await PushEngine(remote: server.remote, options: options).push(
                source, as: try DocumentPath("Documents/mine"))
            #expect(pushed.chunksSent == 10)
            let cache = ChunkCache(
                database: try ClientState(root: source, stateDirectory: server.stateDirectory).database)
            // Every chunk it sent is kept: the ten it did not send took none of the room.
            #expect(try cache.usage().chunks == 10)
            #expect(Set(try cache.plain(fresh.map { ChunkID.of(files[$0]!) }).keys).count == 10)
        }
    }

    @Test func aPullOfALargeFileGetsItsChangedChunkAgainstTheCopyOnDisk() async throws {
        try await LiveServer.run { server in
            var (path, bytes, reader) = try await Self.pushedAndPulled(server, "big.bin", count: 3_000_000, seed: 77)

            bytes.insert(contentsOf: Files.random(count: 100, seed: 78), at: 1_500_000)
            try Files.write(path, bytes)
            // The push has no copy of the previous content of a large file: its changed chunks go whole.
            let pushed = try await server.push(path, "big.bin")
            #expect(pushed.chunksSent >= 1 && pushed.bytesSent > 10_000)
            // The reader still has its copy: the same chunks come as a few hundred bytes.
            let pulled = try await server.pull("big.bin", server.root + "/copy-big.bin", from: reader)
            #expect(pulled.chunksFetched == pushed.chunksSent)
            #expect(
                pulled.bytesFetched < 1_000, "fetched \(pulled.bytesFetched) bytes for \(pushed.bytesSent) sent whole")
            #expect(Files.read(server.root + "/copy-big.bin") == bytes)
        }
    }

    /// A server that does not offer the features (an older one, or one told
    /// `--without-feature`) refuses chunks sent against a reference and compressed deltas:
    /// the edits still go through, whole, with plain deltas, by push, pull and sync.
    @Test func aServerWithoutTheFeaturesGetsWholeChunksAndPlainDeltas() async throws {
        var limits = ServerLimits()
        limits.features = []
        try await LiveServer.run(limits: limits) { server in
            #expect(await server.remote.connection.features().isEmpty)
            // A sync pass: batched commits and pulls.
            let a = server.root + "/a"
            let b = server.root + "/b"
            for directory in [a, b] {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
            let syncA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            let syncB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            var bytes = Files.random(count: 20_000, seed: 9)
            try Files.write(a + "/Documents/notes.c", bytes)
            #expect(try await syncA.syncOnce().uploaded == 1)
            #expect(try await syncB.syncOnce().downloaded == 1)
            bytes.insert(contentsOf: Array("// changed\n".utf8), at: 5_000)
            try Files.write(a + "/Documents/notes.c", bytes)
            let sent = try await syncA.syncOnce()
            #expect(sent.uploaded == 1 && sent.bytesSent >= Int64(bytes.count))
            let fetched = try await syncB.syncOnce()
            #expect(
                fetched.downloaded == 1 && fetched.bytesFetched >= Int64(bytes.count), "fetched \(fetched.bytesFetched)"
            )
            #expect(Files.read(b + "/Documents/notes.c") == bytes)

            // A push and a pull, the same way.
            let source = server.root + "/src-tree"
            var files = try Self.writeTree(source, count: 12)
            _ = try await server.push(source, "Documents/tree")
            let reader = server.otherDevice("reader")
            _ = try await server.pull("Documents/tree", server.root + "/copy", from: reader)
            var editedBytes = 0
            for index in stride(from: 0, to: 12, by: 3) {
                let name = "src/file\(index).c"
                files[name]!.insert(contentsOf: Array("/* edit */".utf8), at: 100)
                editedBytes += files[name]!.count
                try Files.write(source + "/" + name, files[name]!)
            }
            let second = try await server.push(source, "Documents/tree")
            #expect(second.version == 2 && second.chunksSent == 4 && second.bytesSent >= Int64(editedBytes))
            let pulled = try await server.pull("Documents/tree", server.root + "/copy", from: reader)
            #expect(pulled.version == 2 && pulled.bytesFetched >= Int64(editedBytes))
            #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(source))
        }
    }

    @Test func aServerNamesTheFeaturesItOffers() async throws {
        try await LiveServer.run { server in
            let status = try await server.remote.connection.health()
            #expect(status.features == ServerFeature.allCases.map(\.rawValue))
            #expect(await server.remote.connection.features() == Set(ServerFeature.allCases))
        }
        var limits = ServerLimits()
        limits.features = [.compressedManifests]
        try await LiveServer.run(limits: limits) { server in
            let status = try await server.remote.connection.health()
            #expect(status.features == ["compressed-manifests"])
        }
    }
}
