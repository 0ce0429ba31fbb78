import Foundation
import Testing
import XferCore
import XferTestSupport

/// `xfer serve` and the data-directory commands against a careless setup: file modes, a
/// directory others may write to, plain HTTP on a reachable address.
@Suite(.serialized) struct ServeHardeningTests {
    static func mode(_ path: String) -> mode_t {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0o7777 }
        return info.st_mode & 0o7777
    }

    static func temporaryRoot() throws -> URL {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-harden-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        chmod(root.path, 0o755)
        return root
    }

    @Test func aFreshDataDirectoryIsPrivate() throws {
        let server = try ServerProcess(prepare: { chmod($0.path, 0o755) })
        #expect(try server.run("ls").status == 0)
        let data = server.path("data")
        #expect(Self.mode(data) == 0o700)
        #expect(Self.mode(data + "/admin-token") == 0o600)
        for file in ["metadata.sqlite", "metadata.sqlite-wal", "metadata.sqlite-shm"]
        where FileManager.default.fileExists(atPath: data + "/" + file) {
            #expect(Self.mode(data + "/" + file) & 0o077 == 0, "\(file) is the server user's alone")
        }
        let fan = try FileManager.default.contentsOfDirectory(atPath: data + "/packs")
        #expect(Self.mode(data + "/packs") & 0o077 == 0, "\(fan.count) fan-out directories")
        #expect(Self.mode(data + "/packs/00") & 0o077 == 0)
    }

    @Test func aDataDirectoryOthersMayWriteIsRefused() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("open").path
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        chmod(data, 0o777)
        let create = try XferProcess.run("account", "create", "alice", "--data", data)
        #expect(create.status == 6)
        #expect(create.stderr.contains("chmod 700 \(data)"), "\(create.stderr)")
        let serve = try XferProcess.run("serve", "--data", data, "--listen", "127.0.0.1:0")
        #expect(serve.status == 6 && serve.stderr.contains("may be written by other users"), "\(serve.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data + "/admin-token"), "nothing was written there")
    }

    @Test func plainHTTPOnAReachableAddressNeedsTLSOrTheProxyFlag() throws {
        let root = try Self.temporaryRoot()
        defer { try? FileManager.default.removeItem(at: root) }
        let data = root.appendingPathComponent("data").path
        let port = try ServerProcess.freePort()
        let refused = try XferProcess.run("serve", "--data", data, "--listen", "0.0.0.0:\(port)")
        #expect(refused.status == 6)
        #expect(
            refused.stderr.contains("--tls-cert") && refused.stderr.contains("--behind-tls-proxy"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: data), "refused before touching the data directory")

        // With --behind-tls-proxy it starts, and says what the operator has promised.
        let log = root.appendingPathComponent("serve.log")
        #expect(FileManager.default.createFile(atPath: log.path, contents: nil))
        let process = ChildProcess()
        process.executableURL = XferProcess.binary
        process.arguments = ["serve", "--data", data, "--listen", "0.0.0.0:\(port)", "--behind-tls-proxy"]
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var text = ""
        for _ in 0..<200 where !text.contains("serving") {
            usleep(50_000)
            text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        }
        #expect(text.contains("serving"), "\(text)")
        #expect(text.contains("warning: serving plain HTTP on 0.0.0.0"), "\(text)")
    }
}
