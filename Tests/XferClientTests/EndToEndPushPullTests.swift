import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

@testable import XferServer

/// Push and pull on an end-to-end encrypted container: a device
/// holding the key seals names, chunks and manifests; the server stores what it cannot read;
/// another device with the passphrase pulls the same bytes; damage is refused, writing nothing.
@Suite struct EndToEndPushPullTests {
    static let fast = EncryptedContainerKeyTests.fast
    static let marker = "The harbour project moves to phase two on the ninth of March."
    static let secretName = "Harbour plans"

    /// A device's remote on container `vault`.
    static func vault(_ server: LiveServer, _ device: String) throws -> Remote {
        Remote(
            connection: server.remote.connection, container: try ContainerName("vault"),
            stateDirectory: server.root + "/state-" + device)
    }

    /// A package of known files: text (compressible), random bytes over several chunks, an
    /// empty file, a nested one.
    static func makeTree(_ root: String) throws -> [String: [UInt8]] {
        let files: [String: [UInt8]] = [
            "\(secretName)/notes.txt": Array(String(repeating: marker + "\n", count: 300).utf8),
            "\(secretName)/survey.bin": Files.random(count: 700_000, seed: 61),
            "empty.txt": [],
            "a/b/c/deep.txt": Array("deep \(marker)".utf8)
        ]
        for (path, bytes) in files { try Files.write(root + "/" + path, bytes) }
        return files
    }

    /// Every file the server wrote under `directory` (its database, packs, whatever else).
    /// Device A's unlocked remote on `vault`, made encrypted with `passphrase`, and the known
    /// tree (``makeTree(_:)``) pushed there as `name`.
    static func vaultWithTree(_ server: LiveServer, passphrase: String = "pw", as name: String) async throws
        -> (a: Remote, files: [String: [UInt8]])
    {
        _ = try await EncryptedContainers(remote: try vault(server, "a")).create(
            passphrase: passphrase, parameters: fast)
        let a = try await vault(server, "a").unlocked()
        let files = try makeTree(server.root + "/tree")
        _ = try await PushEngine(remote: a).push(server.root + "/tree", as: try DocumentPath(name))
        return (a, files)
    }

    static func serverFiles(_ directory: String) -> [(path: String, bytes: [UInt8])] {
        (FileManager.default.enumerator(atPath: directory)?.compactMap { $0 as? String } ?? []).compactMap { relative in
            Files.read(directory + "/" + relative).map { (relative, $0) }
        }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        Data(haystack).range(of: Data(needle)) != nil
    }

    /// The changes of container `vault` up to its newest, from `feed`.
    static func drain(_ feed: ChangeFeed, _ server: LiveServer) async throws -> [Change] {
        let head = try await server.remote.connection.changes(container: try ContainerName("vault"), after: 0, wait: 0)
            .cursor
        var changes: [Change] = []
        for try await change in feed {
            changes.append(change)
            if change.sequence >= head { break }
        }
        return changes
    }

    @Test func aSecondDeviceWithThePassphrasePullsWhatTheServerCannotRead() async throws {
        try await LiveServer.run { server in
            let key = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "correct horse", parameters: Self.fast)
            let a = try await Self.vault(server, "a").unlocked()
            #expect(a.endToEnd?.keyID == key.id)
            let tree = server.root + "/tree"
            let files = try Self.makeTree(tree)
            let pushed = try await PushEngine(remote: a).push(tree, as: try DocumentPath("Projects/Harbour.pkg"))
            #expect(pushed.committed && pushed.files == files.count && pushed.document == "Projects/Harbour.pkg")
            _ = try await PushEngine(remote: a).push(
                tree + "/\(Self.secretName)/notes.txt", as: try DocumentPath("notes.txt"))

            // Device B joins with the passphrase and pulls the same bytes.
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "correct horse")
            let b = try await Self.vault(server, "b").unlocked()
            let pulled = try await PullEngine(remote: b).pull(
                try DocumentPath("Projects/Harbour.pkg"), into: server.root + "/out")
            #expect(pulled.files == files.count && pulled.document == "Projects/Harbour.pkg")
            for (path, bytes) in files { #expect(Files.read(server.root + "/out/" + path) == bytes, "\(path)") }
            _ = try await PullEngine(remote: b).pull(try DocumentPath("notes.txt"), into: server.root + "/notes-b.txt")
            #expect(Files.read(server.root + "/notes-b.txt") == files["\(Self.secretName)/notes.txt"])

            // The server keeps sealed names, and no file's content, name, or plain chunk id.
            let listed = try await server.remote.connection.list(container: try ContainerName("vault"), prefix: "")
            #expect(
                listed.documents.count == 2 && listed.documents.allSatisfy { NameSealing.isSealed(path: $0.path.value) }
            )
            // Nor a true size, time or mode: the size is what it stores (sealed, padded).
            let plainBytes = files.values.reduce(0) { $0 + $1.count }
            for document in listed.documents {
                #expect(
                    document.mtimeNs == 0 && document.mode == 0o600 && document.size != Int64(plainBytes), "\(document)"
                )
            }
            let survey = files["\(Self.secretName)/survey.bin"]!
            let plainChunks = survey.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: .default) }
            // Every file's plain SHA-256 and every chunk the plain chunker cuts from it.
            var plainIDs: [ChunkID] = []
            for bytes in files.values where !bytes.isEmpty {
                plainIDs.append(ChunkID.of(bytes))
                var offset = 0
                for length in bytes.withUnsafeBytes({ Chunker.chunkLengths(of: $0, configuration: .default) }) {
                    plainIDs.append(ChunkID.of(Array(bytes[offset..<(offset + length)])))
                    offset += length
                }
            }
            var needles: [(String, [UInt8])] = [
                ("text", Array(Self.marker.utf8)), ("text's start", Array(Self.marker.prefix(16).utf8)),
                ("document name", Array("Harbour.pkg".utf8)), ("folder", Array("Projects".utf8)),
                ("random bytes", Array(survey[1000..<1032]))
            ]
            // Every name in the tree, each path component (but one-letter ones, found anywhere).
            for component in Set(files.keys.flatMap { $0.split(separator: "/").map(String.init) })
            where component.count > 4 {
                needles.append(("name \(component)", Array(component.utf8)))
            }
            for id in plainIDs { needles += [("plain id", id.bytes), ("plain id as hex", Array(id.hex.utf8))] }
            // Its files, its PostgreSQL tables and its packs (on disk, or in S3 in the backend suite).
            let secrets = needles.map(\.1)
            #expect(try await SealedServerTests.revealed(secrets, metadataOf: server).isEmpty)
            #expect(SealedServerTests.revealed(secrets, in: try await SealedServerTests.packBytes(server.data)) == 0)
            // The same check finds them in a plain container: it can fail.
            let plainBox = Remote(
                connection: server.remote.connection, container: try ContainerName("plainbox"),
                stateDirectory: server.stateDirectory)
            _ = try await server.push(tree, "plain.pkg", from: plainBox)
            #expect(
                SealedServerTests.revealed(secrets, in: try await SealedServerTests.packBytes(server.data)) > 0
                    || Backends.sealing != nil)
            #expect(
                try await !SealedServerTests.revealed(secrets, metadataOf: server).isEmpty || Backends.sealing != nil)
            _ = try await server.client(plainBox).delete("plain.pkg")
            // Cut with the key's Gear table: not where the plain chunker cuts the same bytes.
            let state = try b.clientState(root: server.root + "/out")
            let keyed = try #require(try state.files()["\(Self.secretName)/survey.bin"]).chunks.map(\.length)
            #expect(keyed.count > 1 && keyed != plainChunks)
            // And the lengths the server records for the document's chunks (sealed, padded) are
            // none of the plain chunker's.
            let sealedPath = try #require(listed.documents.first { $0.kind == .package }).path
            let answer = try await server.remote.connection.manifest(
                container: try ContainerName("vault"), path: sealedPath, version: nil, base: nil)
            let stored = try EndToEndKeys.references(of: try Manifest(applying: answer.delta, to: nil)).map(\.length)
            #expect(
                stored.count > plainChunks.count && Set(stored).isDisjoint(with: plainChunks),
                "\(stored) \(plainChunks)")

            // An edit sends what changed; an unchanged tree sends nothing and makes no version.
            try Files.write(tree + "/a/b/c/deep.txt", Array("deeper still".utf8))
            let edit = try await PushEngine(remote: a).push(tree, as: try DocumentPath("Projects/Harbour.pkg"))
            #expect(edit.committed && edit.version == pushed.version + 1 && edit.chunksSent <= 3, "\(edit)")
            // Its carrier went as a delta against the version before's, which the server holds
            // (its sealed manifest, whole, is about the same size both times).
            #expect(edit.manifestBytes < pushed.manifestBytes, "\(edit.manifestBytes) against \(pushed.manifestBytes)")
            let noop = try await PushEngine(remote: a).push(tree, as: try DocumentPath("Projects/Harbour.pkg"))
            #expect(!noop.committed && noop.version == edit.version)
            let again = try await PullEngine(remote: b).pull(
                try DocumentPath("Projects/Harbour.pkg"), into: server.root + "/out")
            #expect(again.version == edit.version && again.chunksFetched <= 3, "\(again)")
            #expect(Files.read(server.root + "/out/a/b/c/deep.txt") == Array("deeper still".utf8))

            // The library's listing, versions and deletion speak plain names.
            let client = DocumentClient(remote: try Self.vault(server, "b"), device: "b")
            #expect(try await client.list().documents.map(\.path.value) == ["Projects/Harbour.pkg", "notes.txt"])
            #expect(try await client.list(prefix: "Proj").documents.map(\.path.value) == ["Projects/Harbour.pkg"])
            #expect(try await client.versions("Projects/Harbour.pkg").map(\.version) == [edit.version, pushed.version])
            #expect(try await client.stat("notes.txt").path.value == "notes.txt")
            let fed = try await Self.drain(client.changes(start: 0, wait: 0), server).compactMap { change -> String? in
                if case .document(let info) = change { info.path.value } else { nil }
            }
            #expect(Set(fed) == ["Projects/Harbour.pkg", "notes.txt"] && fed.count == 3, "\(fed)")
            let deleted = try await client.delete("notes.txt")
            #expect(deleted.path.value == "notes.txt" && deleted.state == .deleted)
            #expect(
                try await client.list().documents.filter { $0.state != .deleted }.map(\.path.value) == [
                    "Projects/Harbour.pkg"
                ])

            // A device without the key is told to unlock; a plain push there is refused.
            let locked = await #expect(throws: XferError.self) { _ = try await Self.vault(server, "c").unlocked() }
            #expect(locked?.code == .unauthorized && locked?.message.contains("xfer key unlock") == true)
        }
    }

    @Test func aByteChangedOnTheServerIsRefusedAndNothingIsWritten() async throws {
        try await LiveServer.run { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            let a = try await Self.vault(server, "a").unlocked()
            let tree = server.root + "/tree"
            _ = try Self.makeTree(tree)
            _ = try await PushEngine(remote: a).push(tree, as: try DocumentPath("doc"))
            // A device holding the key checks the server's copy: whole.
            let clean = try await ContainerVerify(remote: a).run()
            #expect(clean.ok && clean.documentsChecked == 1 && clean.chunksChecked >= 4, "\(clean)")
            // A document written under another key: its name does not open here, and is reported.
            let stranger = Remote(
                connection: server.remote.connection, container: try ContainerName("vault"),
                stateDirectory: server.root + "/state-x", endToEnd: EndToEndKeys(key: .generate()))
            try Files.write(server.root + "/x.txt", Array("x".utf8))
            _ = try await PushEngine(remote: stranger).push(server.root + "/x.txt", as: try DocumentPath("x.txt"))
            let foreign = try await ContainerVerify(remote: a).run()
            #expect(foreign.problems.count == 1 && foreign.problems[0].problem.contains("does not open"), "\(foreign)")
            // Damage every pack in its middle (a data chunk's or a piece of the sealed manifest's bytes).
            guard Backends.environment["XFER_S3_ENDPOINT"] == nil else { return }  // packs in a bucket
            let packs = Self.serverFiles(server.root + "/data").filter {
                $0.path.hasPrefix("packs/") && !$0.path.contains("/.")
            }
            try #require(!packs.isEmpty, "this backend keeps its packs elsewhere")
            for pack in packs {
                var bytes = pack.bytes
                bytes[bytes.count / 2] ^= 0x20
                try Data(bytes).write(to: URL(fileURLWithPath: server.root + "/data/" + pack.path))
            }
            let failed = await #expect(throws: XferError.self) {
                _ = try await PullEngine(remote: a).pull(try DocumentPath("doc"), into: server.root + "/out")
            }
            #expect(failed != nil)
            #expect(!FileManager.default.fileExists(atPath: server.root + "/out"))
            // And the device's check of the server's copy names the damaged document.
            let damaged = try await ContainerVerify(remote: a).run()
            #expect(!damaged.ok && damaged.problems.contains { $0.document == "doc" }, "\(damaged)")
        }
    }

    /// Each kind of stored object damaged alone: a data chunk, the sealed manifest's piece and
    /// the carrier the server records. Each is refused by a pull with a clear error, nothing is
    /// written beside the target either, and the device's check names the document.
    @Test func eachDamagedObjectAloneIsRefusedAndNothingIsWritten() async throws {
        try await LiveServer.run { server in
            let (a, files) = try await Self.vaultWithTree(server, as: "doc")
            let vault = try ContainerName("vault")
            let sealed = try #require(
                try await server.remote.connection.list(container: vault, prefix: "").documents.first
            ).path
            let answer = try await server.remote.connection.manifest(
                container: vault, path: sealed, version: nil, base: nil)
            let references = try EndToEndKeys.references(of: try Manifest(applying: answer.delta, to: nil))
            // A manifest this small is one piece, listed first; the content's chunks follow.
            let piece = references[0].id
            let data = try #require(references.dropFirst().max { $0.length < $1.length }).id
            let store = try #require(server.data.chunks as? PackedChunkStore)
            let out = server.root + "/pulls"
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)

            func refused(_ what: String, _ check: (XferError) throws -> Bool) async throws {
                let error = await #expect(throws: XferError.self, "\(what)") {
                    _ = try await PullEngine(remote: a).pull(try DocumentPath("doc"), into: out + "/doc")
                }
                // A server that seals at rest finds a damaged entry itself, as it opens it, and
                // can only end the download mid-stream: the client sees a broken connection,
                // which it cannot tell from the network's, and keeps its staging copy to resume.
                let sealedAtRest = Backends.sealing != nil
                let matched = try error.map(check) == true
                #expect(matched || (sealedAtRest && error != nil), "\(what): \(String(describing: error))")
                // Nothing at the target, and no staging copy beside it (but that resumable one).
                let left = try FileManager.default.contentsOfDirectory(atPath: out).filter {
                    !(sealedAtRest && $0.hasSuffix(".partial"))
                }
                #expect(left.isEmpty, "\(what): \(left)")
                let report = try await ContainerVerify(remote: a).run()
                #expect(!report.ok && report.problems.contains { $0.document == "doc" }, "\(what): \(report)")
            }
            // One byte inside one stored chunk's entry, then put back.
            for (what, id) in [("a data chunk", data), ("the sealed manifest's piece", piece)] {
                let location = try #require(try await store.index.locations([id]).first)
                let original = try #require(try await store.storage.get(location.pack, limit: 64 << 20))
                var bytes = original
                bytes[Int(location.offset) + location.length - 20] ^= 0x01
                try await store.storage.put(location.pack, bytes)
                try await refused(what) { $0.code == .corruptChunk || $0.code == .invalidManifest }
                try await store.storage.put(location.pack, original)
            }
            // The carrier the server records for the version.
            if let sql = server.data.metadata as? any SQLMetadataStore, Backends.sealing == nil {
                let original = try #require(
                    try await sql.write { tx in
                        try tx.sql.one("SELECT manifest FROM versions WHERE manifest IS NOT NULL")?.blob("manifest")
                    })
                var bytes = original
                bytes[bytes.count - 10] ^= 0x01
                let damaged = bytes
                try await sql.write { tx in
                    _ = try tx.sql.rows("UPDATE versions SET manifest = ? WHERE manifest IS NOT NULL", damaged)
                }
                try await refused("the carrier") { !$0.message.isEmpty }
                try await sql.write { tx in
                    _ = try tx.sql.rows("UPDATE versions SET manifest = ? WHERE manifest IS NOT NULL", original)
                }
            }
            // Mended, the same pull puts the tree in place.
            _ = try await PullEngine(remote: a).pull(try DocumentPath("doc"), into: out + "/doc")
            for (path, bytes) in files { #expect(Files.read(out + "/doc/" + path) == bytes, "\(path)") }
            #expect(try await ContainerVerify(remote: a).run().ok)
        }
    }

    /// A passphrase change re-wraps the key and nothing else: what was pushed before it reads
    /// on a device that joins after it with the new passphrase (the old one is refused there).
    @Test func whatWasPushedBeforeAPassphraseChangeReadsAfterIt() async throws {
        try await LiveServer.run { server in
            let (a, files) = try await Self.vaultWithTree(server, passphrase: "old words", as: "Projects/Harbour.pkg")
            _ = try await DocumentClient(remote: a, device: "a").setValue(.string(Self.marker), forKey: "note")
            try await EncryptedContainers(remote: a).changePassphrase(to: "new words", parameters: Self.fast)

            let joining = EncryptedContainers(remote: try Self.vault(server, "d"))
            let refused = await #expect(throws: XferError.self) {
                _ = try await joining.unlock(passphrase: "old words")
            }
            #expect(refused?.code == .unauthorized)
            _ = try await joining.unlock(passphrase: "new words")
            let d = try await Self.vault(server, "d").unlocked()
            _ = try await PullEngine(remote: d).pull(
                try DocumentPath("Projects/Harbour.pkg"), into: server.root + "/out")
            for (path, bytes) in files { #expect(Files.read(server.root + "/out/" + path) == bytes, "\(path)") }
            #expect(try await DocumentClient(remote: d, device: "d").value(forKey: "note") == .string(Self.marker))
            #expect(try await ContainerVerify(remote: d).run().ok)
        }
    }

    /// The quota counts what the server stores: each sealed chunk once, at its sealed length
    /// (padded, with its seal), not the plain bytes it holds; a second copy adds nothing.
    @Test func theQuotaCountsTheSealedBytesStored() async throws {
        try await LiveServer.run(quota: 50_000_000) { server in
            let usedBefore = try await server.remote.connection.account().used
            let (a, files) = try await Self.vaultWithTree(server, as: "doc")
            let vault = try ContainerName("vault")
            let sealed = try #require(
                try await server.remote.connection.list(container: vault, prefix: "").documents.first
            ).path
            let answer = try await server.remote.connection.manifest(
                container: vault, path: sealed, version: nil, base: nil)
            // What the store holds for the document: its sealed pieces and chunks, as stored.
            let ids = Set(try EndToEndKeys.references(of: try Manifest(applying: answer.delta, to: nil)).map(\.id))
            let stored = try await server.data.chunks.load(Array(ids)).reduce(0) { $0 + $1.payload.count }
            let used = try await server.remote.connection.account().used - usedBefore
            #expect(used == Int64(stored), "\(used) against \(stored)")
            #expect(used != Int64(files.values.reduce(0) { $0 + $1.count }))
            // The same tree again under another name: every chunk is held already.
            _ = try await PushEngine(remote: a).push(server.root + "/tree", as: try DocumentPath("copy"))
            let again = try await server.remote.connection.account().used - usedBefore
            #expect(again - used < 4096, "only the second document's own sealed manifest: \(again - used)")
        }
    }

    /// The change feed end to end: a device waiting on it wakes when another pushes (the
    /// document by its plain name), and a new feed resumes after what was acknowledged, with
    /// key-value writes by their plain keys.
    @Test func theFeedWakesAWaitingDeviceAndResumesFromItsCursorByPlainNames() async throws {
        try await LiveServer.run { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "pw")
            let a = try await Self.vault(server, "a").unlocked()
            let b = DocumentClient(remote: try Self.vault(server, "b"), device: "b")
            let cursorFile = server.root + "/cursor"
            let waiter = Task { () -> DocumentInfo? in
                for try await change in b.changes(cursor: FileCursorStore(path: cursorFile), wait: 60) {
                    if case .document(let info) = change { return info }
                }
                return nil
            }
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            try Files.write(server.root + "/notes.txt", Array(Self.marker.utf8))
            _ = try await PushEngine(remote: a).push(
                server.root + "/notes.txt", as: try DocumentPath("Harbour plans/notes.txt"))
            let woke = try #require(try await waiter.value)
            #expect(woke.path.value == "Harbour plans/notes.txt", "\(woke)")
            #expect(
                ContinuousClock.now - started < .seconds(45),
                "a waiting feed answers when a change arrives, not at its timeout")

            // Resumed from the cursor: the push's last state at most again, then a key by its plain name.
            _ = try await DocumentClient(remote: a, device: "a").setValue(.bool(true), forKey: "after push")
            var iterator = b.changes(cursor: FileCursorStore(path: cursorFile), wait: 5).makeAsyncIterator()
            var documents: [DocumentInfo] = []
            var key: KeyValueEntry? = nil
            while let change = try await iterator.next() {
                if case .key(let entry) = change {
                    key = entry
                    break
                }
                if case .document(let info) = change { documents.append(info) }
            }
            #expect(key?.key == "after push" && key?.value == .bool(true), "\(String(describing: key))")
            #expect(
                documents.count <= 2 && documents.allSatisfy { $0.path.value == "Harbour plans/notes.txt" },
                "\(documents)")
        }
    }

    /// Key-value entries end to end: last writer wins by the sealed time, then device; an older
    /// write changes nothing; the store's limits hold on sealed entries; a deletion travels.
    @Test func keyValuesEndToEndLastWriterWinsWithinTheLimits() async throws {
        var policy = StorePolicy()
        policy.keyValueMaximumKeys = 2
        try await LiveServer.run(policy: policy) { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "pw")
            let a = try await Self.vault(server, "a").unlocked()
            let keys = try #require(a.endToEnd)
            let vault = try ContainerName("vault")
            let write = { (value: Int64, time: Int64, device: String) in
                try await server.remote.connection.setValue(
                    container: vault,
                    keys.sealed(KeyValueWrite(key: "count", value: .int(value), timestampNs: time, device: device)))
            }
            let now = Int64(Date().timeIntervalSince1970 * 1e9) + 60_000_000_000
            #expect(try await write(10, now, "m").applied)
            #expect(try await write(11, now - 1, "z").applied == false)
            #expect(try await write(12, now, "a").applied == false)
            #expect(try await write(13, now, "n").applied)
            let b = DocumentClient(remote: try Self.vault(server, "b"), device: "b")
            #expect(try await b.value(forKey: "count") == .int(13))
            // A second key fits; a third is past the limit, refused, and changes nothing.
            _ = try await b.setValue(.string("dark"), forKey: "theme")
            let third = await #expect(throws: XferError.self) { _ = try await b.setValue(.int(1), forKey: "third") }
            #expect(third?.code == .quotaExceeded)
            #expect(try await DocumentClient(remote: a, device: "a").values().entries.map(\.key) == ["count", "theme"])
            // A deletion from one device is seen by the other.
            _ = try await DocumentClient(remote: a, device: "a").removeValue(forKey: "theme")
            #expect(try await b.value(forKey: "theme") == nil)
        }
    }

    @Test func keyValuesAreSealedWithTheirKeysAndReadOnAnotherDevice() async throws {
        try await LiveServer.run { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "pw")
            let a = DocumentClient(remote: try Self.vault(server, "a"), device: "a")
            let b = DocumentClient(remote: try Self.vault(server, "b"), device: "b")
            let written = try await a.setValue(
                .object(["theme": .string("harbour dark"), "size": .int(14)]), forKey: "preferences.editor")
            #expect(written.applied && written.entry.key == "preferences.editor")
            _ = try await a.setValue(.string("\(Self.marker)"), forKey: "last note")
            #expect(
                try await b.value(forKey: "preferences.editor")
                    == .object(["theme": .string("harbour dark"), "size": .int(14)]))
            #expect(try await b.values().entries.map(\.key) == ["last note", "preferences.editor"])
            try await b.removeValue(forKey: "last note")
            #expect(try await a.value(forKey: "last note") == nil)

            // The server keeps keyed hashes and sealed strings, and takes no plain write.
            let raw = try await server.remote.connection.values(container: try ContainerName("vault")).entries
            #expect(!raw.isEmpty && raw.allSatisfy { SealedValues.isSealed(key: $0.key, value: $0.value) })
            for file in Self.serverFiles(server.root + "/data") {
                for needle in ["preferences.editor", "harbour dark", "last note"] {
                    #expect(!Self.contains(file.bytes, Array(needle.utf8)), "\(file.path) holds \(needle)")
                }
            }
            let plain = await #expect(throws: XferError.self) {
                _ = try await DocumentClient(
                    remote: Remote(
                        connection: server.remote.connection, container: try ContainerName("vault"),
                        stateDirectory: server.root + "/state-c"), device: "c"
                )
                .setValue(.string("plain"), forKey: "k")
            }
            #expect(plain?.code == .unauthorized, "a device without the key is told to unlock")
            let direct = await #expect(throws: XferError.self) {
                _ = try await server.remote.connection.setValue(
                    container: try ContainerName("vault"),
                    KeyValueWrite(key: "k", value: .string("plain"), timestampNs: 1, device: "x"))
            }
            #expect(direct?.code == .encryptedContainer)

            // The change feed gives them opened (a deletion, its hashed key).
            let keys = try await Self.drain(b.changes(start: 0, wait: 0), server).compactMap {
                change -> KeyValueEntry? in
                if case .key(let entry) = change { entry } else { nil }
            }
            #expect(keys.count == 2 && keys[0].key == "preferences.editor" && keys[0].value != nil, "\(keys)")
            #expect(
                keys.count == 2 && keys[1].value == nil && keys[1].key.count == 64, "a deletion gives its hashed key")
        }
    }

    @Test func aTreePushedPlainAndEncryptedKeepsItsChunkListsApart() async throws {
        try await LiveServer.run { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            let tree = server.root + "/tree"
            let files = try Self.makeTree(tree)
            // Plain first: the root's state learns plain chunk ids, which the encrypted push must not reuse.
            _ = try await PushEngine(remote: server.otherDevice("a")).push(tree, as: try DocumentPath("plain.pkg"))
            let a = try await Self.vault(server, "a").unlocked()
            let sealed = try await PushEngine(remote: a).push(tree, as: try DocumentPath("doc"))
            #expect(sealed.chunksSent > 0)
            _ = try await PullEngine(remote: a).pull(try DocumentPath("doc"), into: server.root + "/out")
            for (path, bytes) in files { #expect(Files.read(server.root + "/out/" + path) == bytes, "\(path)") }
            // And back: a plain push of the same root after the encrypted one still works.
            try Files.write(tree + "/empty.txt", Array("now not empty".utf8))
            let plain = try await PushEngine(remote: server.otherDevice("a")).push(
                tree, as: try DocumentPath("plain.pkg"))
            #expect(plain.committed)
            _ = try await PullEngine(remote: server.otherDevice("c")).pull(
                try DocumentPath("plain.pkg"), into: server.root + "/plain-out")
            #expect(Files.read(server.root + "/plain-out/empty.txt") == Array("now not empty".utf8))
        }
    }

    @Test func aServerThatCallsAContainerPlainWhileThisDeviceHoldsItsKeyGetsNothing() async throws {
        let requests = FollowFeedTests.Requests()
        try await LiveServer.run(intercept: requests.count) { server in
            // A key this device holds for a container the server says is plain (another server
            // at the address, or a hostile one).
            let vault = try Self.vault(server, "a")
            try ContainerKeyFile(
                stateDirectory: vault.stateDirectory, server: vault.connection.server, container: vault.container
            )
            .write(ContainerKeyRing(single: ContainerKey.generate()))
            try Files.write(server.root + "/secret.txt", Array(Self.marker.utf8))
            let used = try await server.remote.connection.account().used
            let head = try await server.remote.connection.head(container: vault.container)
            // The push looks at its file while the server answers (Remote.whileUnlocking), and
            // sends nothing, not even its announcement, once the answer is this one.
            let refused = await #expect(throws: XferError.self) {
                _ = try await DocumentClient(remote: vault, device: "a").push(
                    server.root + "/secret.txt", as: "secret.txt")
            }
            #expect(
                refused?.code == .encryptedContainer && refused?.message.contains("nothing was sent") == true,
                "\(String(describing: refused))")
            #expect(
                try await server.remote.connection.head(container: vault.container) == head, "nothing was announced")
            let batch = await #expect(throws: XferError.self) {
                _ = try await PushEngine(remote: vault).pushMany([
                    PushItem(
                        path: server.root + "/secret.txt", name: try DocumentPath("secret.txt"),
                        state: try ClientState(root: server.root, stateDirectory: vault.stateDirectory))
                ])
            }
            #expect(batch?.code == .encryptedContainer)
            #expect(try await server.remote.connection.account().used == used)
            // A pull opens its destination's state while the server answers, and asks for
            // nothing and makes no directory once the answer is this one.
            _ = requests.take()
            let pull = await #expect(throws: XferError.self) {
                _ = try await DocumentClient(remote: vault, device: "a").pull(
                    "secret.txt", into: server.root + "/pulled/secret.txt")
            }
            #expect(pull?.code == .encryptedContainer, "\(String(describing: pull))")
            #expect(
                !FileManager.default.fileExists(atPath: server.root + "/pulled"),
                "the destination's directory was not made")
            #expect(requests.take() == ["key": 1], "the pull asked for nothing but the container's key")
        }
    }

    @Test func aKeyValueEntryTheServerRedatesOrMovesIsRefused() throws {
        let keys = EndToEndKeys(key: ContainerKey.generate())
        let write = KeyValueWrite(key: "theme", value: .string("dark"), timestampNs: 1_000, device: "laptop")
        let sealed = keys.sealed(write)
        let entry = KeyValueEntry(
            key: sealed.key, value: sealed.value, timestampNs: 1_000, device: "laptop", sequence: 3)
        #expect(try keys.opened(entry).value == .string("dark"))
        var redated = entry
        redated.timestampNs = 2_000
        #expect(throws: XferError.self) { try keys.opened(redated) }
        var moved = entry
        moved.key = keys.serverKey("other")
        #expect(throws: XferError.self) { try keys.opened(moved) }
        // Values are padded: close sizes seal to the same length.
        let lengths = Set(
            (40...60).map {
                keys.sealed(
                    KeyValueWrite(
                        key: "k", value: .string(String(repeating: "x", count: $0)), timestampNs: 1, device: "d")
                ).value!.description.count
            })
        #expect(lengths.count <= 4, "21 lengths in 8-byte steps")
    }

    /// Conflicts without modification times: the server sees none end to end, so of two edits
    /// from the same base the later push stays current and the other is kept as a conflict
    /// version; resolving by the plain name keeps either, and retention never prunes a conflict.
    @Test func theLaterPushWinsAConflictAndResolvingKeepsEither() async throws {
        var policy = StorePolicy()
        policy.keepVersions = 1
        policy.keepDays = 0
        try await LiveServer.run(policy: policy) { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "pw")
            let a = try await Self.vault(server, "a").unlocked()
            let b = try await Self.vault(server, "b").unlocked()
            let fileA = server.root + "/a.txt"
            let fileB = server.root + "/b.txt"
            try Files.write(fileA, Array("base".utf8))
            _ = try await PushEngine(remote: a).push(fileA, as: try DocumentPath("n.txt"))
            _ = try await PullEngine(remote: b).pull(try DocumentPath("n.txt"), into: fileB)
            // B's edit is older by its file's time, and pushed last: it wins all the same.
            try Files.write(fileA, Array("edit from a".utf8))
            try Files.setMtime(fileA, 3_000)
            try Files.write(fileB, Array("edit from b".utf8))
            try Files.setMtime(fileB, 1_000)
            let first = try await PushEngine(remote: a).push(fileA, as: try DocumentPath("n.txt"))
            let second = try await PushEngine(remote: b).push(fileB, as: try DocumentPath("n.txt"))
            #expect(
                first.state == .current && second.state == .current && second.conflicts == [first.version], "\(second)")
            let client = DocumentClient(remote: try Self.vault(server, "a"), device: "a")
            #expect(try await client.stat("n.txt").conflicts == [first.version])
            // More edits on B: the superseded versions go, the conflict stays.
            for round in 1...2 {
                try Files.write(fileB, Array("edit \(round) from b".utf8))
                _ = try await PushEngine(remote: b).push(fileB, as: try DocumentPath("n.txt"))
            }
            #expect(try await client.versions("n.txt").map(\.state) == [.current, .superseded, .conflict])
            // A's edit kept, the others in history; its bytes come back. Older than the current
            // version, it is committed again under a new number (versions only grow end to end).
            let kept = try await client.resolve("n.txt", keep: first.version, keepAll: true)
            let latest = try #require(try await client.versions("n.txt").map(\.version).max())
            #expect(
                kept.version == latest && kept.version > first.version && kept.state == .current
                    && kept.path.value == "n.txt")
            #expect(try await client.stat("n.txt").conflicts?.isEmpty != false, "the conflict is settled")
            _ = try await PullEngine(remote: b).pull(try DocumentPath("n.txt"), into: fileB)
            #expect(Files.read(fileB) == Array("edit from a".utf8))
        }
    }

    /// A batch push seals each manifest to the version it is to become; one whose next version
    /// was taken meanwhile (an announce from another device) is refused and pushed alone.
    @Test func aBatchPushSealsEachManifestToItsVersion() async throws {
        try await LiveServer.run { server in
            _ = try await EncryptedContainers(remote: try Self.vault(server, "a")).create(
                passphrase: "pw", parameters: Self.fast)
            _ = try await EncryptedContainers(remote: try Self.vault(server, "b")).unlock(passphrase: "pw")
            let a = try await Self.vault(server, "a").unlocked()
            let b = try await Self.vault(server, "b").unlocked()
            let root = server.root + "/files"
            for index in 0..<12 {
                try Files.write(root + "/f\(index).txt", Array("file \(index) of \(Self.marker)".utf8))
            }
            func items() throws -> [PushItem] {
                try (0..<12).map { index in
                    let path = root + "/f\(index).txt"
                    return PushItem(
                        path: path, name: try DocumentPath("f\(index).txt"), state: try a.clientState(root: path))
                }
            }
            let first = try await PushEngine(remote: a).pushMany(try items())
            #expect(first.allSatisfy { (try? $0.get())?.version == 1 }, "\(first)")
            // Another device announces f3's next version (2) and never commits it.
            _ = try await a.connection.announce(
                container: try ContainerName("vault"),
                AnnounceRequest(
                    path: try a.serverPath(try DocumentPath("f3.txt")), kind: .file, size: 0, mtimeNs: 0, mode: 0o600,
                    baseVersion: 1))
            for index in [2, 3] { try Files.write(root + "/f\(index).txt", Array("edited \(index)".utf8)) }
            let second = try await PushEngine(remote: a).pushMany(try items())
            #expect((try? second[2].get())?.version == 2 && (try? second[3].get())?.version == 3, "\(second)")
            #expect(
                second.enumerated().allSatisfy { index, result in
                    [2, 3].contains(index) || (try? result.get())?.committed == false
                })
            for index in [2, 3, 7] {
                _ = try await PullEngine(remote: b).pull(
                    try DocumentPath("f\(index).txt"), into: server.root + "/out\(index).txt")
                #expect(Files.read(server.root + "/out\(index).txt") == Files.read(root + "/f\(index).txt"))
            }
        }
    }
}
