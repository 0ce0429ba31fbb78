import Foundation
import Testing
import XferCore

@testable import XferClient

/// Every change a confined directory makes meets the storage fault seam: a refused removal,
/// open for writing, symlink, mode or time leaves the directory as it was and says so.
@Suite(.serialized) struct ConfinedDirectoryFaultTests {
    @Test func eachKindOfChangeMeetsItsFault() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-confined-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: root + "/sub", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: root + "/kept", contents: Data([1, 2, 3])))
        defer {
            StorageFaults.disarm(pathContains: root)
            try? FileManager.default.removeItem(atPath: root)
        }
        let directory = try ConfinedDirectory(opening: root)

        StorageFaults.arm(.init(.remove, .fail(EIO), pathContains: root + "/kept"))
        #expect(throws: XferError.self) { try directory.remove("kept") }
        #expect(FileManager.default.fileExists(atPath: root + "/kept"), "a refused removal removes nothing")
        StorageFaults.arm(.init(.remove, .fail(EIO), pathContains: root + "/sub"))
        #expect(throws: XferError.self) { try directory.removeEmptyDirectory("sub") }
        #expect(directory.kind("sub") == S_IFDIR)

        StorageFaults.arm(.init(.open, .fail(ENOSPC), pathContains: root + "/new"))
        let full = #expect(throws: XferError.self) { try directory.openFile("new", flags: O_WRONLY | O_CREAT) }
        #expect(full?.code == .storageFull)
        #expect(directory.kind("new") == nil, "nothing was created")
        let reading = try directory.openFile("kept", flags: O_RDONLY)  // a read-only open never meets it
        close(reading)

        StorageFaults.arm(.init(.link, .fail(EIO), pathContains: root + "/link"))
        #expect(throws: XferError.self) { try directory.makeSymlink("link", target: "kept") }
        #expect(directory.kind("link") == nil)

        StorageFaults.arm(.init(.attributes, .fail(EPERM), pathContains: root, count: 2))
        #expect(throws: XferError.self) { try directory.setMode(0o700) }
        #expect(throws: XferError.self) { try directory.setModificationTime(0, of: "kept") }
        let after = try FileManager.default.attributesOfItem(atPath: root + "/kept")
        #expect((after[.modificationDate] as? Date).map { $0.timeIntervalSince1970 > 0 } == true)

        // Unarmed, each goes through.
        try directory.remove("kept")
        #expect(try directory.removeEmptyDirectory("sub"))
        try directory.makeSymlink("link", target: "kept")
        #expect(directory.kind("link") == S_IFLNK)
    }
}
