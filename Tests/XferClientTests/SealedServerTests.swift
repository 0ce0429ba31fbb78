import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

@testable import XferServer

/// A server sealing its data at rest, seen from a client: everything reads back, and nothing
/// in its data directory (packs, SQLite database and WAL) shows a file's content, a file's name
/// in a package, or the SHA-256 of a chunk or a file.
@Suite(LiveServer.plainOnly("checks what a plain container's data leaves readable on the server"))
struct SealedServerTests {
    /// A package of known files: text (compressed when stored), random bytes (stored as they
    /// are, several chunks), names no store should show. Returns the byte strings that must
    /// not appear (names, lines, samples of the random bytes) and every file's SHA-256 (raw, hex).
    static func makeTree(_ root: String) throws -> (secrets: [[UInt8]], digests: [[UInt8]]) {
        var secrets: [[UInt8]] = []
        var digests: [[UInt8]] = []
        for index in 0..<8 {
            let name = "quokka-ledger-\(index).txt"
            let line = "entry \(index) of the quokka ledger: words that must never rest in the clear\n"
            let content = Array(String(repeating: line, count: 100 + 40 * index).utf8)
            try Files.write(root + "/notes/" + name, content)
            secrets += [Array(name.utf8), Array(line.utf8)]
            digests += [ChunkID.of(content).bytes, Array(ChunkID.of(content).hex.utf8)]
        }
        let random = Files.random(count: 600_000, seed: 16)
        try Files.write(root + "/data/wombat-archive.bin", random)
        secrets.append(Array("wombat-archive.bin".utf8))
        digests += [ChunkID.of(random).bytes, Array(ChunkID.of(random).hex.utf8)]
        secrets += stride(from: 0, to: random.count - 64, by: 50_000).map { Array(random[$0..<($0 + 64)]) }
        return (secrets, digests)
    }

    /// The secrets found in any file under `directory`.
    static func revealed(_ secrets: [[UInt8]], under directory: String) throws -> [String] {
        var found: [String] = []
        let files = FileManager.default.enumerator(atPath: directory)!.compactMap { $0 as? String }
        for file in files {
            let path = directory + "/" + file
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                let bytes = FileManager.default.contents(atPath: path)
            else { continue }
            for secret in secrets where bytes.range(of: Data(secret)) != nil {
                found.append("\(file): \(String(decoding: secret.prefix(24), as: UTF8.self))")
            }
        }
        return found
    }

    /// The secrets found where the server keeps its metadata: any file under its data
    /// directory, and on PostgreSQL (the backend suite) every text and bytes value of its tables.
    static func revealed(_ secrets: [[UInt8]], metadataOf server: LiveServer) async throws -> [String] {
        var found = try revealed(secrets, under: server.root + "/data")
        guard let store = server.data.metadata as? PostgresMetadataStore else { return found }
        let bytes = try await store.read { tx in
            var all = Data()
            // Every table of the store's schema, not a list that a new table could miss.
            let tables = try tx.sql.rows(
                """
                SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
                """, []
            ).map { try $0.text("table_name") }
            #expect(tables.contains("documents") && tables.contains("versions"), "\(tables)")
            for table in tables {
                for row in try tx.sql.rows("SELECT * FROM \(table)", []) {
                    for value in row.values {
                        switch value {
                        case .blob(let bytes): all.append(contentsOf: bytes)
                        case .text(let text): all.append(contentsOf: Array(text.utf8))
                        default: break
                        }
                    }
                }
            }
            return all
        }
        for secret in secrets where bytes.range(of: Data(secret)) != nil {
            found.append("postgres: \(String(decoding: secret.prefix(24), as: UTF8.self))")
        }
        return found
    }

    /// Every pack's bytes, wherever the server keeps them (files, or S3 in the backend suite).
    static func packBytes(_ data: ServerData) async throws -> Data {
        let store = try #require(data.chunks as? PackedChunkStore)
        var all = Data()
        for object in try await store.storage.list() {
            all.append(contentsOf: try #require(try await store.storage.get(object.name, limit: Int(object.size))))
        }
        return all
    }

    static func revealed(_ secrets: [[UInt8]], in bytes: Data) -> Int {
        secrets.filter { bytes.range(of: Data($0)) != nil }.count
    }

    @Test func aSealedServerKeepsNoPlainContentNamesOrIDsAndGivesEverythingBack() async throws {
        // Without keys the same check finds the secrets: it can fail.
        try await LiveServer.run(sealing: nil) { server in
            let (secrets, digests) = try Self.makeTree(server.root + "/tree")
            _ = try await server.push(server.root + "/tree", "Documents/vault")
            #expect(Self.revealed(secrets, in: try await Self.packBytes(server.data)) > 10)
            // The names are in the (plain) manifests in the metadata database.
            #expect(
                try await Self.revealed(
                    secrets.filter { String(decoding: $0, as: UTF8.self).hasSuffix(".txt") }, metadataOf: server
                ).count >= 8)
            #expect(Self.revealed(digests, in: try await Self.packBytes(server.data)) >= 8)
            // The metadata database keys its rows by chunk id: the files' SHA-256 show there.
            #expect(try await Self.revealed(digests.filter { $0.count == 32 }, metadataOf: server).count >= 8)
        }
        try await LiveServer.run(sealing: try SealingKeys([SealingKey.generate()])) { server in
            let (secrets, digests) = try Self.makeTree(server.root + "/tree")
            _ = try await server.push(server.root + "/tree", "Documents/vault")
            // The chunks' ids, from the manifest the server opens for a client.
            let stored = try await server.data.metadata.manifest(
                account: 1, container: .default,
                path: try DocumentPath("Documents/vault"), version: nil)
            let ids = try Manifest(decoding: stored.manifest).allChunks.map(\.id)
            #expect(ids.count >= 10)
            #expect(try await Self.revealed(secrets, metadataOf: server) == [])
            let hashes = digests + ids.map(\.bytes) + ids.map { Array($0.hex.utf8) }
            #expect(Self.revealed(secrets + hashes, in: try await Self.packBytes(server.data)) == 0)
            // Nor anywhere in the data directory: the metadata database keeps ids enciphered.
            #expect(try await Self.revealed(hashes, metadataOf: server) == [])

            _ = try await server.pull("Documents/vault", server.root + "/copy")
            #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(server.root + "/tree"))
        }
    }

    @Test func keyValuesAreSealedAndCountTheirPlainBytes() async throws {
        let secret = "the echidna's passphrase hint, never on a disk in the clear"
        let plainBytes = try await LiveServer.run(sealing: nil) { server in
            _ = try await server.client().setValue(.string(secret), forKey: "hint")
            #expect(try await Self.revealed([Array(secret.utf8)], metadataOf: server).count == 1, "the check can fail")
            return try await server.client().values().bytes
        }
        try await LiveServer.run(sealing: try SealingKeys([SealingKey.generate()])) { server in
            let client = server.client()
            _ = try await client.setValue(.string(secret), forKey: "hint")
            _ = try await client.setValue(.object(["n": .int(7)]), forKey: "other")
            #expect(try await Self.revealed([Array(secret.utf8), Array("\"n\":7".utf8)], metadataOf: server) == [])
            #expect(try await client.value(forKey: "hint") == .string(secret))
            let list = try await client.values()
            #expect(list.entries.map(\.key) == ["hint", "other"])
            // The limits count the plain JSON text, as without keys.
            #expect(list.bytes == plainBytes + "other".utf8.count + #"{"n":7}"#.utf8.count)
            let feed = try await server.remote.connection.changes(container: .default, after: 0)
            #expect(feed.keys.contains { $0.key == "hint" && $0.value == .string(secret) })
        }
    }

    @Test func aDamagedSealedManifestIsReportedByVerifyAndFailsThePull() async throws {
        try await LiveServer.run(sealing: try SealingKeys([SealingKey.generate()])) { server in
            try Files.write(server.root + "/tree/a.txt", Array("alpha\n".utf8))
            _ = try await server.push(server.root + "/tree", "Documents/pkg")
            let store = try #require(server.data.metadata as? any SQLMetadataStore)
            try await store.write { tx in
                let blob = try #require(
                    try tx.sql.one("SELECT manifest FROM versions WHERE manifest IS NOT NULL")?.blob("manifest"))
                #expect(Sealing.isSealed(blob))
                var damaged = blob
                damaged[damaged.count / 2] ^= 0x01
                try tx.sql.rows("UPDATE versions SET manifest = ? WHERE manifest IS NOT NULL", damaged)
            }
            let report = try await Maintenance(data: server.data).verify()
            #expect(report.problems.contains { $0.contains("manifest") }, "\(report.problems)")
            await #expect(throws: XferError.self) { _ = try await server.pull("Documents/pkg", server.root + "/copy") }
            #expect(!FileManager.default.fileExists(atPath: server.root + "/copy"))
        }
    }

    @Test func aDamagedSealedPackFailsThePullAndWritesNothing() async throws {
        try await LiveServer.run(sealing: try SealingKeys([SealingKey.generate()])) { server in
            try Files.write(server.root + "/file.bin", Files.random(count: 300_000, seed: 5))
            _ = try await server.push(server.root + "/file.bin", "file.bin")
            let store = try #require(server.data.chunks as? PackedChunkStore)
            let pack = try #require(try await store.storage.list().first)
            var bytes = try #require(try await store.storage.get(pack.name, limit: Int(pack.size)))
            bytes[bytes.count - 100] ^= 0x01
            try await store.storage.put(pack.name, bytes)
            await #expect(throws: XferError.self) { _ = try await server.pull("file.bin", server.root + "/out.bin") }
            #expect(!FileManager.default.fileExists(atPath: server.root + "/out.bin"))
        }
    }
}
