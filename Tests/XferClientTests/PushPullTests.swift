import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferClient

@Suite struct PushPullTests {
    @Test func packageRoundTripKeepsContentModesAndTimes() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/src"
            try Files.write(source + "/big.bin", Files.random(count: 3_000_000, seed: 1))
            try Files.write(source + "/bin/run.sh", Array("#!/bin/sh\necho hi\n".utf8), mode: 0o755)
            try Files.write(source + "/secret", Array("s".utf8), mode: 0o600)
            try Files.write(source + "/deep/er/empty", [])
            try FileManager.default.createSymbolicLink(atPath: source + "/link", withDestinationPath: "bin/run.sh")
            try FileManager.default.createDirectory(atPath: source + "/void", withIntermediateDirectories: true)
            let pushed = try await server.push(source, "Documents/Project.pkg")
            #expect(pushed.version == 1 && pushed.files == 5 && pushed.chunksSent == pushed.chunks)

            let listed = try await server.client().list(prefix: "Documents/")
            #expect(listed.documents.map(\.path.value) == ["Documents/Project.pkg"])
            // (End to end the server knows the size it stores, not the content's.)
            #expect(
                listed.documents.first?.kind == .package
                    && (listed.documents.first?.size == pushed.bytes || LiveServer.endToEnd))

            let other = server.otherDevice("b")
            let pulled = try await server.pull("Documents/Project.pkg", server.root + "/dst", from: other)
            #expect(pulled.version == 1 && pulled.chunksFetched == pushed.chunks && pulled.bytes == pushed.bytes)
            #expect(try Files.snapshot(server.root + "/dst") == Files.snapshot(source))

            // Pulling again moves nothing.
            let again = try await server.pull("Documents/Project.pkg", server.root + "/dst", from: other)
            #expect(again.chunksFetched == 0 && again.manifestBytes == 0)
        }
    }

    /// A pull's downloads are split evenly among the requests in flight only when they write
    /// many files: a first pull of a package of 70 files is, an edit pull that fetches its one
    /// changed file (2 MB, over four shares of 256 KiB) asks in one request, as a pull of that
    /// file alone would.
    @Test func onlyDownloadsThatWriteManyFilesAreSplitAmongRequests() async throws {
        let requests = FollowFeedTests.Requests()
        try await LiveServer.run(intercept: requests.count) { server in
            let source = server.root + "/src"
            for index in 0..<70 { try Files.write(source + "/small/\(index).txt", Array("small file \(index)".utf8)) }
            try Files.write(source + "/big.bin", Files.random(count: 2_000_000, seed: 7))
            _ = try await server.push(source, "Documents/Many.pkg")
            let other = server.otherDevice("b")
            // End to end, a pull first fetches its sealed manifest's pieces in one request of its own.
            let manifestRequests = LiveServer.endToEnd ? 1 : 0
            _ = requests.take()
            let first = try await server.pull("Documents/Many.pkg", server.root + "/dst", from: other)
            #expect(first.files == 71)
            #expect(
                (requests.take()["download"] ?? 0) > 1 + manifestRequests, "71 files written: the downloads are split")

            try Files.write(source + "/big.bin", Files.random(count: 2_000_000, seed: 8))
            _ = try await server.push(source, "Documents/Many.pkg")
            _ = requests.take()
            let edit = try await server.pull("Documents/Many.pkg", server.root + "/dst", from: other)
            #expect(edit.version == 2 && edit.chunksFetched > 4)
            #expect(
                requests.take()["download"] == 1 + manifestRequests,
                "one file written: one request, as for that file alone")
            #expect(try Files.snapshot(server.root + "/dst") == Files.snapshot(source))
        }
    }

    /// A package of many files (made durable by one syncfs, each file created by its first
    /// chunk and finished by its last): content, modes and times all arrive, read-only and
    /// empty files, files sharing chunks and a file of many chunks included.
    @Test func aPackageOfManyFilesKeepsContentModesAndTimes() async throws {
        #expect(PullEngine.syncWholeFileSystemFrom <= 100)
        try await LiveServer.run { server in
            let source = server.root + "/many"
            for index in 0..<100 {
                let mode = [0o644, 0o444, 0o755, 0o600][index % 4]
                let bytes = index % 10 == 9 ? [] : Files.random(count: 50 + index * 97, seed: UInt64(index % 30))
                try Files.write(source + "/d\(index % 6)/f\(index)", bytes, mode: mode)
                try Files.setMtime(source + "/d\(index % 6)/f\(index)", 1_600_000_000 + Double(index) * 1.5)
            }
            try Files.write(source + "/large.bin", Files.random(count: 3 << 20, seed: 77))
            try FileManager.default.createSymbolicLink(atPath: source + "/d0/link", withDestinationPath: "f6")
            let pushed = try await server.push(source, "many.pkg")
            #expect(pushed.files == 102)  // the symlink counts
            let pulled = try await server.pull("many.pkg", server.root + "/copy", from: server.otherDevice("b"))
            #expect(pulled.version == 1)
            #expect(try Files.snapshot(server.root + "/copy") == Files.snapshot(source))
            // Nothing of the staging copy is left beside it.
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: server.root).filter { $0.contains("xfer-") }.isEmpty
            )
        }
    }

    @Test func editsSendOnlyChangedChunksBothWays() async throws {
        try await LiveServer.run { server in
            let size = 100 << 20
            var content = Files.random(count: size, seed: 7)
            let path = server.root + "/big.bin"
            try Files.write(path, content)
            let first = try await server.push(path, "big.bin")
            #expect(first.chunksSent == first.chunks)
            let reader = server.otherDevice("reader")
            _ = try await server.pull("big.bin", server.root + "/copy.bin", from: reader)

            // One byte changed: at most two chunks go up.
            content[size / 3] ^= 0x5A
            try Files.write(path, content)
            let oneByte = try await server.push(path, "big.bin")
            #expect(oneByte.version == 2 && oneByte.chunksSent >= 1 && oneByte.chunksSent <= 2)

            // 100 bytes inserted in the middle: at most three chunks, and little on the wire both ways.
            content.insert(contentsOf: Files.random(count: 100, seed: 99), at: size / 2)
            try Files.write(path, content)
            let inserted = try await server.push(path, "big.bin")
            #expect(inserted.chunksSent <= 3)
            let pulled = try await server.pull("big.bin", server.root + "/copy.bin", from: reader)
            #expect(pulled.chunksFetched <= 5)
            #expect(Files.read(server.root + "/copy.bin") == content)
            let wire =
                inserted.bytesSent + Int64(inserted.manifestBytes) + pulled.bytesFetched + Int64(pulled.manifestBytes)
            #expect(wire < 1 << 20, "the insertion moved \(wire) bytes")
            // (End to end a version's sealed manifest goes whole, about 32 bytes a chunk, and its
            // carrier as a delta both ways. How many chunks depends on the container's key, a new
            // random one each run, so the bound is per chunk. A pull that took the carrier whole
            // moved about 61 bytes a chunk, 95–98 kB here.)
            let manifestLimit = LiveServer.endToEnd ? inserted.chunks * 45 : 16 << 10
            #expect(
                inserted.manifestBytes < manifestLimit && pulled.manifestBytes < manifestLimit,
                "manifest bytes: push \(inserted.manifestBytes), pull \(pulled.manifestBytes)")
        }
    }

    @Test func thousandFilePackageAndNoOpPush() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/many"
            for i in 0..<1000 {
                try Files.write(
                    source + "/d\(i % 10)/file-\(i).txt",
                    Array("file \(i)\n".utf8) + Files.random(count: i, seed: UInt64(i)))
            }
            try await Self.pushNoOpOneEditPull(server, source, "many.pkg", files: 1000, edit: "d3/file-3.txt")
        }
    }

    /// Hashing runs ahead of the asking and uploading by a few batches only: with batches of
    /// eight chunks, the 1,000 files' chunks pass through the bounded hand-off 125 times, and
    /// every one arrives (the pull gives the same tree).
    @Test func batchesOfNewChunksPassABoundedHandOff() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/many"
            for i in 0..<1000 {
                try Files.write(
                    source + "/d\(i % 7)/file-\(i).txt",
                    Array("small file \(i)\n".utf8) + Files.random(count: i % 300, seed: UInt64(i + 5)))
            }
            var options = PushOptions()
            options.askBatch = 8
            let pushed = try await PushEngine(remote: server.remote, options: options).push(
                source, as: try DocumentPath("many.pkg"))
            #expect(pushed.files == 1000 && pushed.chunksSent == pushed.chunks)
            let pulled = try await server.pull("many.pkg", source + "-copy", from: server.otherDevice("c"))
            #expect(pulled.files == 1000)
            #expect(try Files.snapshot(source + "-copy") == Files.snapshot(source))
        }
    }

    /// Pushes `source` (of `files` files), pushes it again (nothing to do), edits `edit` and
    /// pushes (one chunk goes), then pulls it on another device: the same tree.
    static func pushNoOpOneEditPull(_ server: LiveServer, _ source: String, _ name: String, files: Int, edit: String)
        async throws
    {
        let pushed = try await server.push(source, name)
        #expect(pushed.files == files)
        let noOp = try await server.push(source, name)
        #expect(!noOp.committed && noOp.version == pushed.version && noOp.chunksSent == 0)
        try Files.write(source + "/" + edit, Array("changed".utf8))
        let one = try await server.push(source, name)
        #expect(one.version == pushed.version + 1 && one.chunksSent == 1)
        let pulled = try await server.pull(name, source + "-copy", from: server.otherDevice("c"))
        #expect(pulled.files == files)
        #expect(try Files.snapshot(source + "-copy") == Files.snapshot(source))
    }

    @Test func namesWithBytesBelowTheSlashAreMatchedToWhatTheStateRemembers() async throws {
        // A walk goes directory by directory ("a", "a/b", "a-b"); a manifest and the state are
        // in bytewise order ("a", "a-b", "a/b"). A no-op must still be found, and one edit read alone.
        try await LiveServer.run { server in
            let source = server.root + "/mixed"
            for name in ["a/b", "a-b", "a.b/c", "a0", "a b", "a/b-c/d", "a/c/e"] {
                try Files.write(source + "/" + name, Array("content of \(name)\n".utf8))
            }
            try await Self.pushNoOpOneEditPull(server, source, "mixed.pkg", files: 7, edit: "a-b")
        }
    }

    @Test func pullReplacesAPackageWhole() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/doc"
            try Files.write(source + "/a", Array("one".utf8))
            try Files.write(source + "/b", Array("two".utf8))
            _ = try await server.push(source, "doc")
            let reader = server.otherDevice("r")
            let target = server.root + "/out"
            _ = try await server.pull("doc", target, from: reader)
            try FileManager.default.removeItem(atPath: source + "/b")
            try Files.write(source + "/c", Array("three".utf8))
            _ = try await server.push(source, "doc")
            _ = try await server.pull("doc", target, from: reader)
            #expect(try Files.snapshot(target) == Files.snapshot(source))
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: server.root).filter {
                $0.contains(".xfer-")
            }
            #expect(leftovers.isEmpty)
        }
    }

    @Test func conflictsAndErrorsAreClear() async throws {
        try await LiveServer.run { server in
            let path = server.root + "/f.txt"
            try Files.write(path, Array("v1".utf8))
            _ = try await server.push(path, "f.txt")
            // --force replaces the current version without making a conflict.
            let other = server.otherDevice("o")
            try Files.write(server.root + "/g.txt", Array("other".utf8))
            var force = PushOptions()
            force.force = true
            let forced = try await PushEngine(remote: other, options: force).push(
                server.root + "/g.txt", as: DocumentPath("f.txt"))
            #expect(forced.version == 2 && forced.state == .current && forced.conflicts.isEmpty)
            do {
                _ = try await server.pull("nope.txt", server.root + "/x")
                Issue.record("pull of a missing document succeeded")
            } catch let error as XferError {
                #expect(error.code == .notFound)
            }
            let offline = Remote(
                connection: ServerConnection(server: "http://127.0.0.1:1", token: "t"), container: .default,
                stateDirectory: server.stateDirectory)
            do {
                _ = try await PullEngine(remote: offline).pull(DocumentPath("f.txt"), into: server.root + "/y")
                Issue.record("pull from a closed port succeeded")
            } catch let error as XferError {
                #expect(error.code == .unavailable)
            }
            await offline.connection.shutdown()
        }
    }
}

extension PushPullTests {
    /// A small document whose files were written again with the same bytes (their stamps moved,
    /// not their content) makes no version: the push reads them before it announces one.
    @Test func aFileRewrittenWithTheSameBytesMakesNoVersion() async throws {
        try await LiveServer.run { server in
            let file = server.root + "/notes.txt"
            try Files.write(file, Array("the same".utf8))
            let first = try await server.push(file, "notes.txt")
            try Files.write(file, Array("the same".utf8))
            try Files.setMtime(file, 1_000)
            let moved = try await server.push(file, "notes.txt")
            #expect(moved.committed && moved.version == first.version + 1, "a new time is a change")
            try FileManager.default.removeItem(atPath: file)
            try Files.write(file, Array("the same".utf8))
            try Files.setMtime(file, 1_000)
            let same = try await server.push(file, "notes.txt")
            #expect(!same.committed && same.version == moved.version && same.chunksSent == 0, "\(same)")
            // Recorded with its new stamp: the next push does not read it again, and still makes none.
            #expect(try await server.push(file, "notes.txt").committed == false)
            #expect(try await server.client().versions("notes.txt").count == 2)
        }
    }

    /// A pull killed after it put the new version in place and before it recorded it: the
    /// re-run finds that version there (a different stamp, the same content) and is not refused;
    /// any other content there still is.
    @Test func aPullKilledAfterPublishingIsNotRefusedOnReRun() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/source.txt"
            let target = server.root + "/copy.txt"
            try Files.write(source, Files.random(count: 300_000, seed: 5))
            _ = try await server.push(source, "doc.txt")
            _ = try await server.pull("doc.txt", target)
            try Files.write(source, Files.random(count: 300_000, seed: 6))
            _ = try await server.push(source, "doc.txt")
            // As if the killed pull had renamed version 2 into place: a new inode, unrecorded.
            try FileManager.default.removeItem(atPath: target)
            try FileManager.default.copyItem(atPath: source, toPath: target)
            let report = try await server.pull("doc.txt", target)
            #expect(report.version == 2)
            #expect(Files.read(target) == Files.read(source))
            // Anything else there is still refused.
            try Files.write(source, Files.random(count: 300_000, seed: 7))
            _ = try await server.push(source, "doc.txt")
            try Files.write(target, Array("my own edit".utf8))
            await #expect(throws: XferError.self) { _ = try await server.pull("doc.txt", target) }
            #expect(Files.read(target) == Array("my own edit".utf8))
        }
    }
}
