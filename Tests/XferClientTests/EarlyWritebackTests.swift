import Foundation
import Testing
import XferCore

@testable import XferClient

/// A pull of many files starts the disk's writeback as it goes: one `syncfs` after every
/// threshold's worth of bytes, never two at once, none once closed.
@Suite struct EarlyWritebackTests {
    static func directory() throws -> (ConfinedDirectory, String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-early-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        return (try ConfinedDirectory(opening: root), root)
    }

    @Test func startsOneWritebackPerThresholdWrittenAndNoneOnceClosed() throws {
        let (directory, root) = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let early = try #require(EarlyWriteback(directory, threshold: 1000))
        early.wrote(600)
        #expect(early.writebacksStarted == 0)
        early.wrote(400)
        #expect(early.writebacksStarted == 1)
        early.waitUntilIdle()
        // What was written while one ran counts toward the next; a burst starts one, not three.
        early.wrote(3000)
        #expect(early.writebacksStarted == 2)
        early.waitUntilIdle()
        early.wrote(999)
        #expect(early.writebacksStarted == 2)
        early.close()
        early.wrote(5000)
        #expect(early.writebacksStarted == 2)
        early.close()
    }

    /// While one writeback runs, writes only count toward the next, from any number of threads;
    /// a close while one runs starts no more.
    @Test func neverRunsTwoAtOnce() async throws {
        let (directory, root) = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let gate = DispatchSemaphore(value: 0)
        let descriptors = Locked<[Int32]>([])
        let early = try #require(
            EarlyWriteback(directory, threshold: 10) { fd in
                descriptors.withLock { $0.append(fd) }
                gate.wait()
                return 0
            })
        early.wrote(10)
        #expect(early.writebacksStarted == 1)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 { group.addTask { for _ in 0..<100 { early.wrote(10) } } }
        }
        #expect(early.writebacksStarted == 1, "none starts while one runs")
        early.close()
        gate.signal()
        early.waitUntilIdle()
        #expect(early.writebacksStarted == 1)
        let fd = try #require(descriptors.value.first)
        #expect(fd != directory.fd, "a descriptor of its own")
    }

    /// A writeback's error is kept, the first one only, for the pull to fail with after its own
    /// syncfs (an error in the file system's metadata is reported to the first syncfs alone).
    @Test func theFirstErrorAWritebackMeetsIsKept() throws {
        let (directory, root) = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let calls = Locked(0)
        let early = try #require(
            EarlyWriteback(directory, threshold: 1) { _ in
                calls.withLock {
                    $0 += 1
                    return [0, EIO, ENOSPC][min($0 - 1, 2)]
                }
            })
        early.wrote(1)
        #expect(early.failure == nil, "the first one succeeded")
        early.wrote(1)
        #expect(early.failure == EIO)
        early.wrote(1)
        #expect(early.failure == EIO, "the first error is kept")
        #expect(calls.value == 3)
        early.close()
    }

    /// Its descriptor is its own: closing it leaves the directory it was opened from usable,
    /// and the pull's own syncfs of that directory still answers.
    @Test func itsDescriptorIsItsOwn() throws {
        let (directory, root) = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let early = try #require(EarlyWriteback(directory, threshold: 1))
        early.wrote(1)
        early.close()
        early.waitUntilIdle()
        try directory.synchronizeFileSystem()
        let fd = try directory.openFile("after", flags: O_WRONLY | O_CREAT | O_EXCL)
        let bytes: [UInt8] = [1, 2, 3]
        #expect(write(fd, bytes, 3) == 3)
        Glibc.close(fd)
        #expect(FileManager.default.contents(atPath: root + "/after").map(Array.init) == [1, 2, 3])
    }
}
