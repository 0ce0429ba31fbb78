import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import XferClient
import XferCore
import XferProtocol
import XferServer

/// A real server on a free loopback port over a fresh data directory, with one account, and
/// a client state directory: what push and pull run against in these tests.
struct LiveServer {
    let root: String
    let remote: Remote
    /// The server's stores (for maintenance and for looking behind the server's back).
    let data: ServerData
    /// The test account's token.
    let token: String

    /// The default container's key when the suite runs end to end (``endToEnd``).
    let key: ContainerKey?

    var stateDirectory: String { root + "/state" }

    /// `XFER_TEST_E2E=1`: the client suite runs on an end-to-end encrypted container. Each
    /// server's default container is made encrypted under a new key, which ``remote`` and
    /// every ``otherDevice(_:)`` hold (a key file in their state); a test that is about what
    /// only a plain container shows is marked so (``plainOnly``).
    static var endToEnd: Bool { Backends.environment["XFER_TEST_E2E"] == "1" }

    /// For a test of what only a plain container does or shows (the server's own names, sizes
    /// or manifests, a chunk by its plain id, a batch): it runs in the plain pass only, `why` said.
    static func plainOnly(_ why: Comment) -> ConditionTrait { .disabled(if: endToEnd, why) }

    /// Runs `body` with a live server; removes everything afterwards.
    /// - Parameters:
    ///   - limits: The server's limits (a small `listPage` makes paging cheap to test).
    ///   - intercept: Answers a request in place of the server when it returns a response
    ///     (a fault at one route, as a broken server or proxy would give).
    static func run<T: Sendable>(
        policy: StorePolicy = StorePolicy(), sealing: SealingKeys? = Backends.sealing, quota: Int64? = nil,
        limits: ServerLimits = ServerLimits(),
        intercept: (@Sendable (Request) -> Response?)? = nil,
        _ body: @escaping @Sendable (LiveServer) async throws -> T
    ) async throws -> T {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("xfer-live-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = try await Backends.open(root + "/data", policy: policy, sealing: sealing)
        let token = try await data.createAccount(name: "tester", quota: quota).token!
        var logger = Logger(label: "xfer.test")
        // XFER_TEST_LOG=1: every request with its time (how a slow backend was found).
        logger.logLevel = ProcessInfo.processInfo.environment["XFER_TEST_LOG"] == nil ? .warning : .debug
        let inner = XferServer.router(data: data, limits: limits).buildResponder()
        let app = Application(
            responder: CallbackResponder<XferRequestContext> { request, context in
                if let answer = intercept?(request) { return answer }
                return try await inner.respond(to: request, context: context)
            },
            configuration: .init(address: .hostname("127.0.0.1", port: 0)), logger: logger)
        return try await app.test(.live) { client in
            let connection = ServerConnection(
                server: "http://127.0.0.1:\(client.port!)", token: token, readTimeout: Backends.readTimeout)
            var remote = Remote(connection: connection, container: .default, stateDirectory: root + "/state")
            var key: ContainerKey? = nil
            if endToEnd {
                key = try await EncryptedContainers(remote: remote).create(
                    passphrase: "test", parameters: try ScryptParameters(logN: 10, r: 8, p: 1))
                remote = Remote(
                    connection: connection, container: .default, stateDirectory: root + "/state",
                    endToEnd: EndToEndKeys(key: key!))
            }
            let server = LiveServer(root: root, remote: remote, data: data, token: token, key: key)
            do {
                let result = try await body(server)
                await connection.shutdown()
                return result
            } catch {
                await connection.shutdown()
                throw error
            }
        }
    }

    /// A second device: same account, its own state.
    func otherDevice(_ name: String) -> Remote {
        let stateDirectory = root + "/state-" + name
        guard let key else {
            return Remote(connection: remote.connection, container: remote.container, stateDirectory: stateDirectory)
        }
        // The device holds the key, as one that unlocked the container does.
        try! ContainerKeyFile(
            stateDirectory: stateDirectory, server: remote.connection.server, container: remote.container
        ).write(ContainerKeyRing(single: key))
        return Remote(
            connection: remote.connection, container: remote.container, stateDirectory: stateDirectory,
            endToEnd: EndToEndKeys(key: key))
    }

    /// A library client for a device (this one by default).
    func client(_ remote: Remote? = nil, device: String = "test") -> DocumentClient {
        DocumentClient(remote: remote ?? self.remote, device: device)
    }

    func push(_ path: String, _ name: String, from remote: Remote? = nil) async throws -> PushReport {
        try await PushEngine(remote: remote ?? self.remote).push(path, as: try DocumentPath(name))
    }

    func pull(_ name: String, _ destination: String, from remote: Remote? = nil) async throws -> PullReport {
        try await PullEngine(remote: remote ?? self.remote).pull(try DocumentPath(name), into: destination)
    }
}

/// Files for tests.
enum Files {
    static func random(count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var bytes = [UInt8](repeating: 0, count: count + 8)
        bytes.withUnsafeMutableBytes { raw in
            var offset = 0
            while offset < count {
                raw.storeBytes(of: generator.next(), toByteOffset: offset, as: UInt64.self)
                offset += 8
            }
        }
        return Array(bytes.prefix(count))
    }

    static func write(_ path: String, _ bytes: [UInt8], mode: Int = 0o644) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
    }

    static func read(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map { Array($0) } }

    /// Sets a file's modification time (seconds since 1970).
    static func setMtime(_ path: String, _ seconds: Double) throws {
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSince1970: seconds)], ofItemAtPath: path)
    }

    /// Every entry under `root` with kind, mode, mtime (ns), content hash or link target.
    static func snapshot(_ root: String) throws -> [String: String] {
        var result: [String: String] = [:]
        for entry in try DirectoryWalker.walk(root) {
            var line = "\(entry.kind) \(String(entry.mode, radix: 8))"
            switch entry.kind {
            case .file:
                line += " \(entry.mtimeNanoseconds) \(ChunkID.of(read(root + "/" + entry.relativePath) ?? []).hex)"
            case .symlink:
                line += " -> \(entry.symlinkTarget ?? "")"
            case .directory:
                line += " \(entry.mtimeNanoseconds)"
            }
            result[entry.relativePath] = line
        }
        return result
    }
}

/// The backends the suite runs against: SQLite and files by default; PostgreSQL when
/// XFER_POSTGRES_URL is set and S3 when XFER_S3_ENDPOINT is (tools/ops/pg-up.sh, tools/ops/ceph-up.sh),
/// each test in its own schema and bucket; with XFER_TEST_SEALING=1, every server seals its data
/// at rest with a key of its own (the whole suite then runs over sealed stores).
enum Backends {
    static let environment = ProcessInfo.processInfo.environment

    /// A new key for each server when XFER_TEST_SEALING=1.
    static var sealing: SealingKeys? {
        environment["XFER_TEST_SEALING"] == "1" ? try! SealingKeys([SealingKey.generate()]) : nil
    }

    /// The client's longest wait for an answer: the product's 75 s on the embedded stores; on
    /// PostgreSQL and Ceph a debug build with every test of a pass at once on two cores has
    /// taken longer than that to commit one batch (26 s in a passing run, over 75 s in a
    /// failing one; the release build commits 500 documents there in 3 s).
    static var readTimeout: TimeAmount {
        environment["XFER_POSTGRES_URL"] == nil && environment["XFER_S3_ENDPOINT"] == nil ? .seconds(75) : .minutes(5)
    }

    static func open(_ directory: String, policy: StorePolicy, sealing: SealingKeys? = nil) async throws -> ServerData {
        let unique = UUID().uuidString.prefix(8).lowercased()
        var metadata: (any MetadataStore)? = nil
        if let url = environment["XFER_POSTGRES_URL"] {
            metadata = try await PostgresMetadataStore(
                url: url, policy: policy, schema: "t_\(unique)", sealing: sealing)
        }
        var packs: (any PackStorage)? = nil
        if let endpoint = environment["XFER_S3_ENDPOINT"] {
            let client = S3Client(location: try S3Location(url: "s3://xfer-\(unique)/chunks", endpoint: endpoint))
            try await client.createBucketIfNeeded()
            packs = S3PackStorage(client: client)
        }
        return try await ServerData.open(directory, policy: policy, sealing: sealing, metadata: metadata, packs: packs)
    }
}

extension SyncEngine {
    /// Waits (at most `seconds`) for an event `until` matches; whether one came. The default
    /// is long: under CI's load (every suite at once on two cores) a first pass has been seen
    /// to wait half a minute for a thread; a passing test never waits it out.
    func awaitEvent(seconds: Int = 90, _ until: @escaping @Sendable (SyncEvent) -> Bool) async -> Bool {
        let events = self.events
        let waiter = Task {
            for await event in events where until(event) { return true }
            return false
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(seconds))
            waiter.cancel()
        }
        defer { timeout.cancel() }
        return await waiter.value
    }
}
