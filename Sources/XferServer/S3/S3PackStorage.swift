/// Packs as objects in S3-compatible storage, at `PREFIX/packs/ab/abcd…`.
///
/// Why packs: an object store's cost is per request more than per byte. Measured on this
/// project's Ceph RGW (`tools/bench/bench-s3.sh`, docs/PERFORMANCE.md, "PostgreSQL and S3"), 64 KiB objects stored at
/// about 40 MiB/s however many PUTs were in flight, and 4 MiB objects at 200–280 MiB/s; a
/// ranged GET of one chunk out of a pack costs what a GET of a one-chunk object does.
public struct S3PackStorage: PackStorage {
    /// The client (its bucket must exist: ``S3Client/createBucketIfNeeded()``).
    public let client: S3Client
    /// PUTs and ranged GETs in flight at once.
    public var concurrency = 16

    /// Packs in the client's bucket, under its prefix.
    public init(client: S3Client) {
        self.client = client
    }

    /// The key prefix of every pack.
    public var prefix: String { client.location.prefix + "packs/" }

    /// The object key of a pack.
    public func key(_ name: String) -> String { "\(prefix)\(name.prefix(2))/\(name)" }

    public func put(_ name: String, _ bytes: [UInt8]) async throws { try await client.put(key(name), bytes) }

    public func get(_ name: String, range: Range<Int64>) async throws -> [UInt8]? {
        try await client.get(key(name), range: range)
    }

    public func get(_ name: String, limit: Int) async throws -> [UInt8]? {
        try await client.get(key(name), limit: limit)
    }

    public func delete(_ name: String) async throws { try await client.delete(key(name)) }

    public func list() async throws -> [PackObject] {
        try await client.list(prefix: prefix).map {
            PackObject(name: String($0.key.split(separator: "/").last ?? ""), size: $0.size, modified: $0.modified)
        }
    }
}
