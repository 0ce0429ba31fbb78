import Foundation
import Testing
import XferCore

@testable import XferServer

/// The data directory's modes, whatever the process's umask, and the refusal of one other
/// users may write to.
@Suite struct DataDirectoryTests {
    static func mode(_ path: String) -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0o7777 }
        return info.st_mode & 0o7777
    }

    /// Every commit of the embedded metadata store is synced (GRDB turns WAL on with
    /// `synchronous = NORMAL`, which syncs only at checkpoints); opened again, too.
    @Test func theMetadataWriterSyncsEveryCommit() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-sync-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await SQLiteMetadataStore(path: directory + "/metadata.sqlite").writerSynchronous() == 2)
        #expect(try await SQLiteMetadataStore(path: directory + "/metadata.sqlite").writerSynchronous() == 2)
    }

    @Test func secretsAndMetadataAreTheServerUsersAlone() async throws {
        let parent = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-dd-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        chmod(parent, 0o755)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let data = try await ServerData.open(parent + "/data")
        #expect(data.createdAdminToken)
        #expect(Self.mode(parent + "/data") == 0o700)
        #expect(Self.mode(data.adminTokenPath) == 0o600)
        #expect(Self.mode(parent + "/data/metadata.sqlite") == 0o600)
        #expect(!FileManager.default.fileExists(atPath: data.adminTokenPath + ".tmp"))
    }

    @Test func aDirectoryOthersMayWriteIsRefused() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-dd-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for mode: mode_t in [0o777, 0o775, 0o757] {
            chmod(directory, mode)
            do {
                _ = try await ServerData.open(directory)
                Issue.record("mode \(String(mode, radix: 8)) was accepted")
            } catch let error as XferError {
                #expect(error.code == .invalidConfiguration)
                #expect(error.message.contains("chmod 700 \(directory)"), "\(error.message)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/metadata.sqlite"))
    }
}

/// The record of where a data directory's stores are, which `xfer gc --data` and `verify --data` read.
@Suite struct StoreLayoutTests {
    @Test func aStoreElsewhereIsRecordedAndAnEmbeddedOpenDoesNotEraseIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "xfer-layout-\(UUID().uuidString.prefix(8))"
        ).path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try await ServerData.open(directory)
        #expect(try StoreLayout.recorded(in: directory).isEmbedded)
        let elsewhere = try SQLiteMetadataStore(path: directory + "/other.sqlite")
        _ = try await ServerData.open(directory, metadata: elsewhere)
        #expect(try StoreLayout.recorded(in: directory) == StoreLayout(metadataElsewhere: true, chunksElsewhere: false))
        // An account command opens the directory with its own files: the record stays.
        _ = try await ServerData.open(directory)
        #expect(try StoreLayout.recorded(in: directory).metadataElsewhere)
        try Array("not json".utf8).withUnsafeBytes {
            try Data($0).write(to: URL(fileURLWithPath: directory + "/stores"))
        }
        #expect(throws: XferError.self) { _ = try StoreLayout.recorded(in: directory) }
    }
}
