import Foundation
import Testing
import XferProtocol
import XferServer

@testable import XferClient
@testable import XferCore

/// What another device of the account, a leaked token or a hostile server can try against a
/// client or the server (issue "Hold against a hostile peer"; docs/SECURITY.md): nothing is
/// written outside the synced folder, the namespace stays a tree, manifests are bounded in
/// total, declared lengths must be true, and quota is held before a byte reaches the disk.
@Suite struct HostilePeerTests {
    /// A raw chunk of `bytes`, encoded as the wire carries it.
    static func chunk(_ bytes: [UInt8]) throws -> EncodedChunk {
        try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of($0)) }
    }

    /// Commits a manifest through the raw protocol (what a hostile device would send).
    static func commit(_ manifest: Manifest, as path: String, on connection: ServerConnection, size: Int64 = 0)
        async throws -> DocumentInfo
    {
        let name = try DocumentPath(path)
        let announced = try await connection.announce(
            container: .default,
            AnnounceRequest(
                path: name, kind: manifest.kind == .package ? .package : .file, size: size, mtimeNs: 0, mode: 0o644,
                baseVersion: nil))
        return try await connection.commit(
            container: .default,
            CommitRequest(
                path: name, version: announced.version, baseVersion: nil, deltaBase: nil,
                manifestDelta: manifest.delta(against: nil), manifestDigest: manifest.digest))
    }

    static func outsideDirectory(_ server: LiveServer) throws -> String {
        let outside = server.root + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        return outside
    }

    static func contents(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    // MARK: The confined writer

    @Test func theConfinedWriterNeverWalksThroughASymlink() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-confined-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/in/real", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/outside", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/in/link", withDestinationPath: root + "/outside")
        try FileManager.default.createSymbolicLink(atPath: root + "/in/up", withDestinationPath: "..")
        let top = try ConfinedDirectory(opening: root + "/in")

        for path in [["link"], ["link", "deeper"], ["up"], ["up", "outside"], ["real", "..", "x"]] {
            #expect(throws: XferError.self, "\(path)") { _ = try top.directory(path, create: true) }
        }
        let error = #expect(throws: XferError.self) { _ = try top.directory(["link", "made"], create: true) }
        #expect(error?.code == .conflict && error?.message.contains("symlink") == true)
        // Final names are single components opened without following a link.
        #expect(throws: XferError.self) { _ = try top.openFile("link", flags: O_RDWR | O_CREAT) }
        #expect(throws: XferError.self) { _ = try top.openFile("real/../link/x", flags: O_RDWR | O_CREAT) }
        // Removing a symlink removes the link, never what it points to.
        try Data("keep".utf8).write(to: URL(fileURLWithPath: root + "/outside/keep"))
        try top.remove("link")
        #expect(FileManager.default.fileExists(atPath: root + "/outside/keep"))
        #expect(Self.contents(root + "/outside") == ["keep"])
        // A real directory works, and creates what is missing.
        let made = try top.directory(["real", "a", "b"], create: true)
        let fd = try made.openFile("file", flags: O_RDWR | O_CREAT)
        close(fd)
        #expect(FileManager.default.fileExists(atPath: root + "/in/real/a/b/file"))
    }

    @Test(arguments: [Int64.min, Int64.min + 1, -1, 0, 1_700_000_000_123_456_789, Int64.max])
    func everyModificationTimeBecomesATimespecWithoutOverflow(_ nanoseconds: Int64) {
        let spec = ConfinedDirectory.timeSpec(nanoseconds)
        #expect((0..<1_000_000_000).contains(spec.tv_nsec))
        #expect(
            Int64(spec.tv_sec).multipliedReportingOverflow(by: 1_000_000_000).overflow
                || Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec) == nanoseconds)
    }

    /// Another device pushes a file under a name whose parent is a symlink on this device: the
    /// sync pass refuses that one document, writes nothing outside the folder and leaves no
    /// staging file there.
    @Test func syncNeverWritesThroughASymlinkedDirectory() async throws {
        try await LiveServer.run { server in
            let outside = try Self.outsideDirectory(server)
            let a = server.root + "/a"
            let b = server.root + "/b"
            try Files.write(a + "/Documents/evil/payload.txt", Array("attacker's bytes".utf8))
            try Files.write(a + "/Documents/up/x/payload.txt", Array("two levels up".utf8))
            let deviceA = try SyncEngine(directory: a, remote: server.otherDevice("a"))
            #expect(try await deviceA.syncOnce().uploaded == 2)

            try FileManager.default.createDirectory(atPath: b + "/Documents", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: b + "/Documents/evil", withDestinationPath: outside)
            try FileManager.default.createSymbolicLink(atPath: b + "/Documents/up", withDestinationPath: "../..")
            let deviceB = try SyncEngine(directory: b, remote: server.otherDevice("b"))
            let pass = try await deviceB.syncOnce()
            #expect(pass.downloaded == 0)
            #expect(Self.contents(outside).isEmpty, "nothing was written through the link")
            #expect(!FileManager.default.fileExists(atPath: server.root + "/x"))
            #expect(!FileManager.default.fileExists(atPath: b + "/../x/payload.txt"))
            // B's symlinks are documents of their own; the server refuses them beside the
            // documents already inside those names (the namespace is a tree), and says so.
            #expect(pass.failed >= 2)
            #expect(try FileManager.default.destinationOfSymbolicLink(atPath: b + "/Documents/evil") == outside)
        }
    }

    /// A directory of the staging copy is swapped for a symlink to another folder while a pull
    /// is downloading: the pull never follows it (no mode, time or file lands in the link's
    /// target), refuses to publish, and leaves the previous state in place.
    @Test func aDirectorySwappedForASymlinkMidPullIsNotFollowed() async throws {
        try await LiveServer.run { server in
            let outside = try Self.outsideDirectory(server)
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: outside)
            let source = server.root + "/source.pkg"
            for index in 0..<4 {
                try Files.write(
                    source + "/media/part\(index).bin", Files.random(count: 1_500_000, seed: UInt64(index + 40)))
            }
            _ = try await server.push(source, "Documents/big.pkg")

            let destination = server.root + "/dest"
            let staging = destination + "/.big.pkg.xfer-1.partial"
            let swapped = Locked(false)
            var options = PullOptions()
            options.downloadBatchBytes = 256 << 10
            options.downloadsInFlight = 1
            let error = await #expect(throws: XferError.self) {
                _ = try await PullEngine(remote: server.remote, options: options)
                    .pull(try DocumentPath("Documents/big.pkg"), into: destination + "/big.pkg") { _ in
                        swapped.withLock { done in
                            guard !done else { return }
                            done = true
                            _ = rename(staging + "/media", destination + "/moved-media")
                            _ = symlink(outside, staging + "/media")
                        }
                    }
            }
            #expect(swapped.value)
            #expect(error?.code == .conflict)
            #expect(Self.contents(outside).isEmpty, "nothing went through the symlink")
            let mode = try FileManager.default.attributesOfItem(atPath: outside)[.posixPermissions] as? Int
            #expect(mode == 0o700, "the link's target kept its mode")
            #expect(!FileManager.default.fileExists(atPath: destination + "/big.pkg"), "nothing was published")
        }
    }

    // MARK: The namespace is a tree

    @Test func aDocumentCannotLiveInsideAnotherNorContainOne() async throws {
        try await LiveServer.run { server in
            let file = server.root + "/file.txt"
            try Files.write(file, Array("hello".utf8))
            _ = try await server.push(file, "Documents/a")
            for inner in ["Documents/a/b", "Documents/a/b/c"] {
                let error = await #expect(throws: XferError.self) { _ = try await server.push(file, inner) }
                #expect(
                    error?.code == .conflict && error?.message.contains("Documents/a is a document") == true, "\(inner)"
                )
            }
            // The reverse: a name that holds a live document.
            _ = try await server.push(file, "Documents/dir/x")
            let outer = await #expect(throws: XferError.self) { _ = try await server.push(file, "Documents/dir") }
            #expect(outer?.code == .conflict)
            // Siblings that merely share a prefix are fine; so is a name freed by a delete.
            _ = try await server.push(file, "Documents/a0")
            _ = try await server.push(file, "Documents/ab")
            _ = try await server.client().delete("Documents/a")
            _ = try await server.push(file, "Documents/a/b")
            let listed = try await server.client().list().documents.map(\.path.value)
            #expect(Set(listed) == ["Documents/a/b", "Documents/a0", "Documents/ab", "Documents/dir/x"])
        }
    }

    // MARK: Totals and declared lengths

    /// A 64-byte chunk listed 200,000 times, then a commit whose small delta copies that run
    /// 40 times in each of several entries: refused before it is built.
    @Test func aDeltaThatExpandsPastTheLimitsIsRefused() throws {
        let id = ChunkID.of([UInt8](repeating: 7, count: 64))
        let run = [Manifest.ChunkReference](repeating: .init(id: id, length: 64), count: 200_000)
        let base = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                Manifest.Entry(path: "big", kind: .file, mode: 0o644, mtimeNanoseconds: 0, chunks: run)
            ])
        let hostile = try Self.copyingDelta(base: base, entries: 5, copiesPerEntry: 40, runLength: 200_000)
        #expect(hostile.count < 4_000, "the attack is a small request (\(hostile.count) bytes)")
        let error = #expect(throws: XferError.self) { _ = try Manifest(applying: hostile, to: base) }
        #expect(error?.code == .tooLarge)
        // Within the limits the same kind of delta still applies.
        let fits = try Self.copyingDelta(base: base, entries: 2, copiesPerEntry: 1, runLength: 200_000)
        #expect(try Manifest(applying: fits, to: base).allChunks.count == 400_000)
    }

    /// A delta against `base` with `entries` files, each copying `runLength` references from
    /// the base's first file `copiesPerEntry` times (docs/FORMAT.md, "Manifest delta v1").
    static func copyingDelta(base: Manifest, entries: Int, copiesPerEntry: Int, runLength: Int) throws -> [UInt8] {
        var out = ByteWriter()
        out.bytes(Array("XFD".utf8))
        out.byte(Manifest.deltaFormatVersion)
        out.bytes(base.digest.bytes)
        out.byte(Manifest.Kind.package.rawValue)
        out.chunker(base.chunker)
        out.varint(UInt64(entries))
        for index in 0..<entries {
            out.entryHeader(Manifest.Entry(path: "f\(index)", kind: .file, mode: 0o644, mtimeNanoseconds: 0))
            out.varint(1)  // copies come from the base's first entry
            out.varint(UInt64(copiesPerEntry))
            for _ in 0..<copiesPerEntry {
                out.byte(0)  // copy
                out.varint(0)
                out.varint(UInt64(runLength))
            }
        }
        return out.buffer
    }

    /// A manifest may not declare a chunk longer than what is stored under its id: the server
    /// refuses the commit, and a client refuses such a chunk on download.
    @Test(LiveServer.plainOnly("forges a plain chunk's declared length")) func aDeclaredChunkLengthMustBeTheStoredOne()
        async throws
    {
        try await LiveServer.run { server in
            let bytes = Array("twenty-two bytes here!".utf8)
            let chunk = try Self.chunk(bytes)
            _ = try await server.remote.connection.upload([chunk])
            let lying = try Manifest(
                kind: .file, chunker: .default,
                entries: [
                    Manifest.Entry(
                        path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 0,
                        chunks: [.init(id: chunk.id, length: 200_000)])
                ])
            let error = await #expect(throws: XferError.self) {
                _ = try await Self.commit(lying, as: "Documents/lie.bin", on: server.remote.connection, size: 200_000)
            }
            #expect(error?.code == .invalidManifest && error?.message.contains("holds 22") == true)
            let honest = try Manifest(
                kind: .file, chunker: .default,
                entries: [
                    Manifest.Entry(
                        path: "", kind: .file, mode: 0o644, mtimeNanoseconds: Int64.min,
                        chunks: [.init(id: chunk.id, length: 22)])
                ])
            _ = try await Self.commit(honest, as: "Documents/true.bin", on: server.remote.connection, size: 22)
            // A modification time of Int64.min is pulled without a crash.
            let target = server.root + "/pulled.bin"
            _ = try await server.pull("Documents/true.bin", target)
            #expect(Files.read(target) == bytes)
        }
    }

    // MARK: Quota before disk

    @Test func aRefusedUploadWritesNothingToDisk() async throws {
        try await LiveServer.run(quota: 100_000) { server in
            // Chunks the store holds, whatever the backend (files, or S3 packs).
            func stored() async throws -> Int {
                var count = 0
                for shard in 0...255 { count += try await server.data.chunks.list(shard: UInt8(shard)).count }
                return count
            }
            let before = try await stored()
            let big = try (0..<4).map { try Self.chunk(Files.random(count: 60_000, seed: UInt64(900 + $0))) }
            let error = await #expect(throws: XferError.self) { _ = try await server.remote.connection.upload(big) }
            #expect(error?.code == .quotaExceeded)
            #expect(try await stored() == before, "a refused batch wrote no chunk")
            #expect(try await server.remote.connection.account().used == 0)
            // Within the quota it is stored and counted.
            _ = try await server.remote.connection.upload(Array(big.prefix(1)))
            #expect(try await stored() == before + 1)
            #expect(try await server.remote.connection.account().used == 60_000)
        }
    }

    @Test(LiveServer.plainOnly("announces documents by plain names through the protocol"))
    func pendingVersionsAndContainersAreBoundedPerAccount() async throws {
        var policy = StorePolicy()
        policy.maximumPendingVersions = 3
        policy.maximumContainers = 2
        try await LiveServer.run(policy: policy) { server in
            let connection = server.remote.connection
            for index in 0..<3 {
                _ = try await connection.announce(
                    container: .default,
                    AnnounceRequest(
                        path: try DocumentPath("Documents/p\(index)"), kind: .file, size: 1, mtimeNs: 0, mode: 0o644,
                        baseVersion: nil))
            }
            let pending = await #expect(throws: XferError.self) {
                _ = try await connection.announce(
                    container: .default,
                    AnnounceRequest(
                        path: try DocumentPath("Documents/p3"), kind: .file, size: 1, mtimeNs: 0, mode: 0o644,
                        baseVersion: nil))
            }
            #expect(pending?.code == .quotaExceeded)
            _ = try await connection.setValue(
                container: try ContainerName("second"),
                KeyValueWrite(key: "k", value: .string("v"), timestampNs: 1, device: "d"))
            let containers = await #expect(throws: XferError.self) {
                _ = try await connection.setValue(
                    container: try ContainerName("third"),
                    KeyValueWrite(key: "k", value: .string("v"), timestampNs: 1, device: "d"))
            }
            #expect(containers?.code == .quotaExceeded)
        }
    }
}
