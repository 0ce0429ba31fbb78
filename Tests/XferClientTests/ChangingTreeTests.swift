import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

/// A synced tree changes while a pass reads it (editors, compilers, git): that is never an
/// error of the pass, never a torn version, and a folder that is gone or unmounted is never
/// read as "the user deleted everything".
@Suite struct ChangingTreeTests {
    /// A pass whose events are collected until it ends.
    static func collecting(_ engine: SyncEngine, onEvent: @escaping @Sendable (SyncEvent) -> Void = { _ in }) -> Task<
        [SyncEvent], Never
    > {
        Task {
            var seen: [SyncEvent] = []
            for await event in engine.events {
                onEvent(event)
                seen.append(event)
                if case .passFinished = event { break }
            }
            return seen
        }
    }

    @Test func aFileThatVanishesDuringAPassIsLeftForTheNextPass() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/a"
            try Files.write(directory + "/Documents/a-big.bin", Files.random(count: 24 << 20, seed: 1))
            // Both large enough to be pushed alone (small files go in batches, first).
            try Files.write(directory + "/Documents/b.txt", Files.random(count: 5 << 20, seed: 2))
            let engine = try SyncEngine(directory: directory, remote: server.otherDevice("a"))
            // b.txt goes while a-big.bin (first in the pass) is being pushed.
            let events = Self.collecting(engine) { event in
                if case .progress(let path, _) = event, path.value == "Documents/a-big.bin" {
                    try? FileManager.default.removeItem(atPath: directory + "/Documents/b.txt")
                }
            }
            let pass = try await engine.syncOnce()
            let seen = await events.value
            #expect(pass.uploaded == 1 && pass.failed == 0 && pass.retried == 1, "\(pass)")
            #expect(
                seen.contains {
                    if case .retrying(let path, _) = $0 { return path.value == "Documents/b.txt" }
                    return false
                })
            #expect(try await server.client().stat("Documents/a-big.bin").state == .current)
            await #expect(throws: XferError.self) { try await server.client().stat("Documents/b.txt") }
            // The next pass finds nothing to do: it is gone, and was never synced.
            let next = try await engine.syncOnce()
            #expect(next.uploaded == 0 && next.retried == 0 && next.failed == 0 && next.removedRemotely == 0)
        }
    }

    @Test func aFileWrittenWhileItIsReadIsNotCommitted() async throws {
        try await LiveServer.run { server in
            let path = server.root + "/growing.bin"
            // Larger than what the reader may hold ahead of the first chunk's progress report
            // (two 4 MiB buffers), so the file is surely still being read when it is appended to.
            try Files.write(path, Files.random(count: 24 << 20, seed: 2))
            let written = Locked(false)
            await #expect {
                _ = try await PushEngine(remote: server.remote).push(
                    path, as: try DocumentPath("Documents/growing.bin")
                ) { _ in
                    // While the push reads the file (the first report comes with its first
                    // chunk, on the reader's delivery), another program appends to it.
                    guard
                        written.withLock({
                            let first = !$0
                            $0 = true
                            return first
                        })
                    else { return }
                    let handle = FileHandle(forWritingAtPath: path)!
                    handle.seekToEndOfFile()
                    handle.write(Data("appended".utf8))
                    try? handle.close()
                }
            } throws: { error in
                (error as? XferError)?.isLocalChange == true
            }
            #expect(written.value)
            // Nothing was committed: no torn version.
            let info = try? await server.client().stat("Documents/growing.bin")
            #expect(info == nil || info?.state != .current, "\(String(describing: info))")
            // Pushed again once it is quiet, whole.
            let report = try await PushEngine(remote: server.remote).push(
                path, as: try DocumentPath("Documents/growing.bin"))
            #expect(report.committed)
            _ = try await server.pull("Documents/growing.bin", server.root + "/copy.bin")
            #expect(Files.read(server.root + "/copy.bin") == Files.read(path))
        }
    }

    /// In a batch push (a sync pass's small documents, read together), a file written while it
    /// is read fails its own document only; the others are committed.
    @Test func aFileWrittenWhileABatchReadsItFailsOnlyItsDocument() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/batch"
            var items: [PushItem] = []
            // The first file read is large enough that it is surely still being read at the first
            // progress report (its first chunk's), when another program appends to it.
            let names = ["a-growing.bin", "b.txt", "c.txt"]
            for (index, name) in names.enumerated() {
                let path = directory + "/" + name
                try Files.write(path, Files.random(count: index == 0 ? 24 << 20 : 3_000, seed: UInt64(60 + index)))
                items.append(
                    PushItem(
                        path: path, name: try DocumentPath("Documents/" + name),
                        state: try ClientState(root: path, stateDirectory: server.stateDirectory)))
            }
            let written = Locked(false)
            let growing = items[0].path
            let results = try await PushEngine(remote: server.remote).pushMany(items) { _ in
                guard
                    written.withLock({
                        let first = !$0
                        $0 = true
                        return first
                    })
                else { return }
                let handle = FileHandle(forWritingAtPath: growing)!
                handle.seekToEndOfFile()
                handle.write(Data("appended".utf8))
                try? handle.close()
            }
            #expect(written.value)
            #expect(throws: XferError.self) { try results[0].get() }
            if case .failure(let error as XferError) = results[0] { #expect(error.isLocalChange, "\(error)") }
            for result in results.dropFirst() { #expect(try result.get().committed) }
            #expect(
                try await server.client().list().documents.map(\.path.value).sorted() == [
                    "Documents/b.txt", "Documents/c.txt"
                ])
        }
    }

    /// A file written once it has been read (here, after its chunks were sent) does not touch
    /// what was read: the version holds the content read, whole, and the state remembers the
    /// stamp read, so the next push sends the new content.
    @Test func aFileWrittenAfterItWasReadIsCommittedAsRead() async throws {
        try await LiveServer.run { server in
            let path = server.root + "/note.txt"
            let first = Files.random(count: 100_000, seed: 3)
            try Files.write(path, first)
            let written = Locked(false)
            let report = try await PushEngine(remote: server.remote).push(
                path, as: try DocumentPath("Documents/note.txt")
            ) { progress in
                // Bytes on the wire: the file's one batch of chunks was sent, so it was read to its end.
                guard progress.bytesOnWire > 0,
                    written.withLock({
                        let first = !$0
                        $0 = true
                        return first
                    })
                else { return }
                let handle = FileHandle(forWritingAtPath: path)!
                handle.seekToEndOfFile()
                handle.write(Data("appended".utf8))
                try? handle.close()
            }
            #expect(written.value && report.committed)
            _ = try await server.pull("Documents/note.txt", server.root + "/copy.txt")
            #expect(Files.read(server.root + "/copy.txt") == first)
            // The state holds the stamp read, not the file's now: the next push reads it again.
            let again = try await PushEngine(remote: server.remote).push(
                path, as: try DocumentPath("Documents/note.txt"))
            #expect(again.committed && again.version > report.version)
            _ = try await server.pull("Documents/note.txt", server.root + "/copy2.txt")
            #expect(Files.read(server.root + "/copy2.txt") == first + Array("appended".utf8))
        }
    }

    @Test func aFolderGoneOrUnmountedDeletesNothing() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/a"
            for index in 0..<3 { try Files.write(directory + "/Documents/n\(index).txt", Array("note \(index)".utf8)) }
            let engine = try SyncEngine(directory: directory, remote: server.otherDevice("a"))
            #expect(try await engine.syncOnce().uploaded == 3)
            #expect(FileManager.default.fileExists(atPath: directory + "/" + SyncDirectory.markerName))

            // The folder is removed: the pass stops, nothing is deleted on the server.
            try FileManager.default.moveItem(atPath: directory, toPath: server.root + "/moved-away")
            await #expect { try await engine.syncOnce() } throws: { ($0 as? XferError)?.code == .folderMissing }
            // An empty directory where it was (an unmounted mount point): the same.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            await #expect { try await engine.syncOnce() } throws: { ($0 as? XferError)?.code == .folderMissing }
            #expect(try await server.client().list().documents.count == 4)  // three notes and Documents
            let health = try engine.directory.state.health()
            #expect(
                health?.phase == .folderMissing && health?.running == true
                    && health?.lastError?.contains("marker") == true,
                "\(String(describing: health))")

            // Put back: it syncs again as before.
            try FileManager.default.removeItem(atPath: directory)
            try FileManager.default.moveItem(atPath: server.root + "/moved-away", toPath: directory)
            let back = try await engine.syncOnce()
            #expect(back.removedRemotely == 0 && back.uploaded == 0)
            // The user who did delete everything (the marker stays: `rm DIR/*` leaves dot files) is followed.
            for index in 0..<3 { try FileManager.default.removeItem(atPath: directory + "/Documents/n\(index).txt") }
            #expect(try await engine.syncOnce().removedRemotely == 3)
            await engine.close()
            #expect(try engine.directory.state.health()?.phase == .stopped)
        }
    }

    @Test func aWatchWaitsForAMissingFolderAndWatchesItAgain() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/a"
            try Files.write(directory + "/Documents/kept.txt", Array("kept".utf8))
            var options = SyncOptions()
            options.folderCheckInterval = .milliseconds(200)
            options.feedWait = 5
            let engine = try SyncEngine(directory: directory, remote: server.otherDevice("a"), options: options)
            let watching = Task { try await engine.watch() }
            defer { watching.cancel() }
            #expect(
                await engine.awaitEvent {
                    if case .uploaded(let path, _, _) = $0 { return path.value == "Documents/kept.txt" }
                    return false
                })

            async let missing = engine.awaitEvent {
                if case .folderMissing = $0 { return true }
                return false
            }
            try FileManager.default.moveItem(atPath: directory, toPath: server.root + "/away")
            try await Task.sleep(for: .milliseconds(100))
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try Files.write(directory + "/Documents/other.txt", Array("another folder here".utf8))
            #expect(await missing)
            #expect(try await server.client().stat("Documents/kept.txt").state == .current)
            #expect(
                (try? await server.client().stat("Documents/other.txt")) == nil,
                "nothing is read from a folder that is not the synced one")

            // Back in place: watched afresh, so a new save there goes up without a rescan.
            try FileManager.default.removeItem(atPath: directory)
            try FileManager.default.moveItem(atPath: server.root + "/away", toPath: directory)
            try await Task.sleep(for: .seconds(1))
            async let uploaded = engine.awaitEvent {
                if case .uploaded(let path, _, _) = $0 { return path.value == "Documents/new.txt" }
                return false
            }
            try Files.write(directory + "/Documents/new.txt", Array("new".utf8))
            #expect(await uploaded)
            #expect(try await server.client().stat("Documents/kept.txt").state == .current)
            watching.cancel()
        }
    }

    /// While watching, a file written a moment ago waits for the quiet period: one that lives
    /// for less (a lock file) never travels, and one left alone goes once the period is over.
    @Test func aShortLivedFileNeverTravelsAndASettledOneGoesAfterTheQuietPeriod() async throws {
        try await LiveServer.run { server in
            let directory = server.root + "/a"
            try FileManager.default.createDirectory(atPath: directory + "/Documents", withIntermediateDirectories: true)
            var options = SyncOptions()
            options.feedWait = 10
            options.debounce = .milliseconds(20)
            options.quietPeriod = .milliseconds(1500)
            let engine = try SyncEngine(directory: directory, remote: server.otherDevice("a"), options: options)
            let watching = Task { try await engine.watch() }
            defer { watching.cancel() }
            #expect(
                await engine.awaitEvent {
                    if case .passFinished = $0 { return true }
                    return false
                })

            let written = ContinuousClock.now
            async let settled = engine.awaitEvent {
                if case .uploaded(let path, _, _) = $0 { return path.value == "Documents/kept.txt" }
                return false
            }
            // A lock file lives for 300 ms, rewritten as it goes; the kept file is written once.
            try Files.write(directory + "/Documents/index.lock", Array("locked".utf8))
            try Files.write(directory + "/Documents/kept.txt", Array("kept".utf8))
            try await Task.sleep(for: .milliseconds(150))
            try Files.write(directory + "/Documents/index.lock", Array("locked again".utf8))
            try await Task.sleep(for: .milliseconds(150))
            try FileManager.default.removeItem(atPath: directory + "/Documents/index.lock")
            #expect(await settled)
            #expect(ContinuousClock.now - written >= .milliseconds(1500), "pushed before the quiet period was over")
            #expect(try await server.client().stat("Documents/kept.txt").state == .current)
            let feed = try await server.remote.connection.changes(container: .default, after: 0)
            #expect(!feed.changes.contains { $0.path.value == "Documents/index.lock" }, "the lock file travelled")
            watching.cancel()
        }
    }
}
