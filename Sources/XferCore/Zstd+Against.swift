import CZstd

extension Zstd {
    /// Compresses a chunk against the plain bytes of another (its previous content, say), so
    /// that what the two share costs a few bytes: the payload is the reference's id, then a zstd
    /// frame with the reference as its raw-content prefix (``ChunkEncoding/zstdAgainst``).
    /// The receiver needs the reference's plain bytes to read it.
    /// - Parameters:
    ///   - plain: The chunk's plain bytes.
    ///   - id: The chunk's id (already computed by the caller).
    ///   - policy: Level and the minimum saving.
    ///   - reference: The id and plain bytes of the chunk to compress against.
    /// - Returns: The chunk against its reference when that saves the policy's fraction, else
    ///   ``encode(_:id:policy:)``'s result.
    /// - Throws: `XferError` `compression` if libzstd fails.
    public static func encode(
        _ plain: UnsafeRawBufferPointer, id: ChunkID, policy: CompressionPolicy = .default,
        against reference: (id: ChunkID, plain: [UInt8])
    ) throws -> EncodedChunk {
        let limit = Int(Double(plain.count) * policy.maximumRatio) - ChunkID.byteCount
        if limit > 0 {
            let payload: [UInt8]? = try compressionContexts.withContext { context in
                let scratch = context.scratch(for: ChunkID.byteCount + ZSTD_compressBound(plain.count))
                // Parameters and the prefix are set on the context for this call alone, then reset,
                // so the context goes back to the pool as it came.
                defer { ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters) }
                let written = reference.plain.withUnsafeBytes { prefix -> Int in
                    var status = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_compressionLevel, policy.level)
                    if ZSTD_isError(status) == 0 {
                        status = ZSTD_CCtx_refPrefix(context.pointer, prefix.baseAddress, prefix.count)
                    }
                    if ZSTD_isError(status) != 0 { return status }
                    return ZSTD_compress2(
                        context.pointer, scratch.baseAddress! + ChunkID.byteCount, scratch.count - ChunkID.byteCount,
                        plain.baseAddress, plain.count)
                }
                if ZSTD_isError(written) != 0 {
                    throw XferError(.compression, "zstd compression against a reference failed: \(errorName(written))")
                }
                guard written <= limit else { return nil }
                reference.id.bytes.withUnsafeBytes { scratch.copyMemory(from: $0) }
                return Array(UnsafeRawBufferPointer(rebasing: scratch[..<(ChunkID.byteCount + written)]))
            }
            if let payload {
                return EncodedChunk(id: id, length: plain.count, encoding: .zstdAgainst, payload: payload)
            }
        }
        return try encode(plain, id: id, policy: policy)
    }

    /// One zstd frame of `plain` that declares its size and carries zstd's content checksum, so
    /// damage is found on decompression (for bytes that no id vouches for: a manifest delta).
    /// - Parameter prefix: Bytes the result starts with, before the frame (a magic), so the
    ///   frame is not copied again to put them in front.
    /// - Throws: `XferError` `compression` if libzstd fails.
    public static func frame(_ plain: UnsafeRawBufferPointer, level: Int32, prefix: [UInt8] = []) throws -> [UInt8] {
        try compressionContexts.withContext { context in
            // A large input (a manifest delta of many files) gets an output buffer of its own,
            // freed after: the pooled context keeps its scratch for good.
            let bound = ZSTD_compressBound(plain.count)
            let own = bound > 1 << 20 ? UnsafeMutableRawBufferPointer.allocate(byteCount: bound, alignment: 16) : nil
            defer { own?.deallocate() }
            let scratch = own ?? context.scratch(for: bound)
            defer { ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters) }
            var written = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_compressionLevel, level)
            if ZSTD_isError(written) == 0 { written = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_checksumFlag, 1) }
            if ZSTD_isError(written) == 0 {
                written = ZSTD_compress2(
                    context.pointer, scratch.baseAddress, scratch.count, plain.baseAddress, plain.count)
            }
            if ZSTD_isError(written) != 0 {
                throw XferError(.compression, "zstd compression failed: \(errorName(written))")
            }
            return [UInt8](unsafeUninitializedCapacity: prefix.count + written) { out, initialized in
                let raw = UnsafeMutableRawBufferPointer(out)
                prefix.withUnsafeBytes { raw.copyMemory(from: $0) }
                UnsafeMutableRawBufferPointer(rebasing: raw[prefix.count...]).copyMemory(
                    from: UnsafeRawBufferPointer(rebasing: scratch[..<written]))
                initialized = prefix.count + written
            }
        }
    }

    /// One zstd frame like ``frame(_:level:prefix:)``'s, of bytes `produce` hands over in
    /// pieces through the function it is given, so the plain bytes are never held whole (a
    /// manifest delta of many files is megabytes). The frame declares `pledgedSize`, which
    /// must be exactly how many bytes `produce` gives.
    /// - Throws: `XferError` `compression` if libzstd fails or the size given differs; what
    ///   `produce` throws.
    public static func frame(
        level: Int32, pledgedSize: Int, prefix: [UInt8] = [],
        _ produce: (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws -> SpillArray<UInt8> {
        try compressionContexts.withContext { context in
            defer { ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters) }
            var status = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_compressionLevel, level)
            if ZSTD_isError(status) == 0 { status = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_checksumFlag, 1) }
            if ZSTD_isError(status) == 0 { status = ZSTD_CCtx_setPledgedSrcSize(context.pointer, UInt64(pledgedSize)) }
            if ZSTD_isError(status) != 0 {
                throw XferError(.compression, "zstd compression failed: \(errorName(status))")
            }
            var result = SpillArray(prefix)  // (a tree's frame may be megabytes: on disk once large)
            let scratch = context.scratch(for: 64 << 10)
            // Feeds `input` (or, with `end`, finishes the frame), appending what comes out.
            func pump(_ input: UnsafeRawBufferPointer, end: Bool) throws {
                var source = ZSTD_inBuffer(src: input.baseAddress, size: input.count, pos: 0)
                while true {
                    var output = ZSTD_outBuffer(dst: scratch.baseAddress, size: scratch.count, pos: 0)
                    let remaining = ZSTD_compressStream2(
                        context.pointer, &output, &source, end ? ZSTD_e_end : ZSTD_e_continue)
                    if ZSTD_isError(remaining) != 0 {
                        throw XferError(.compression, "zstd compression failed: \(errorName(remaining))")
                    }
                    result.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<output.pos]))
                    if end ? remaining == 0 : source.pos == source.size { return }
                }
            }
            try produce { try pump($0, end: false) }
            try pump(UnsafeRawBufferPointer(start: nil, count: 0), end: true)
            return result
        }
    }

    /// Decompresses one zstd frame of the size it declares, refused before inflating if that
    /// is over `maximumLength` or not declared.
    /// - Throws: `XferError` `too_large`, `corrupt_chunk`.
    public static func decompressFrame(_ frame: [UInt8], maximumLength: Int) throws -> [UInt8] {
        try decompressFrame(frame[...], maximumLength: maximumLength)
    }

    /// The same, of a frame that is part of a larger array, read in place.
    public static func decompressFrame(_ frame: ArraySlice<UInt8>, maximumLength: Int) throws -> [UInt8] {
        let declared = frame.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        guard declared < UInt64.max - 1 else {
            throw XferError(.corruptChunk, "zstd payload is not a frame with a declared size")
        }
        guard declared <= UInt64(maximumLength) else {
            throw XferError(.tooLarge, "zstd frame declares \(declared) bytes, over the limit of \(maximumLength)")
        }
        return try decompress(frame, expectedLength: Int(declared), maximumLength: maximumLength)
    }

    /// Decompresses one zstd frame of the size it declares into a ``SpillArray`` (on disk once
    /// large: a tree's manifest delta), refused before inflating if that is over
    /// `maximumLength` or not declared, or if the frame has trailing bytes.
    /// - Throws: `XferError` `too_large`, `corrupt_chunk`.
    public static func decompressFrame(_ frame: UnsafeRawBufferPointer, maximumLength: Int) throws -> SpillArray<UInt8>
    {
        let declared = ZSTD_getFrameContentSize(frame.baseAddress, frame.count)
        guard declared < UInt64.max - 1 else {
            throw XferError(.corruptChunk, "zstd payload is not a frame with a declared size")
        }
        guard declared <= UInt64(maximumLength) else {
            throw XferError(.tooLarge, "zstd frame declares \(declared) bytes, over the limit of \(maximumLength)")
        }
        let frameSize = ZSTD_findFrameCompressedSize(frame.baseAddress, frame.count)
        guard ZSTD_isError(frameSize) == 0, frameSize == frame.count else {
            throw XferError(.corruptChunk, "zstd payload is truncated or has trailing bytes")
        }
        var plain = SpillArray<UInt8>()
        plain.append(repeating: 0, count: Int(declared))
        let written = plain.withUnsafeMutableBufferPointer { out in
            decompressionContexts.withContext { context in
                ZSTD_decompressDCtx(context.pointer, out.baseAddress, out.count, frame.baseAddress, frame.count)
            }
        }
        if ZSTD_isError(written) != 0 {
            throw XferError(.corruptChunk, "zstd decompression failed: \(errorName(written))")
        }
        guard written == Int(declared) else {
            throw XferError(.corruptChunk, "zstd frame inflated to \(written) bytes, expected \(declared)")
        }
        return plain
    }
}
