/// How a container's chunks are cut, named and carried: the one place a push, a pull and a
/// check of local files ask. Plain: the plain Gear table, SHA-256 ids, zstd payloads the server
/// can read. End to end (``EndToEndChunks``): the keyed Gear table, keyed ids, sealed payloads.
public struct ChunkCodec: Sendable, Hashable {
    /// The container's sealing, or `nil` for a plain container.
    public let endToEnd: EndToEndChunks?

    /// A plain container's.
    public static let plain = ChunkCodec(nil)

    /// The codec of a plain container (`nil`) or of an end-to-end encrypted one.
    public init(_ endToEnd: EndToEndChunks?) {
        self.endToEnd = endToEnd
    }

    /// Whether chunks are sealed end to end.
    public var isSealed: Bool { endToEnd != nil }

    /// The Gear table the chunker rolls with.
    public var gear: [UInt64] { endToEnd?.keying.gear ?? GearTable.values }

    /// Whether a changed chunk may travel against its previous content (``ChunkEncoding/zstdAgainst``):
    /// not a sealed one, which the server cannot rebuild.
    public var sendsAgainst: Bool { endToEnd == nil }

    /// The id of a chunk of these bytes.
    public func id(of bytes: UnsafeRawBufferPointer) -> ChunkID {
        endToEnd?.id(of: bytes) ?? ChunkID.of(bytes)
    }

    /// The chunk as it travels, `id` being ``id(of:)`` of `plain`.
    /// - Throws: `compression` if libzstd fails.
    public func encode(_ plain: UnsafeRawBufferPointer, id: ChunkID, policy: CompressionPolicy) throws -> EncodedChunk {
        guard let endToEnd else { return try Zstd.encode(plain, id: id, policy: policy) }
        return try endToEnd.seal(plain, policy: policy)
    }

    /// The plain bytes of a chunk that arrived, every check passed. A plain container's chunk is
    /// never sealed and a sealed container's always is: the other kind is refused.
    /// - Parameter reference: For a chunk sent against another, that one's id and plain bytes.
    /// - Throws: `corrupt_chunk`, `too_large`, `missing_chunks`, `compression`.
    public func decode(_ chunk: EncodedChunk, maximumLength: Int, reference: (id: ChunkID, plain: [UInt8])? = nil)
        throws -> [UInt8]
    {
        let (plain, checked) = try inflate(chunk, maximumLength: maximumLength, reference: reference)
        if !checked { try chunk.check(plain, hashingTo: ChunkID.of(plain)) }
        return plain
    }

    /// ``decode(_:maximumLength:reference:)`` but, for a plain container's chunk, for the check
    /// of its id, which the caller makes (``EncodedChunk/checkAll(_:_:)``, many at once).
    /// - Returns: The plain bytes, and whether they are checked already (a sealed container's).
    package func inflate(
        _ chunk: EncodedChunk, maximumLength: Int, reference: (id: ChunkID, plain: [UInt8])? = nil
    ) throws -> (plain: [UInt8], checked: Bool) {
        if let endToEnd { return (try endToEnd.open(chunk, maximumLength: maximumLength), true) }
        guard chunk.encoding != .sealed else {
            throw XferError(
                .corruptChunk, "chunk \(chunk.id) came sealed end to end, as no chunk of a plain container is")
        }
        return (try chunk.inflated(maximumLength: maximumLength, reference: reference), false)
    }
}

extension EndToEndChunks: Hashable {
    // Two are the same when their keyed chunking is (both come from the one container key).
    public static func == (lhs: EndToEndChunks, rhs: EndToEndChunks) -> Bool { lhs.keying == rhs.keying }
    public func hash(into hasher: inout Hasher) { hasher.combine(keying) }
}
