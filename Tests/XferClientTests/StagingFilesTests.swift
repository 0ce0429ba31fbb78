import Foundation
import Testing
import XferCore
@testable import XferClient

/// A pull keeps a bounded number of its staging files open, whatever the package holds.
@Suite struct StagingFilesTests {
    @Test func writesReachEveryFileWithFewDescriptorsOpen() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-staging-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = (0..<6).map { index in
            StagingFiles.File(directory: index % 2 == 0 ? ["a", "b"] : [], name: "f\(index)", prefix: "f\(index)", relative: "")
        }
        for place in places { FileManager.default.createFile(atPath: ([root] + place.directory + [place.name]).joined(separator: "/"), contents: nil) }
        let files = StagingFiles(root: try ConfinedDirectory(opening: root), files: places, limit: 2)
        // Round-robin writes, so every write after the first two reopens a file closed earlier.
        for round in 0..<3 {
            for index in places.indices {
                let byte = [UInt8(index * 10 + round)]
                try files.with(index) { fd in try byte.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: Int64(round), path: "f") } }
                #expect(files.openCount <= 2)
            }
        }
        files.closeAll()
        #expect(files.openCount == 0)
        for (index, place) in places.enumerated() {
            let bytes = FileManager.default.contents(atPath: ([root] + place.directory + [place.name]).joined(separator: "/"))
            #expect(bytes.map(Array.init) == [UInt8(index * 10), UInt8(index * 10 + 1), UInt8(index * 10 + 2)])
        }
    }

    /// Writes from several threads at once reach the right files while descriptors come and
    /// go under them; a file closed while in use stays open for its user, then closes.
    @Test func concurrentWritesWhileDescriptorsAreEvicted() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-staging-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let places = (0..<8).map { StagingFiles.File(directory: [], name: "f\($0)", prefix: "f\($0)", relative: "") }
        for place in places { FileManager.default.createFile(atPath: root + "/" + place.name, contents: nil) }
        let files = StagingFiles(root: try ConfinedDirectory(opening: root), files: places, limit: 2,
                                 writes: Array(repeating: 64, count: places.count))
        let failures = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<64 {
                for index in places.indices where index % 4 == thread || (index + round) % 4 == thread {
                    let byte = [UInt8(index)]
                    do {
                        try files.with(index) { fd in try byte.withUnsafeBytes { try Syscall.pwrite(fd, $0, at: Int64(round), path: "f") } }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                    if index % 4 == thread { files.wrote(index) }
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
            let bytes = FileManager.default.contents(atPath: root + "/" + place.name)
            #expect(bytes.map(Array.init) == Array(repeating: UInt8(index), count: 64))
        }
    }

    /// More files than a pull keeps open (128): each is whole, none missing.
    @Test func aPackageWithManyFilesPullsWhole() async throws {
        try await LiveServer.run { server in
            let source = server.root + "/many"
            for index in 0..<300 {
                try Files.write(source + "/d\(index % 7)/f\(index)", Files.random(count: 100 + index * 13, seed: UInt64(index)))
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
