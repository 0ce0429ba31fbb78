import Foundation
import XferCore
import XferProtocol

/// What `xfer verify DIR` found in a synced directory.
public struct LocalVerifyReport: Codable, Sendable, Hashable {
    /// The directory.
    public var directory: String
    /// Documents whose local copy was checked.
    public var documentsChecked = 0
    /// Files read.
    public var filesChecked = 0
    /// Bytes read and hashed.
    public var bytesChecked: Int64 = 0
    /// Evicted documents (nothing local to check).
    public var evicted = 0
    /// Files changed since they were synced (a sync will upload them): not damage.
    public var modified: [String] = []
    /// Files that look as they did when synced (same size, times and inode) but whose bytes
    /// differ from the synced manifest: damage the file system did not report.
    public var damaged: [String] = []
    /// Files, links or directories of a synced manifest that are not there.
    public var missing: [String] = []
    /// Neither damage nor anything missing.
    public var ok: Bool { damaged.isEmpty && missing.isEmpty }

    enum CodingKeys: String, CodingKey {
        case directory, documentsChecked, filesChecked, bytesChecked, evicted, modified, damaged, missing, ok
    }

    public init(directory: String) { self.directory = directory }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        directory = try c.decode(String.self, forKey: .directory)
        documentsChecked = try c.decode(Int.self, forKey: .documentsChecked)
        filesChecked = try c.decode(Int.self, forKey: .filesChecked)
        bytesChecked = try c.decode(Int64.self, forKey: .bytesChecked)
        evicted = try c.decode(Int.self, forKey: .evicted)
        modified = try c.decode([String].self, forKey: .modified)
        damaged = try c.decode([String].self, forKey: .damaged)
        missing = try c.decode([String].self, forKey: .missing)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(directory, forKey: .directory)
        try c.encode(documentsChecked, forKey: .documentsChecked)
        try c.encode(filesChecked, forKey: .filesChecked)
        try c.encode(bytesChecked, forKey: .bytesChecked)
        try c.encode(evicted, forKey: .evicted)
        try c.encode(modified, forKey: .modified)
        try c.encode(damaged, forKey: .damaged)
        try c.encode(missing, forKey: .missing)
        try c.encode(ok, forKey: .ok)
    }
}

/// Checks a synced directory's files against the manifests of the versions they were synced
/// at, reading every byte that claims to be unchanged. Works offline, from local state alone.
public enum LocalVerifier {
    /// Verifies a synced directory.
    /// - Parameters:
    ///   - directory: The synced directory.
    ///   - stateDirectory: Where xfer keeps client state.
    ///   - keyFile: Where the container's key is kept, if not in the state directory.
    /// - Throws: `not_found` if the directory is not synced; `io` if the state cannot be read.
    public static func verify(directory: String, stateDirectory: String, keyFile: String? = nil) throws
        -> LocalVerifyReport
    {
        let absolute = ClientState.absolute(directory)
        guard
            FileManager.default.fileExists(
                atPath: SyncState.databasePath(directory: absolute, stateDirectory: stateDirectory))
        else {
            throw XferError(.notFound, "\(directory) is not a synced directory; start one with `xfer sync DIR`")
        }
        let state = try SyncState(directory: absolute, stateDirectory: stateDirectory)
        guard let server = try state.meta("server"), let container = try state.meta("container").map(ContainerName.init)
        else {
            throw XferError(.notFound, "\(directory) was never synced to a server")
        }
        var report = LocalVerifyReport(directory: absolute)
        var buffer: [UInt8] = []
        // Chunks of an end-to-end encrypted container are named under its key (kept on this device).
        let codec =
            try ContainerKeyFile(stateDirectory: stateDirectory, server: server, container: container, keyFile: keyFile)
            .read()
            .map { ChunkCodec(EndToEndChunks(ring: $0)) } ?? .plain
        for (name, record) in try state.records().sorted(by: { $0.key < $1.key }) {
            if record.evicted {
                report.evicted += 1
                continue
            }
            let path = try DocumentPath(name)
            let clientState = state.clientState(for: path)
            guard let synced = try clientState.document(server: server, container: container, path: path) else {
                continue
            }
            report.documentsChecked += 1
            let stamps = try clientState.stamps()
            for entry in synced.manifest.entries {
                let relative = entry.path.isEmpty ? name : name + "/" + entry.path
                let local = absolute + "/" + relative
                var info = stat()
                guard lstat(local, &info) == 0 else {
                    report.missing.append(relative)
                    continue
                }
                switch entry.kind {
                case .directory:
                    if (info.st_mode & S_IFMT) != S_IFDIR { report.missing.append(relative) }
                case .symlink:
                    if (info.st_mode & S_IFMT) != S_IFLNK || readLink(local) != entry.symlinkTarget {
                        report.modified.append(relative)
                    }
                case .file:
                    guard let stamp = stamps[entry.path], FileStamp.of(local) == stamp else {
                        report.modified.append(relative)
                        continue
                    }
                    report.filesChecked += 1
                    if try !matches(local, entry, codec: codec, buffer: &buffer, read: &report.bytesChecked) {
                        report.damaged.append(relative)
                    }
                }
            }
        }
        return report
    }

    /// Whether a file's bytes are exactly the entry's chunks.
    private static func matches(
        _ path: String, _ entry: Manifest.Entry, codec: ChunkCodec, buffer: inout [UInt8],
        read: inout Int64
    ) throws -> Bool {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var offset: Int64 = 0
        for chunk in entry.chunks {
            if buffer.count < chunk.length { buffer = [UInt8](repeating: 0, count: chunk.length) }
            let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress!, chunk.length, off_t(offset)) }
            guard n == chunk.length else { return false }
            read += Int64(n)
            guard
                buffer.withUnsafeBytes({ codec.id(of: UnsafeRawBufferPointer(rebasing: $0[0..<chunk.length])) })
                    == chunk.id
            else { return false }
            offset += Int64(chunk.length)
        }
        var extra: UInt8 = 0
        return pread(fd, &extra, 1, off_t(offset)) == 0
    }

    private static func readLink(_ path: String) -> String? {
        var target = [CChar](repeating: 0, count: 4097)
        let n = readlink(path, &target, 4096)
        guard n >= 0 else { return nil }
        return String(decoding: target[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
