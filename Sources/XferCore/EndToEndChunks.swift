/// Chunks of an end-to-end encrypted container (docs/FORMAT.md,
/// "End-to-end chunks"): what the server stores and serves is a sealed payload it cannot open,
/// under an id it can still check.
///
/// A chunk's *keyed id* is HMAC-SHA-256 of its plain bytes under the container's `chunk id`
/// key (``KeyedChunking``). Its id on the wire and in the server's stores is the SHA-256 of
/// `xfer e2e chunk id v1` and the keyed id, and its payload (``ChunkEncoding/sealed``) is the
/// keyed id, then the chunk compressed (or not), padded to a Padmé length and sealed under the
/// container's `chunk` key with the keyed id as context. The server checks that the id is the
/// hash of the payload's first 32 bytes: it cannot tell what the chunk holds, but no upload can
/// take the id of a plain chunk (a preimage of SHA-256) or of another container's (its keyed
/// ids are secret), so a sealed chunk never stands in for a chunk it is not. A client checks,
/// before it uses a byte, the id, the tag, the padding and the lengths, and last that the plain
/// bytes give the keyed id again.
public struct EndToEndChunks: Sendable {
    /// What a keyed id is hashed with to make a chunk's id.
    static let idLabel = Array("xfer e2e chunk id v1".utf8)
    /// What a payload is sealed with as context, before the keyed id.
    static let contextLabel = Array("xfer e2e chunk v1".utf8)
    /// The inner header: encoding (0 raw, 1 zstd), plain length (u32 little-endian).
    static let innerHeaderSize = 5
    /// The fewest bytes a sealed payload has: the keyed id, a sealed empty chunk (its header
    /// and one byte of padding).
    public static let minimumPayload = ChunkID.byteCount + Sealing.overhead + innerHeaderSize + 1

    /// The most payload bytes a sealed chunk of at most `plain` bytes takes: the keyed id, the
    /// seal, the header, and Padmé's padding (at most 12 %, so an eighth bounds it).
    public static func maximumPayload(plain: Int) -> Int {
        let inner = plain + innerHeaderSize + 1
        return ChunkID.byteCount + Sealing.overhead + inner + inner / 8 + 8
    }

    /// The id a chunk whose keyed id is `keyed` has on the wire and in the server's stores.
    public static func id(keyed: some Collection<UInt8>) -> ChunkID {
        var bytes = idLabel
        bytes.append(contentsOf: keyed)
        return ChunkID.of(bytes)
    }

    /// Whether `plain` is what a sealed chunk's id is the SHA-256 of (the label, then 32 bytes):
    /// a plain chunk of exactly these bytes would take that sealed chunk's id.
    public static func isSealedIDPreimage(_ plain: [UInt8]) -> Bool {
        plain.count == idLabel.count + ChunkID.byteCount && plain.starts(with: idLabel)
    }

    /// The keyed Gear table and keyed ids.
    public let keying: KeyedChunking
    private let sealing: SealingKeys

    /// The chunks of the container whose key is `key`.
    public init(key: ContainerKey) { self.init(ring: ContainerKeyRing(single: key)) }

    /// The chunks of the container whose keys are `ring`: ids and cuts under its first key,
    /// new payloads sealed under its newest, old ones opened under whichever sealed them.
    public init(ring: ContainerKeyRing) {
        keying = ring.identity.chunking
        sealing = ring.sealing("chunk")
    }

    /// The id of a chunk of these plain bytes (``id(keyed:)`` of its keyed id).
    public func id(of plain: UnsafeRawBufferPointer) -> ChunkID {
        Self.id(keyed: keying.id(of: plain).bytes)
    }

    /// The chunk as it travels and is stored: compressed by `policy` when that saves enough,
    /// padded, sealed.
    /// - Throws: `compression` if libzstd fails.
    public func seal(_ plain: UnsafeRawBufferPointer, policy: CompressionPolicy = .default) throws -> EncodedChunk {
        let keyed = keying.id(of: plain)
        let compressed = try Zstd.encode(plain, id: keyed, policy: policy)
        // Header, body and padding made in one buffer (ISO/IEC 7816-4 to the Padmé length of one more byte).
        let unpadded = Self.innerHeaderSize + compressed.payload.count
        let paddedLength = Padding.padme(unpadded + 1)
        var inner: [UInt8] = []
        inner.reserveCapacity(paddedLength)
        inner.append(compressed.encoding.rawValue)
        withUnsafeBytes(of: UInt32(plain.count).littleEndian) { inner.append(contentsOf: $0) }
        inner.append(contentsOf: compressed.payload)
        inner.append(0x80)
        inner.append(contentsOf: repeatElement(0, count: paddedLength - unpadded - 1))
        var payload = keyed.bytes
        payload.reserveCapacity(ChunkID.byteCount + Sealing.overhead + inner.count)
        sealing.seal(inner, context: Self.contextLabel + keyed.bytes, appendingTo: &payload)
        return EncodedChunk(id: Self.id(keyed: keyed.bytes), length: payload.count, encoding: .sealed, payload: payload)
    }

    /// The plain bytes of a sealed chunk, every check passed.
    /// - Parameter maximumLength: The largest plain chunk accepted; a header that declares
    ///   more is refused before anything is inflated.
    /// - Throws: `corrupt_chunk` for a chunk that is not sealed, or fails its id, its tag, its
    ///   padding, its lengths or its keyed id; `too_large` past the limit; `compression`.
    public func open(_ chunk: EncodedChunk, maximumLength: Int = ChunkerConfiguration.maximumAllowedSize) throws
        -> [UInt8]
    {
        guard chunk.encoding == .sealed else {
            throw XferError(
                .corruptChunk,
                "chunk \(chunk.id) of an encrypted container is not sealed (encoding \(chunk.encoding)); nothing was written"
            )
        }
        // The id binds the keyed id (the server's own check, again: the server may be hostile).
        let payload = try chunk.decoded(maximumLength: maximumLength)
        let keyed = ChunkID(bytes: payload[0..<ChunkID.byteCount])!
        let opened = try sealing.open(
            payload[ChunkID.byteCount...], context: Self.contextLabel + keyed.bytes, what: "chunk \(chunk.id)")
        // The padding's start, found in place: the last byte that is not zero, which must be 0x80,
        // where Padmé puts it.
        guard let mark = opened.lastIndex(where: { $0 != 0 }), opened[mark] == 0x80, mark >= Self.innerHeaderSize,
            opened.count == Padding.padme(mark + 1),
            let encoding = ChunkEncoding(rawValue: opened[0]), encoding == .raw || encoding == .zstd
        else {
            throw XferError(.corruptChunk, "chunk \(chunk.id) opens to a value that is not a padded chunk")
        }
        let length = Int(opened[1]) | Int(opened[2]) << 8 | Int(opened[3]) << 16 | Int(opened[4]) << 24
        guard length <= maximumLength else {
            throw XferError(
                .tooLarge, "chunk \(chunk.id) declares \(length) plain bytes, over the limit of \(maximumLength)")
        }
        let body = opened[Self.innerHeaderSize..<mark]
        let plain: [UInt8]
        if encoding == .raw {
            guard body.count == length else {
                throw XferError(.corruptChunk, "chunk \(chunk.id) holds \(body.count) bytes, expected \(length)")
            }
            plain = Array(body)
        } else {
            plain = try Zstd.decompress(body, expectedLength: length, maximumLength: maximumLength)
        }
        guard keying.id(of: plain) == keyed else {
            throw XferError(.corruptChunk, "chunk \(chunk.id) opens to bytes that do not give its keyed id")
        }
        return plain
    }
}
