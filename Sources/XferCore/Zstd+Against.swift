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
    public static func encode(_ plain: UnsafeRawBufferPointer, id: ChunkID, policy: CompressionPolicy = .default,
                              against reference: (id: ChunkID, plain: [UInt8])) throws -> EncodedChunk {
        let limit = Int(Double(plain.count) * policy.maximumRatio) - ChunkID.byteCount
        if limit > 0 {
            let payload: [UInt8]? = try compressionContexts.withContext { context in
                let scratch = context.scratch(for: ChunkID.byteCount + ZSTD_compressBound(plain.count))
                // Parameters and the prefix are set on the context for this call alone, then reset,
                // so the context goes back to the pool as it came.
                defer { ZSTD_CCtx_reset(context.pointer, ZSTD_reset_session_and_parameters) }
                let written = reference.plain.withUnsafeBytes { prefix -> Int in
                    var status = ZSTD_CCtx_setParameter(context.pointer, ZSTD_c_compressionLevel, policy.level)
                    if ZSTD_isError(status) == 0 { status = ZSTD_CCtx_refPrefix(context.pointer, prefix.baseAddress, prefix.count) }
                    if ZSTD_isError(status) != 0 { return status }
                    return ZSTD_compress2(context.pointer, scratch.baseAddress! + ChunkID.byteCount, scratch.count - ChunkID.byteCount,
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
}
