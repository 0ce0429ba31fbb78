import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

@testable import XferServer

/// `xfer sync` on an end-to-end encrypted container: two folders on two devices
/// that hold the key stay in sync both ways (edits, new files and folders, renames, deletions,
/// conflicts, evict and fetch) while the server keeps only sealed names, chunks and manifests.
@Suite struct EndToEndSyncTests {
    /// A device holding the key of container `vault`: its folder and engine.
    struct Device {
        let directory: String
        let engine: SyncEngine

        init(_ server: LiveServer, _ name: String, remote: Remote, options: SyncOptions = SyncOptions()) throws {
            directory = server.root + "/" + name
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            engine = try SyncEngine(directory: directory, remote: remote, options: options)
        }

        func path(_ relative: String) -> String { directory + "/" + relative }

        func status() async throws -> [String: DocumentSyncState] {
            Dictionary(uniqueKeysWithValues: try await engine.directory.status().documents.map { ($0.path, $0.state) })
        }
    }

    static let marker = EndToEndPushPullTests.marker

    /// Two devices on an encrypted `vault`: A made it, B joined with the passphrase.
    static func devices(_ server: LiveServer) async throws -> (a: Remote, b: Remote) {
        _ = try await EncryptedContainers(remote: try EndToEndPushPullTests.vault(server, "a"))
            .create(passphrase: "correct horse", parameters: EndToEndPushPullTests.fast)
        _ = try await EncryptedContainers(remote: try EndToEndPushPullTests.vault(server, "b")).unlock(
            passphrase: "correct horse")
        return (
            try await EndToEndPushPullTests.vault(server, "a").unlocked(),
            try await EndToEndPushPullTests.vault(server, "b").unlocked()
        )
    }

    /// A pass that changed nothing and found nothing wrong.
    static func isQuiet(_ summary: SyncSummary) -> Bool {
        summary.uploaded == 0 && summary.downloaded == 0 && summary.removedLocally == 0 && summary.removedRemotely == 0
            && summary.directories == 0 && summary.failed == 0 && summary.conflicts == 0
    }

    @Test func twoFoldersStayInSyncWhileTheServerReadsNothing() async throws {
        try await LiveServer.run { server in
            let (ra, rb) = try await Self.devices(server)
            let a = try Device(server, "a", remote: ra)
            let b = try Device(server, "b", remote: rb)
            let notes = Array(String(repeating: Self.marker + "\n", count: 200).utf8)
            let survey = Files.random(count: 600_000, seed: 71)
            try Files.write(a.path("Harbour plans/notes.txt"), notes)
            try Files.write(a.path("Harbour plans/survey.bin"), survey)
            try Files.write(a.path("Draft.pkg/index.json"), Array("{\"harbour\": true}".utf8))
            try Files.write(a.path("Draft.pkg/media/photo.raw"), Files.random(count: 200_000, seed: 72))
            try Files.write(a.path("empty.txt"), [])
            try FileManager.default.createDirectory(atPath: a.path("Empty folder"), withIntermediateDirectories: true)

            let first = try await a.engine.syncOnce()
            #expect(first.uploaded == 4 && first.directories == 2 && first.failed == 0, "\(first)")
            let fetched = try await b.engine.syncOnce()
            #expect(fetched.downloaded == 4 && fetched.directories == 2 && fetched.failed == 0, "\(fetched)")
            for name in [
                "Harbour plans/notes.txt", "Harbour plans/survey.bin", "Draft.pkg/index.json",
                "Draft.pkg/media/photo.raw", "empty.txt"
            ] {
                #expect(Files.read(b.path(name)) == Files.read(a.path(name)), "\(name)")
            }
            var isDirectory: ObjCBool = false
            #expect(
                FileManager.default.fileExists(atPath: b.path("Empty folder"), isDirectory: &isDirectory)
                    && isDirectory.boolValue)
            #expect(try await a.status().values.allSatisfy { $0 == .synced })
            #expect(try await b.status().values.allSatisfy { $0 == .synced })
            // Nothing changed: the next passes on both sides do nothing (a directory's mode,
            // which is not kept end to end, is each device's own and is no change).
            #expect(Self.isQuiet(try await a.engine.syncOnce()))
            #expect(Self.isQuiet(try await b.engine.syncOnce()))

            // The server holds sealed names only, and no content, name or plain chunk id.
            let listed = try await server.remote.connection.list(container: try ContainerName("vault"), prefix: "")
            #expect(
                listed.documents.count == 6 && listed.documents.allSatisfy { NameSealing.isSealed(path: $0.path.value) }
            )
            var needles: [[UInt8]] = [
                Array(Self.marker.prefix(24).utf8), Array("Harbour plans".utf8), Array("survey.bin".utf8),
                Array("Draft.pkg".utf8), Array("Empty folder".utf8), Array(survey[5000..<5032])
            ]
            needles += [ChunkID.of(survey).bytes, Array(ChunkID.of(notes).hex.utf8)]
            #expect(try await SealedServerTests.revealed(needles, metadataOf: server).isEmpty)
            #expect(SealedServerTests.revealed(needles, in: try await SealedServerTests.packBytes(server.data)) == 0)

            // An edit, a new file and a rename on B reach A; a rename moves no file data.
            try Files.write(b.path("Draft.pkg/index.json"), Array("{\"harbour\": \"phase two\"}".utf8))
            try Files.write(b.path("Harbour plans/minutes.txt"), Array("minutes of \(Self.marker)".utf8))
            try FileManager.default.moveItem(
                atPath: b.path("Harbour plans/survey.bin"), toPath: b.path("Harbour plans/survey-2026.bin"))
            let sent = try await b.engine.syncOnce()
            #expect(sent.uploaded == 3 && sent.removedRemotely == 1 && sent.failed == 0, "\(sent)")
            #expect(try await a.status()["Draft.pkg"] == .pendingDownload)
            let came = try await a.engine.syncOnce()
            #expect(came.downloaded == 3 && came.removedLocally == 1 && came.failed == 0, "\(came)")
            #expect(Files.read(a.path("Draft.pkg/index.json")) == Array("{\"harbour\": \"phase two\"}".utf8))
            #expect(Files.read(a.path("Harbour plans/survey-2026.bin")) == survey)
            #expect(!FileManager.default.fileExists(atPath: a.path("Harbour plans/survey.bin")))
            #expect(Files.read(a.path("Harbour plans/minutes.txt")) == Array("minutes of \(Self.marker)".utf8))

            // A deletion on A (a file and a folder) reaches B.
            try FileManager.default.removeItem(atPath: a.path("empty.txt"))
            try FileManager.default.removeItem(atPath: a.path("Empty folder"))
            let removed = try await a.engine.syncOnce()
            #expect(removed.removedRemotely == 1 && removed.directories == 1, "\(removed)")
            let gone = try await b.engine.syncOnce()
            #expect(gone.removedLocally == 1 && gone.directories == 1, "\(gone)")
            #expect(
                !FileManager.default.fileExists(atPath: b.path("empty.txt"))
                    && !FileManager.default.fileExists(atPath: b.path("Empty folder")))

            // The same file edited on both. The server sees no modification time end to end, so
            // the later push wins (a tie goes to the newcomer) and the other is kept as a conflict version.
            try Files.write(a.path("Harbour plans/notes.txt"), Array("A's notes".utf8))
            try Files.write(b.path("Harbour plans/notes.txt"), Array("B's notes".utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            let won = try await b.engine.syncOnce()
            #expect(won.uploaded == 1 && won.conflicts == 1 && won.failed == 0, "\(won)")
            let lost = try await a.engine.syncOnce()
            #expect(lost.downloaded == 1 && lost.conflicts == 1, "\(lost)")
            #expect(Files.read(a.path("Harbour plans/notes.txt")) == Array("B's notes".utf8))
            let versions = try await DocumentClient(remote: rb, device: "b").versions("Harbour plans/notes.txt")
            let loser = try #require(versions.first { $0.state == .conflict }, "\(versions)")
            let kept = server.root + "/kept.txt"
            _ = try await DocumentClient(remote: rb, device: "b").pull(
                "Harbour plans/notes.txt", into: kept, version: loser.version)
            #expect(Files.read(kept) == Array("A's notes".utf8))
            #expect(try await a.status()["Harbour plans/notes.txt"] == .conflict)
            // Resolved for A's edit (by its plain name), both folders get it.
            _ = try await DocumentClient(remote: rb, device: "b").resolve(
                "Harbour plans/notes.txt", keep: loser.version)
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            #expect(Files.read(b.path("Harbour plans/notes.txt")) == Array("A's notes".utf8))
            #expect(try await b.status()["Harbour plans/notes.txt"] == .synced)

            // Evict asks the server (by the sealed name) whether it holds the version; fetch brings it back.
            try await a.engine.directory.evict(try DocumentPath("Harbour plans/survey-2026.bin"))
            #expect(!FileManager.default.fileExists(atPath: a.path("Harbour plans/survey-2026.bin")))
            #expect(try await a.status()["Harbour plans/survey-2026.bin"] == .evicted)
            try await a.engine.directory.fetch(try DocumentPath("Harbour plans/survey-2026.bin"))
            #expect(Files.read(a.path("Harbour plans/survey-2026.bin")) == survey)
        }
    }

    /// A name damaged on the server does not open, so the listing lacks its document: that is
    /// not the document deleted. The device keeps its copy, says why, and deletes nothing until
    /// the listing is whole again; `xfer verify --documents` names the damage.
    @Test func aDamagedNameOnTheServerDeletesNothingHere() async throws {
        try await LiveServer.run { server in
            let (ra, rb) = try await Self.devices(server)
            // A lists the server whole every pass, as a pass does once an hour; B follows the feed.
            var listing = SyncOptions()
            listing.fullListingInterval = .zero
            let a = try Device(server, "a", remote: ra, options: listing)
            let b = try Device(server, "b", remote: rb)
            try Files.write(a.path("keep.txt"), Array("keep me\n".utf8))
            try Files.write(a.path("other.txt"), Array("other\n".utf8))
            _ = try await a.engine.syncOnce()
            let fetched = try await b.engine.syncOnce()
            #expect(fetched.downloaded == 2 && fetched.failed == 0, "\(fetched)")

            // One byte of one stored name, changed on the server (within the name's alphabet).
            let vault = try ContainerName("vault")
            let listed = try await server.remote.connection.list(container: vault, prefix: "").documents.map(
                \.path.value)
            try #require(listed.count == 2)
            let store = try #require(server.data.metadata as? any SQLMetadataStore)
            let original = listed[0]
            var damaged = Array(original.utf8)
            damaged[damaged.count - 3] =
                damaged[damaged.count - 3] == UInt8(ascii: "a") ? UInt8(ascii: "b") : UInt8(ascii: "a")
            let damagedName = String(decoding: damaged, as: UTF8.self)
            try await store.write { tx in
                _ = try tx.sql.rows("UPDATE documents SET path = ? WHERE path = ?", damagedName, original)
            }

            // The document whose name no longer opens is missing from A's listing: that is not
            // "deleted on the server". A keeps its copy, says why, and deletes nothing.
            let before = try Set(FileManager.default.contentsOfDirectory(atPath: a.directory))
            for _ in 0..<2 {
                let told = Task {
                    await a.engine.awaitEvent(seconds: 60) { event in
                        if case .namesUnopened(count: 1, deletionsHeld: 1) = event { true } else { false }
                    }
                }
                try await Task.sleep(for: .milliseconds(50))
                let pass = try await a.engine.syncOnce()
                #expect(pass.removedLocally == 0 && pass.removedRemotely == 0 && pass.deletionsHeld == 1, "\(pass)")
                #expect(await told.value)
            }
            #expect(try Set(FileManager.default.contentsOfDirectory(atPath: a.directory)) == before)
            #expect(
                Files.read(a.path("keep.txt")) == Array("keep me\n".utf8)
                    && Files.read(a.path("other.txt")) == Array("other\n".utf8))
            // Damage is no change in the feed: B, following it, keeps the view it had.
            #expect(Self.isQuiet(try await b.engine.syncOnce()))
            #expect(
                Files.read(b.path("keep.txt")) == Array("keep me\n".utf8)
                    && Files.read(b.path("other.txt")) == Array("other\n".utf8))
            // The dry run says so too, and the device's check of the server names the damage.
            let preview = try await a.engine.directory.preview()
            #expect(
                preview.steps.contains { $0.action == .held && $0.reason.contains("do not open") }, "\(preview.steps)")
            let verified = try await ContainerVerify(remote: rb).run()
            #expect(!verified.ok && verified.problems.contains { $0.problem.contains("does not open") }, "\(verified)")

            // The name mended: the listing is whole again, and the passes are quiet.
            try await store.write { tx in
                _ = try tx.sql.rows("UPDATE documents SET path = ? WHERE path = ?", original, damagedName)
            }
            #expect(Self.isQuiet(try await a.engine.syncOnce()))
            #expect(Self.isQuiet(try await b.engine.syncOnce()))
        }
    }

    /// What an operator holding the metadata database does to roll a document back: makes an
    /// older version current again, with nothing sealed changed.
    static func rollBack(_ server: LiveServer, sealedPath: String, to version: Int64) async throws {
        let store = try #require(server.data.metadata as? any SQLMetadataStore)
        let document = "(SELECT id FROM documents WHERE path = ?)"
        try await store.write { tx in
            _ = try tx.sql.rows(
                "UPDATE versions SET state = 'superseded' WHERE state = 'current' AND document_id = \(document)",
                sealedPath)
            _ = try tx.sql.rows(
                "UPDATE versions SET state = 'current' WHERE version = ? AND document_id = \(document)", version,
                sealedPath)
            _ = try tx.sql.rows("UPDATE documents SET current_version = ? WHERE path = ?", version, sealedPath)
        }
    }

    @Test func aVersionRolledBackOnTheServerReplacesNothingHere() async throws {
        try await LiveServer.run { server in
            let (ra, rb) = try await Self.devices(server)
            var listing = SyncOptions()
            listing.fullListingInterval = .zero
            let a = try Device(server, "a", remote: ra)
            let b = try Device(server, "b", remote: rb, options: listing)
            try Files.write(a.path("a.txt"), Array("one\n".utf8))
            _ = try await a.engine.syncOnce()
            _ = try await b.engine.syncOnce()
            try Files.write(a.path("a.txt"), Array("two, the newer\n".utf8))
            _ = try await a.engine.syncOnce()
            #expect(try await b.engine.syncOnce().downloaded == 1)
            _ = try await PullEngine(remote: rb).pull(try DocumentPath("a.txt"), into: server.root + "/pulled.txt")

            let vault = try ContainerName("vault")
            let sealed = try #require(
                try await server.remote.connection.list(container: vault, prefix: "").documents.first?.path.value)
            try await Self.rollBack(server, sealedPath: sealed, to: 1)

            // B saw version 2 current: version 1 current again is refused, and its copy stays.
            let told = Task {
                await b.engine.awaitEvent(seconds: 60) { event in
                    if case .rolledBack(_, server: 1, seen: 2) = event { true } else { false }
                }
            }
            try await Task.sleep(for: .milliseconds(50))
            let pass = try await b.engine.syncOnce()
            #expect(pass.rolledBack == 1 && pass.downloaded == 0 && pass.removedLocally == 0, "\(pass)")
            #expect(await told.value)
            #expect(Files.read(b.path("a.txt")) == Array("two, the newer\n".utf8))
            #expect(try await b.status()["a.txt"] == .rolledBack)
            #expect(
                try await b.engine.directory.preview().steps.contains {
                    $0.action == .held && $0.reason.contains("rolled back")
                })
            // So does a pull on either device, into any destination: the marks are the device's.
            for (remote, destination) in [(rb, "/pulled.txt"), (rb, "/elsewhere.txt"), (ra, "/on-a.txt")] {
                await #expect {
                    _ = try await PullEngine(remote: remote).pull(
                        try DocumentPath("a.txt"), into: server.root + destination)
                } throws: { ($0 as? XferError)?.code == .rolledBack }
            }
            #expect(Files.read(server.root + "/pulled.txt") == Array("two, the newer\n".utf8))
            #expect(!FileManager.default.fileExists(atPath: server.root + "/elsewhere.txt"))
            // An older version asked for by name is still the user's to take.
            _ = try await PullEngine(remote: rb).pull(
                try DocumentPath("a.txt"), into: server.root + "/v1.txt", version: 1)
            #expect(Files.read(server.root + "/v1.txt") == Array("one\n".utf8))
        }
    }

    @Test func aDeletionNoDeviceSealedRemovesNothingHere() async throws {
        try await LiveServer.run { server in
            let (ra, rb) = try await Self.devices(server)
            let a = try Device(server, "a", remote: ra)
            let b = try Device(server, "b", remote: rb)
            try Files.write(a.path("kept.txt"), Array("kept\n".utf8))
            try Files.write(a.path("gone.txt"), Array("gone\n".utf8))
            _ = try await a.engine.syncOnce()
            #expect(try await b.engine.syncOnce().downloaded == 2)

            // The operator deletes one document as the server would, with no seal.
            let vault = try ContainerName("vault")
            let keys = try #require(rb.endToEnd)
            let sealed = try DocumentPath(try keys.sealedPath("kept.txt"))
            let account = try #require(
                try await server.data.metadata.principal(tokenHash: TokenHash.hash(server.token)))
            _ = try await server.data.metadata.delete(
                account: account.accountID, container: vault, path: sealed, baseVersion: nil)
            // A device deletes the other, sealed.
            try FileManager.default.removeItem(atPath: a.path("gone.txt"))
            #expect(try await a.engine.syncOnce().removedRemotely == 1)

            let pass = try await b.engine.syncOnce()
            #expect(pass.removedLocally == 1 && pass.unverified == 1 && pass.failed == 1, "\(pass)")
            #expect(Files.read(b.path("kept.txt")) == Array("kept\n".utf8), "the forged deletion removed nothing")
            #expect(!FileManager.default.fileExists(atPath: b.path("gone.txt")), "the sealed one went")
            #expect(
                try await b.engine.directory.preview().steps.contains {
                    $0.action == .held && $0.reason.contains("sealed")
                })
            // The server refuses a deletion without a seal from anyone but its operator.
            await #expect {
                _ = try await rb.connection.delete(
                    container: vault, path: try DocumentPath(try keys.sealedPath("x")), baseVersion: 1)
            } throws: { ($0 as? XferError)?.code == .encryptedContainer }
        }
    }

    @Test func anOlderKeyValueEntryReplayedByTheServerIsRefused() async throws {
        try await LiveServer.run { server in
            let (ra, rb) = try await Self.devices(server)
            let a = DocumentClient(remote: ra, device: "a")
            let b = DocumentClient(remote: rb, device: "b")
            try await a.setValue(.string("dark"), forKey: "theme")
            let store = try #require(server.data.metadata as? any SQLMetadataStore)
            let old = try await store.read { tx in
                try tx.sql.rows("SELECT key, value, timestamp_ns, device FROM kv").map {
                    (try $0.text("key"), try $0.text("value"), try $0.int("timestamp_ns"), try $0.text("device"))
                }
            }
            try #require(old.count == 1)
            try await Task.sleep(for: .milliseconds(5))
            try await a.setValue(.string("light"), forKey: "theme")
            #expect(try await b.value(forKey: "theme") == .string("light"))

            // The operator puts the older entry back, sealed value, time and device as they were.
            try await store.write { tx in
                _ = try tx.sql.rows(
                    "UPDATE kv SET value = ?, timestamp_ns = ?, device = ? WHERE key = ?", old[0].1, old[0].2, old[0].3,
                    old[0].0)
            }
            await #expect { _ = try await b.entry(forKey: "theme") } throws: { ($0 as? XferError)?.code == .rolledBack }
            let listed = try await b.values()
            #expect(
                listed.entries.isEmpty && listed.withheld?.count == 1 && listed.withheld?[0].contains("theme") == true,
                "\(listed)")
            // The device that wrote the newer value refuses the older one too.
            await #expect { _ = try await a.entry(forKey: "theme") } throws: { ($0 as? XferError)?.code == .rolledBack }
        }
    }

    @Test func aFolderKeepsItsKeyAndADeviceWithoutOneSyncsNothing() async throws {
        try await LiveServer.run { server in
            let (ra, _) = try await Self.devices(server)
            let a = try Device(server, "a", remote: ra)
            try Files.write(a.path("notes.txt"), Array(Self.marker.utf8))
            #expect(try await a.engine.syncOnce().uploaded == 1)
            await a.engine.close()

            // Opened later with a remote that was not unlocked (`xfer status`, evict, a daemon
            // restarted): the folder syncs under the key it recorded, held on this device.
            let folder = try SyncDirectory(directory: a.directory, remote: try EndToEndPushPullTests.vault(server, "a"))
            #expect(try await folder.status().documents.map(\.path) == ["notes.txt"])
            try await folder.evict(try DocumentPath("notes.txt"))
            try await folder.fetch(try DocumentPath("notes.txt"))
            #expect(Files.read(a.path("notes.txt")) == Array(Self.marker.utf8))

            // A device without the key: its engine says to unlock, and nothing arrives.
            let c = try Device(server, "c", remote: try EndToEndPushPullTests.vault(server, "c"))
            let refused = await #expect(throws: XferError.self) { _ = try await c.engine.syncOnce() }
            #expect(
                refused?.code == .unauthorized && refused?.message.contains("xfer key unlock") == true,
                "\(String(describing: refused))")
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: c.directory).filter { !$0.hasPrefix(".") }.isEmpty)

            // A folder that synced in the clear is never synced under a key, nor one that synced
            // under a key under another.
            let plainBox = try ContainerName("plainbox")
            let plain = try Device(
                server, "plain",
                remote: Remote(
                    connection: server.remote.connection, container: plainBox,
                    stateDirectory: server.root + "/state-plain"))
            try Files.write(plain.path("x.txt"), Array("x".utf8))
            #expect(try await plain.engine.syncOnce().uploaded == 1)
            await plain.engine.close()
            let keyed = Remote(
                connection: server.remote.connection, container: plainBox,
                stateDirectory: server.root + "/state-plain", endToEnd: ra.endToEnd)
            let mixed = #expect(throws: XferError.self) {
                _ = try SyncDirectory(directory: plain.directory, remote: keyed)
            }
            #expect(
                mixed?.code == .conflict && mixed?.message.contains("in the clear") == true,
                "\(String(describing: mixed))")
            let other = Remote(
                connection: server.remote.connection, container: try ContainerName("vault"),
                stateDirectory: server.root + "/state-a", endToEnd: EndToEndKeys(key: .generate()))
            let rekeyed = #expect(throws: XferError.self) {
                _ = try SyncDirectory(directory: a.directory, remote: other)
            }
            #expect(
                rekeyed?.code == .conflict && rekeyed?.message.contains("under key") == true,
                "\(String(describing: rekeyed))")
            #expect(Files.read(a.path("notes.txt")) == Array(Self.marker.utf8))
        }
    }
}
