/// What a client derives from a container key to keep documents end to end
/// (docs/FORMAT.md, "End-to-end documents"): sealed names, sealed chunks, and each
/// version's manifest sealed and carried to the server inside a *carrier* it can check.
///
/// The server still keys versions, conflicts and the feed by path (the sealed path), still
/// checks that a commit references only chunks the account holds, and still counts references
/// and quota; it learns the document's kind, the number of chunks it references and their stored
/// (padded, sealed) sizes, and nothing of names, sizes, times, modes or contents.
///
/// A carrier is a manifest of the document's kind with one file entry (path `""` for a file,
/// `c` for a package; mode 0600, time 0) whose chunks are the sealed manifest's pieces, then
/// every distinct chunk the document references in id order, each declared as 1 byte (the
/// server, which cannot know a sealed chunk's plain length, records the lengths it holds).
/// The manifest is compressed, sealed under the container's `manifest` key with its sealed path
/// and version as context, and cut into pieces of at most ``pieceSize`` bytes, the first
/// starting with the number of pieces (u32 little-endian); each piece is a sealed chunk.
/// Sealing the manifest takes its salt from the `manifest salt` key and the value's hash, so the same
/// manifest at the same place and version always makes the same pieces and the same carrier:
/// a device can tell the server still holds the version it synced from the carrier's digest.
///
/// A directory document (a synced folder's directory, its name alone) has nothing sealed to
/// carry but its mode, and a directory manifest can reference no chunk: its carrier is the
/// directory manifest of mode 0700 and time 0 (``directoryCarrier``), whatever the directory's
/// mode. So the mode of a directory is not kept end to end: each device keeps its own.
public struct EndToEndKeys: Sendable {
    /// The id of the container's first key (``ContainerKeyRing/identity``): what names it on
    /// this device (its state, a synced folder's record), the same across rotations.
    public let keyID: String
    /// The id of its newest key (``ContainerKeyRing/current``): the one the server records.
    public let currentKeyID: String
    /// Every key the container has had.
    public let ring: ContainerKeyRing
    /// Chunks: keyed cuts and ids, sealed payloads.
    public let chunks: EndToEndChunks
    /// Document names, a path component at a time.
    public let names: NameSealing
    private let manifests: SealingKeys
    private let saltKey: [UInt8]
    private let values: SealingKeys
    private let valueKeyKey: [UInt8]
    private let deletionKey: [UInt8]

    /// Plain bytes in one piece of a sealed manifest: well under the smallest maximum chunk a
    /// server takes by default (256 KiB), sealed.
    public static let pieceSize = 192 << 10
    /// The most pieces a manifest may take: a manifest's largest encoding, and one more.
    static let maximumPieces = Manifest.maximumEncodedSize / (pieceSize - 4) + 2
    static let manifestLabel = "xfer e2e manifest v1"

    /// The keys of the container whose key is `key` (never rotated).
    public init(key: ContainerKey) { self.init(ring: ContainerKeyRing(single: key)) }

    /// The keys of the container whose keys are `ring`: names, chunk ids and key-value keys
    /// under its first key, what is sealed anew under its newest (``ContainerKeyRing``).
    public init(ring: ContainerKeyRing) {
        self.ring = ring
        keyID = ring.identity.id
        currentKeyID = ring.current.id
        chunks = EndToEndChunks(ring: ring)
        names = ring.identity.names
        manifests = ring.sealing("manifest")
        saltKey = ring.current.derive("manifest salt")
        values = ring.sealing("kv value")
        valueKeyKey = ring.identity.derive("kv key")
        deletionKey = ring.current.derive("deletion")
    }

    /// A deletion's seal: HMAC-SHA-256 under the `deletion` key of the sealed path and the
    /// version it deletes, in hex. Only a device holding the key can make it, so a device
    /// removes its copy of a document only for a deletion another device made, of a version
    /// it has seen (the server stores the seal with the deletion and cannot forge one).
    public func deletionSeal(of version: Int64, at sealedPath: String) -> String {
        Self.deletionSeal(of: version, at: sealedPath, key: deletionKey)
    }

    private static func deletionSeal(of version: Int64, at sealedPath: String, key: [UInt8]) -> String {
        Sealing.hmac(key: key, Array("xfer e2e deletion v1 \(version) \(sealedPath)".utf8)).map {
            ChunkID.hexDigits($0)
        }.joined()
    }

    /// Whether `seal`, what the server keeps with a deletion at `sealedPath` of `version` (the
    /// deletion's base), is that deletion's seal.
    public func isDeletionSeal(_ seal: String?, of version: Int64?, at sealedPath: String) -> Bool {
        guard let seal, let version else { return false }
        // Under the newest key only: a removed member keeps the older ones, and a deletion it
        // sealed with the server's help must not remove anyone's copy. One sealed before a
        // rotation is taken as unsealed: the copy is kept, as when unsure.
        return seal == deletionSeal(of: version, at: sealedPath)
    }

    /// A key-value key as the server keeps it: HMAC-SHA-256 under the `kv key` key, in hex
    /// (64 characters), so equal keys stay equal (last writer wins) and none shows.
    public func serverKey(_ key: String) -> String {
        Sealing.hmac(key: valueKeyKey, Array(key.utf8)).map { ChunkID.hexDigits($0) }.joined()
    }

    /// A key-value entry's bytes, padded to their Padmé length and sealed under the `kv value`
    /// key, bound to its server key: moved to another key, it does not open.
    public func seal(value: [UInt8], serverKey: String) -> [UInt8] {
        values.seal(Padding.padme(value), context: Array("xfer e2e kv value v1 \(serverKey)".utf8))
    }

    /// The bytes ``seal(value:serverKey:)`` sealed.
    /// - Throws: `corrupt_chunk` if they do not open under this key at this server key, or are not padded so.
    public func open(value: [UInt8], serverKey: String) throws -> [UInt8] {
        let padded = try values.open(
            value, context: Array("xfer e2e kv value v1 \(serverKey)".utf8),
            what: "the value at \(serverKey.prefix(12))…")
        guard let plain = Padding.unblock(padded), padded.count == Padding.padme(plain.count + 1) else {
            throw XferError(.corruptChunk, "the value at \(serverKey.prefix(12))… is not padded as a sealed value is")
        }
        return plain
    }

    /// The codec a push and a pull of the container use.
    public var codec: ChunkCodec { ChunkCodec(chunks) }

    /// The path the server keys the document at.
    /// - Throws: `invalid_path` for a component over ``NameSealing/maximumComponentBytes``.
    public func sealedPath(_ path: String) throws -> String { try names.seal(path: path) }

    /// What sealing the manifest of version `version` at `sealedPath` binds it to.
    static func context(sealedPath: String, version: Int64) -> [UInt8] {
        Array("\(manifestLabel) \(version) \(sealedPath)".utf8)
    }

    /// The plain bytes of each piece of `manifest` sealed for version `version` at `sealedPath`
    /// (slices of one buffer).
    public func pieces(of manifest: Manifest, sealedPath: String, version: Int64) -> [ArraySlice<UInt8>] {
        let context = Self.context(sealedPath: sealedPath, version: version)
        var stream: [UInt8] = []
        do {
            let plain = manifest.compressedDelta(against: nil)
            let salt = Array(
                Sealing.hmac(key: saltKey, context + [0] + ChunkID.of(plain).bytes).prefix(Sealing.saltSize))
            // The count of pieces first, then the sealed manifest, sealed straight into the stream.
            let count = (4 + plain.count + Sealing.overhead + Self.pieceSize - 1) / Self.pieceSize
            stream.reserveCapacity(4 + plain.count + Sealing.overhead)
            withUnsafeBytes(of: UInt32(count).littleEndian) { stream.append(contentsOf: $0) }
            plain.withUnsafeBytes {
                Sealing.seal($0, key: manifests.current, salt: salt, context: context, appendingTo: &stream)
            }
        }
        return stride(from: 0, to: stream.count, by: Self.pieceSize).map {
            stream[$0..<min($0 + Self.pieceSize, stream.count)]
        }
    }

    /// The carrier of a document of kind `kind` whose sealed manifest is in pieces `pieces`
    /// (their ids) and which references `chunks`.
    public static func carrier(kind: Manifest.Kind, pieces: [ChunkID], chunks: some Sequence<ChunkID>) throws
        -> Manifest
    {
        if kind == .directory { return directoryCarrier }
        // Sorted in place and each taken once: no set of a tree's worth of ids.
        var ids = Array(chunks)
        ids.sort()
        var builder = Manifest.Builder(
            kind: kind, chunker: .default, entries: 1, nameBytes: 1, chunks: pieces.count + ids.count)
        builder.append(path: kind == .file ? [] : Array("c".utf8), kind: .file, mode: 0o600, mtimeNanoseconds: 0)
        for piece in pieces { builder.appendChunk(Manifest.ChunkReference(id: piece, length: 1)) }
        var last: ChunkID? = nil
        for id in ids where id != last {
            last = id
            if !pieces.contains(id) { builder.appendChunk(Manifest.ChunkReference(id: id, length: 1)) }
        }
        return try builder.finish()
    }

    /// The carrier of `manifest` as version `version` at `sealedPath`, and its pieces' plain
    /// bytes (to seal and upload; their ids are the carrier's first chunks).
    public func carrier(of manifest: Manifest, sealedPath: String, version: Int64) throws -> (
        carrier: Manifest, pieces: [ArraySlice<UInt8>]
    ) {
        if manifest.kind == .directory { return (Self.directoryCarrier, []) }
        let pieces = pieces(of: manifest, sealedPath: sealedPath, version: version)
        let ids = pieces.map { piece in piece.withUnsafeBytes { chunks.id(of: $0) } }
        return (
            try Self.carrier(kind: manifest.kind, pieces: ids, chunks: manifest.entries.allChunks.lazy.map(\.id)),
            pieces
        )
    }

    /// `text` with every sealed path in it that opens under this key replaced by the plain
    /// path it stands for: a server's message names documents as the server knows them.
    public func openingNames(in text: String) -> String {
        // A sealed component is at least 52 base32 characters (16 bytes of IV, 16 of name):
        // no word of a message is that long.
        let sealedPath = /[a-z2-7]{52,}(?:\/[a-z2-7]{52,})*/
        return text.replacing(sealedPath) { match in
            (try? names.open(path: String(match.output))) ?? String(match.output)
        }
    }

    /// The carrier of every directory document: the same for all, so it tells nothing.
    public static let directoryCarrier = Manifest.directory(mode: 0o700)

    /// The chunks a carrier references: what a pull downloads the pieces from (the first ones).
    /// - Throws: `invalid_manifest` if it is not a carrier's shape.
    public static func references(of carrier: Manifest) throws -> Manifest.Chunks {
        let entries = carrier.entries
        guard carrier.kind == .file || carrier.kind == .package, entries.count == 1, entries.kind(at: 0) == .file,
            entries.path(at: 0) == (carrier.kind == .file ? "" : "c"), !entries.chunks(at: 0).isEmpty
        else {
            throw XferError(
                .invalidManifest,
                "the server's record of this document is not the carrier of an end-to-end encrypted one")
        }
        return entries.chunks(at: 0)
    }

    /// The manifest a carrier holds, its pieces fetched by `fetch` (sealed chunks, in the order
    /// asked) and every one checked; then checked against the carrier: the same kind, and no
    /// chunk the carrier does not reference.
    /// - Throws: `invalid_manifest`, `corrupt_chunk`, `too_large`, and what `fetch` throws.
    public func manifest(
        in carrier: Manifest, sealedPath: String, version: Int64,
        fetch: ([ChunkID]) async throws -> [EncodedChunk]
    ) async throws -> Manifest {
        if carrier.kind == .directory {
            // Nothing sealed: the directory's manifest is the carrier, its mode not the directory's.
            guard carrier.digest == Self.directoryCarrier.digest else {
                throw XferError(
                    .invalidManifest,
                    "the server's record of this directory is not the carrier of an end-to-end encrypted one")
            }
            return carrier
        }
        let references = try Self.references(of: carrier)
        func open(_ ids: [ChunkID]) async throws -> [[UInt8]] {
            let fetched = try await fetch(ids)
            guard fetched.count == ids.count, zip(fetched, ids).allSatisfy({ $0.0.id == $0.1 }) else {
                throw XferError(
                    .invalidManifest, "the server sent other chunks than the sealed manifest's pieces asked for")
            }
            return try fetched.map { try chunks.open($0, maximumLength: Self.pieceSize) }
        }
        let first = try await open([references[0].id])[0]
        guard first.count >= 4 else {
            throw XferError(.invalidManifest, "a sealed manifest's first piece is \(first.count) bytes")
        }
        let count = first[0..<4].reversed().reduce(0) { $0 << 8 | Int($1) }
        guard count >= 1, count <= min(references.count, Self.maximumPieces) else {
            throw XferError(
                .invalidManifest,
                "the sealed manifest claims \(count) pieces, and its carrier has \(references.count) chunks")
        }
        var sealed = Array(first[4...])
        if count > 1 {
            for piece in try await open(Array(references[1..<count].map(\.id))) { sealed += piece }
        }
        let context = Self.context(sealedPath: sealedPath, version: version)
        let plain = try manifests.open(sealed, context: context, what: "the manifest of version \(version)")
        let manifest = try Manifest(applying: plain, to: nil)
        guard manifest.kind == carrier.kind else {
            throw XferError(
                .invalidManifest, "the sealed manifest is of a \(manifest.kind), its carrier of a \(carrier.kind)")
        }
        // The carrier's chunks after the pieces, sorted (as a carrier lists them; sorted here if
        // a server did not), each of the manifest's found by bisection: no set of them.
        var referenced = Array(references[count...].lazy.map(\.id))
        if !zip(referenced, referenced.dropFirst()).allSatisfy({ $0.0 <= $0.1 }) { referenced.sort() }
        let pieceIDs = references[0..<count].map(\.id)
        func isReferenced(_ id: ChunkID) -> Bool {
            let at = referenced.partitioningIndex { $0 < id }
            return (at < referenced.count && referenced[at] == id) || pieceIDs.contains(id)
        }
        guard manifest.entries.allChunks.allSatisfy({ isReferenced($0.id) }) else {
            throw XferError(
                .invalidManifest,
                "the sealed manifest names chunks its carrier does not reference: the server may not keep them")
        }
        return manifest
    }
}
