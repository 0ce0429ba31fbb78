/// How a chunk's payload is stored: its plain bytes, or one zstd frame of them.
public enum ChunkEncoding: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// The payload is the plain bytes (compression saved too little).
    case raw = 0
    /// The payload is a single zstd frame that declares the plain length.
    case zstd = 1
    /// The payload is the id of a reference chunk (32 bytes), then one zstd frame compressed
    /// with that chunk's plain bytes as its prefix: a changed chunk sent against its previous
    /// content (``Zstd/encode(_:id:policy:against:)``). It travels only; it is never stored.
    case zstdAgainst = 2
    /// The payload is a chunk of an end-to-end encrypted container (``EndToEndChunks``): its
    /// 32-byte keyed id, then a sealed value only the container's key opens. The chunk's id is
    /// the SHA-256 of `xfer e2e chunk id v1` and that keyed id, and its length is the payload's;
    /// that binding is all the server can check, and all it needs to keep it apart from every
    /// other chunk. Stored and served as it came.
    case sealed = 3

    public var description: String {
        switch self {
        case .raw: "raw"
        case .zstd: "zstd"
        case .zstdAgainst: "zstd-against"
        case .sealed: "sealed"
        }
    }
}

/// A chunk as it travels and is stored: its id, plain length, encoding and payload.
public struct EncodedChunk: Sendable, Hashable {
    /// SHA-256 of the plain bytes.
    public var id: ChunkID
    /// Length of the plain bytes.
    public var length: Int
    /// How ``payload`` encodes the plain bytes.
    public var encoding: ChunkEncoding
    /// The stored bytes.
    public var payload: [UInt8]

    /// Creates an encoded chunk; nothing is checked until ``decoded(maximumLength:)``.
    /// - Parameters:
    ///   - id: The claimed id.
    ///   - length: The claimed plain length.
    ///   - encoding: The payload's encoding.
    ///   - payload: The stored bytes.
    public init(id: ChunkID, length: Int, encoding: ChunkEncoding, payload: [UInt8]) {
        self.id = id
        self.length = length
        self.encoding = encoding
        self.payload = payload
    }

    /// The chunk as it is stored: itself, or for a ``ChunkEncoding/zstdAgainst`` payload (which
    /// travels only) its plain bytes compressed alone.
    /// - Parameters:
    ///   - plain: The chunk's plain bytes (already checked against its id).
    ///   - policy: Level and minimum saving for compressing it alone.
    /// - Throws: `XferError` `compression` if libzstd fails.
    public func stored(plain: UnsafeRawBufferPointer, policy: CompressionPolicy = .default) throws -> EncodedChunk {
        encoding == .zstdAgainst ? try Zstd.encode(plain, id: id, policy: policy) : self
    }

    /// The chunk a ``ChunkEncoding/zstdAgainst`` payload was compressed against (`nil` for
    /// the other encodings, or a payload too short to name one).
    public var reference: ChunkID? {
        guard encoding == .zstdAgainst, payload.count >= ChunkID.byteCount else { return nil }
        return ChunkID(bytes: payload[0..<ChunkID.byteCount])
    }

    /// The plain bytes, checked against the claimed length and id. For a
    /// ``ChunkEncoding/sealed`` chunk, the payload as it is (what the server stores and serves),
    /// once its length and its id's binding to the keyed id in it are checked; only the
    /// container's key opens it (``EndToEndChunks/open(_:maximumLength:)``).
    /// - Parameters:
    ///   - maximumLength: The largest plain length accepted; a payload that would inflate past
    ///     it is refused before any memory is reserved for it (a sealed payload may be as long
    ///     as such a chunk sealed, ``EndToEndChunks/maximumPayload(plain:)``).
    ///   - reference: For a ``ChunkEncoding/zstdAgainst`` payload, the plain bytes of the chunk
    ///     it names (``reference``), already verified by the caller against that id.
    /// - Returns: The plain bytes.
    /// - Throws: `XferError` `too_large`, `corrupt_chunk` or `compression`; `missing_chunks`
    ///   for a payload against a reference that was not given.
    public func decoded(
        maximumLength: Int = ChunkerConfiguration.maximumAllowedSize,
        reference: (id: ChunkID, plain: [UInt8])? = nil
    ) throws -> [UInt8] {
        let plain = try inflated(maximumLength: maximumLength, reference: reference)
        if encoding != .sealed { try check(plain, hashingTo: ChunkID.of(plain)) }
        return plain
    }

    /// ``decoded(maximumLength:reference:)`` but for the check of the plain bytes' id, which
    /// the caller makes (``check(_:hashingTo:)``, or ``checkAll(_:_:)`` for many at once).
    /// A sealed chunk is checked whole here.
    package func inflated(
        maximumLength: Int = ChunkerConfiguration.maximumAllowedSize,
        reference: (id: ChunkID, plain: [UInt8])? = nil
    ) throws -> [UInt8] {
        let limit = encoding == .sealed ? EndToEndChunks.maximumPayload(plain: maximumLength) : maximumLength
        guard length >= 0, length <= limit else {
            throw XferError(.tooLarge, "chunk \(id) claims \(length) bytes, over the limit of \(limit)")
        }
        let plain: [UInt8]
        switch encoding {
        case .raw:
            guard payload.count == length else {
                throw XferError(.corruptChunk, "chunk \(id) is \(payload.count) bytes, expected \(length)")
            }
            plain = payload
        case .zstd:
            plain = try Zstd.decompress(payload, expectedLength: length, maximumLength: maximumLength)
        case .zstdAgainst:
            guard let named = self.reference else {
                throw XferError(.corruptChunk, "chunk \(id) is sent against a reference but names none")
            }
            guard let reference, reference.id == named else {
                throw XferError(.missingChunks, "chunk \(id) is sent against chunk \(named), which is not at hand")
            }
            plain = try Zstd.decompress(
                payload[ChunkID.byteCount...], expectedLength: length,
                maximumLength: maximumLength, prefix: reference.plain)
        case .sealed:
            guard payload.count == length, length >= EndToEndChunks.minimumPayload else {
                throw XferError(
                    .corruptChunk,
                    "sealed chunk \(id) is \(payload.count) bytes, expected \(length) and at least \(EndToEndChunks.minimumPayload)"
                )
            }
            guard EndToEndChunks.id(keyed: payload[0..<ChunkID.byteCount]) == id else {
                throw XferError(.corruptChunk, "sealed chunk \(id) carries a keyed id that does not give its id")
            }
            return payload
        }
        return plain
    }

    /// Checks inflated plain bytes whose SHA-256 is `actual` against this chunk's id.
    /// - Throws: `corrupt_chunk` if they are not this chunk's.
    package func check(_ plain: [UInt8], hashingTo actual: ChunkID) throws {
        guard actual == id else {
            throw XferError(.corruptChunk, "chunk bytes hash to \(actual), not to their id \(id)")
        }
        // The one plain content whose id is a sealed chunk's (the label and a keyed id): never
        // taken, so no plain upload holds a sealed chunk's place.
        guard !EndToEndChunks.isSealedIDPreimage(plain) else {
            throw XferError(
                .corruptChunk,
                "chunk \(id) is the label of a sealed chunk's id and a keyed id, which no plain chunk may be")
        }
    }

    /// What is wrong with each of `chunks` (`nil`: it decodes to its id), as
    /// ``decoded(maximumLength:reference:)`` would throw it, ``checkedTogether`` at a time with
    /// their ids hashed together (``SHA256Lanes``): what a server checks of an upload.
    package static func verdicts(_ chunks: [EncodedChunk], maximumLength: Int) -> [XferError?] {
        var verdicts = [XferError?](repeating: nil, count: chunks.count)
        for start in stride(from: 0, to: chunks.count, by: checkedTogether) {
            var plains: [[UInt8]] = []
            var hashed: [Int] = []
            for index in start..<min(start + checkedTogether, chunks.count) {
                do {
                    let plain = try chunks[index].inflated(maximumLength: maximumLength)
                    if chunks[index].encoding != .sealed {
                        plains.append(plain)
                        hashed.append(index)
                    }
                } catch {
                    verdicts[index] = chunks[index].refusal(error)
                }
            }
            let actual = SHA256Lanes.ids(of: plains)
            for (position, index) in hashed.enumerated() {
                do { try chunks[index].check(plains[position], hashingTo: actual[position]) } catch {
                    verdicts[index] = chunks[index].refusal(error)
                }
            }
        }
        return verdicts
    }

    /// Chunks ``verdicts(_:maximumLength:)`` checks together: their plain bytes are held at once.
    package static let checkedTogether = 16

    private func refusal(_ error: any Error) -> XferError {
        error as? XferError ?? XferError(.corruptChunk, "chunk \(id.hex) does not decode")
    }

    /// ``check(_:hashingTo:)`` of many inflated chunks (none sealed), their ids hashed together
    /// (``SHA256Lanes``).
    /// - Throws: `corrupt_chunk` for the first whose bytes are not its.
    package static func checkAll(_ chunks: [EncodedChunk], _ plains: [[UInt8]]) throws {
        precondition(chunks.count == plains.count && !chunks.contains { $0.encoding == .sealed })
        let actual = SHA256Lanes.ids(of: plains)
        for index in chunks.indices { try chunks[index].check(plains[index], hashingTo: actual[index]) }
    }
}
