import XferClient
import XferCore
import XferProtocol

/// Where a mount gets the manifests it opens files and packages with: the server (checked
/// against the digest it records), remembered in memory and in the on-disk cache, so a
/// document opened once, or pinned, opens again while the server cannot be reached.
final class ManifestSupply: Sendable {
    private let client: DocumentClient
    private let disk: SegmentChunkCache?
    private let memory = Locked<[String: (version: Int64, manifest: Manifest)]>([:])
    /// Manifests held in memory at most.
    static let memoryLimit = 256

    init(client: DocumentClient, disk: SegmentChunkCache?) {
        self.client = client
        self.disk = disk
    }

    /// The manifest of the version `info` describes.
    /// - Throws: the server's errors when it is held nowhere here.
    func manifest(of info: DocumentInfo) async throws -> Manifest {
        let key = client.cacheKey(info.path.value)
        if let held = memory.value[key], held.version == info.version { return held.manifest }
        do {
            let manifest = try await client.manifest(of: info)
            remember(manifest, key: key, version: info.version)
            try? disk?.keepManifest(key, version: info.version, bytes: manifest.encoded())
            return manifest
        } catch let error as XferError where error.code == .unavailable {
            guard let bytes = try? disk?.manifest(key, version: info.version),
                let manifest = try? Manifest(decoding: bytes)
            else { throw error }
            remember(manifest, key: key, version: info.version)
            return manifest
        }
    }

    private func remember(_ manifest: Manifest, key: String, version: Int64) {
        memory.withLock { memory in
            if memory.count >= Self.memoryLimit { memory.removeAll(keepingCapacity: true) }
            memory[key] = (version, manifest)
        }
    }
}

extension DocumentClient {
    /// The name a document is kept under in the on-disk cache (its manifest, its pin): server,
    /// container and path, so one cache serves several.
    func cacheKey(_ path: String) -> String {
        "\(remote.connection.server) \(remote.container) \(path)"
    }
}
