import Foundation
import Testing
import XferCore

@testable import XferClient

/// A pull keeps a bounded number of its staging files open, whatever the package holds.
@Suite struct StagingFilesTests {
    @Test func writesReachEveryFileWithFewDescriptorsOpen() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-staging-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = (0..<6).map { index in index % 2 == 0 ? "a/b/f\(index)" : "f\(index)" }
        for place in places { #expect(FileManager.default.createFile(atPath: root + "/" + place, contents: nil)) }
        let files = StagingFiles(root: try ConfinedDirectory(opening: root), prefix: root, paths: places, limit: 2)
        #expect(files.path(0) == root + "/a/b/f0")
        // Round-robin writes, so every write after the first two reopens a file closed earlier.
        for round in 0..<3 {
            for index in places.indices {
                let byte = [UInt8(index * 10 + round)]
                try files.with(index) { fd in
                    try byte.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: Int64(round), path: "f") }
                }
                #expect(files.openCount <= 2)
            }
        }
        files.closeAll()
        #expect(files.openCount == 0)
        for (index, place) in places.enumerated() {
            let bytes = FileManager.default.contents(atPath: root + "/" + place)
            #expect(bytes.map(Array.init) == [UInt8(index * 10), UInt8(index * 10 + 1), UInt8(index * 10 + 2)])
        }
    }

    /// Writes from several threads at once reach the right files while descriptors come and
    /// go under them; a file closed while in use stays open for its user, then closes.
    /// A download's run of chunks goes out as one write of its pieces, in order, from its
    /// offset; with a fault armed each piece meets it in turn (a full disk stops the run where
    /// it stopped the piece).
    @Test func aRunOfPiecesIsWrittenInOrderAndMeetsFaultsPieceByPiece() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-run-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let fd = open(path, O_CREAT | O_RDWR, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        let pieces = ["abc", "defg", "h"].map { Array($0.utf8) }
        func write(at offset: Int64) throws {
            try pieces[0].withUnsafeBytes { a in
                try pieces[1].withUnsafeBytes { b in
                    try pieces[2].withUnsafeBytes { c in try Syscall.pwrite(fd, [a, b, c], at: offset, path: path) }
                }
            }
        }
        try write(at: 5)
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == [0, 0, 0, 0, 0] + Array("abcdefgh".utf8))

        StorageFaults.arm(.init(.write, .shortWrite(2, then: ENOSPC), pathContains: path))
        defer { StorageFaults.disarm(pathContains: path) }
        #expect(throws: XferError.self) { try write(at: 13) }
        #expect(
            FileManager.default.contents(atPath: path).map(Array.init)
                == [0, 0, 0, 0, 0] + Array("abcdefghab".utf8))
    }

    @Test func concurrentWritesWhileDescriptorsAreEvicted() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-staging-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = (0..<8).map { "f\($0)" }
        for place in places { #expect(FileManager.default.createFile(atPath: root + "/" + place, contents: nil)) }
        let files = StagingFiles(
            root: try ConfinedDirectory(opening: root), prefix: root, paths: places, limit: 2,
            writes: Array(repeating: 64, count: places.count))
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<64 {
                for index in places.indices where index % 4 == thread || (index + round) % 4 == thread {
                    let byte = [UInt8(index)]
                    do {
                        try files.with(index) { fd in
                            try byte.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: Int64(round), path: "f") }
                        }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                    if index % 4 == thread {
                        do { try files.wrote(index, bytes: 1) } catch { failures.withLock { $0 += 1 } }
                    }
                }
            }
        }
        #expect(failures.value == 0)
        #expect(files.openCount <= 2 + 4)
        try files.with(0) { fd in
            files.close(0)
            // Still this call's to use: the close waits for it.
            #expect(fcntl(fd, F_GETFD) >= 0)
            #expect(files.openCount >= 1)
        }
        files.closeAll()
        for (index, place) in places.enumerated() {
            let bytes = FileManager.default.contents(atPath: root + "/" + place)
            #expect(bytes.map(Array.init) == Array(repeating: UInt8(index), count: 64))
        }
    }

    /// A file not created yet is created by its first open, exclusively (a name found there is
    /// an error, not overwritten); one finished by its last write is closed and never opened again.
    @Test func filesAreCreatedByTheirFirstWriteAndFinishedByTheirLast() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-staging-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = (0..<3).map { "f\($0)" }
        #expect(FileManager.default.createFile(atPath: root + "/f2", contents: Data("theirs".utf8)))
        let finishedWith = Locked<[Int]>([])
        let files = StagingFiles(
            root: try ConfinedDirectory(opening: root), prefix: root, paths: places, limit: 1, writes: [2, 1, 1],
            creating: [true, true, true]
        ) { index, fd in
            #expect(fchmod(fd, 0o444) == 0)
            finishedWith.withLock { $0.append(index) }
            return index != 1
        }
        #expect(!FileManager.default.fileExists(atPath: root + "/f0"))
        for (offset, byte) in [(Int64(0), UInt8(1)), (1, 2)] {
            try files.with(0) { fd in try [byte].withUnsafeBytes { try Syscall.pwrite(fd, $0, at: offset, path: "f0") }
            }
            // Evicted between the two writes (limit 1): opened again, not created again.
            try files.with(1) { _ in }
            #expect(!files.isFinished(0))
            try files.wrote(0, bytes: 1)
        }
        #expect(files.isFinished(0) && files.openCount <= 1)
        #expect(Files.read(root + "/f0") == [1, 2])
        #expect(throws: XferError.self) { try files.with(0) { _ in } }
        // whenWritten may leave a file open for more (its final fsync).
        try files.wrote(1, bytes: 1)
        #expect(!files.isFinished(1))
        try files.with(1) { _ in }
        // A name that is there already is not written over.
        #expect(throws: XferError.self) { try files.with(2) { _ in } }
        #expect(Files.read(root + "/f2") == Array("theirs".utf8))
        #expect(finishedWith.value == [0, 1])
        files.closeAll()
    }

    /// More files than a pull keeps open (128): each is whole, none missing.
    @Test func aPackageWithManyFilesPullsWhole() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/many"
            for index in 0..<300 {
                try Files.write(
                    source + "/d\(index % 7)/f\(index)", Files.random(count: 100 + index * 13, seed: UInt64(index)))
            }
            _ = try await server.push(source, "many")
            _ = try await server.pull("many", server.root + "/copy")
            for index in 0..<300 {
                let path = "/d\(index % 7)/f\(index)"
                #expect(Files.read(server.root + "/copy" + path) == Files.read(source + path), "\(path)")
            }
        }
    }
}
