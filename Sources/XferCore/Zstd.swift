import CZstd
import Synchronization

/// Compression settings for chunk payloads.
public struct CompressionPolicy: Hashable, Sendable {
    /// The zstd level (``accepts(_:)``; negative levels are zstd's fast ones).
    public var level: Int32
    /// Keep the compressed form only if it is at most this fraction of the plain size;
    /// otherwise store the chunk raw, since decompressing would cost more than it saves.
    public var maximumRatio: Double

    /// Level 1, compressed form kept only if it saves at least 3 %. Level 1 rather than zstd's
    /// own default of 3: on the benchmark's libraries it stores 5 % more and takes a fifth less
    /// CPU from a first push (docs/PERFORMANCE.md, "Defaults, and what they were chosen on").
    public static let `default` = CompressionPolicy(level: 1, maximumRatio: 0.97)

    /// Whether a push may ask for `level`: zstd's fast levels -7 to -1, and 1 to 19 (0 is not
    /// a level of its own: zstd reads it as its default).
    public static func accepts(_ level: Int32) -> Bool { level != 0 && (-7...19).contains(level) }

    /// Creates a policy.
    /// - Parameters:
    ///   - level: The zstd level.
    ///   - maximumRatio: Largest compressed/plain ratio that is still stored compressed.
    public init(level: Int32, maximumRatio: Double = 0.97) {
        self.level = level
        self.maximumRatio = maximumRatio
    }
}

/// zstd over libzstd, with compression and decompression contexts reused from a pool.
public enum Zstd {
    /// Compresses a chunk under a policy.
    /// - Parameters:
    ///   - plain: The chunk's plain bytes.
    ///   - id: The chunk's id (already computed by the caller).
    ///   - policy: Level and the minimum saving.
    /// - Returns: The chunk, zstd-encoded or raw if compression saved too little.
    /// - Throws: `XferError` `compression` if libzstd fails.
    public static func encode(
        _ plain: UnsafeRawBufferPointer, id: ChunkID,
        policy: CompressionPolicy = .default
    ) throws -> EncodedChunk {
        let limit = Int(Double(plain.count) * policy.maximumRatio)
        if limit > 0 {
            // Compress into the context's scratch buffer, then copy out only what was written,
            // so a stored payload never carries compressBound's slack.
            let compressed: [UInt8]? = try compressionContexts.withContext { context in
                let scratch = context.scratch(for: ZSTD_compressBound(plain.count))
                let written = ZSTD_compressCCtx(
                    context.pointer, scratch.baseAddress, scratch.count,
                    plain.baseAddress, plain.count, policy.level)
                if ZSTD_isError(written) != 0 {
                    throw XferError(.compression, "zstd compression failed: \(errorName(written))")
                }
                return written <= limit ? Array(UnsafeRawBufferPointer(rebasing: scratch[..<written])) : nil
            }
            if let compressed {
                return EncodedChunk(id: id, length: plain.count, encoding: .zstd, payload: compressed)
            }
        }
        return EncodedChunk(id: id, length: plain.count, encoding: .raw, payload: Array(plain))
    }

    /// Decompresses one zstd frame, refusing anything but exactly `expectedLength` bytes.
    /// - Parameters:
    ///   - frame: A single zstd frame that declares its content size.
    ///   - expectedLength: The plain length the caller expects.
    ///   - maximumLength: The largest plain length accepted.
    /// - Returns: The plain bytes.
    /// - Throws: `XferError` `too_large` or `corrupt_chunk` before decompressing if the frame
    ///   declares another size, no size, or trailing bytes; `compression` if libzstd fails.
    ///   - prefix: The plain bytes a frame made by ``encode(_:id:policy:against:)`` was
    ///     compressed against (raw content, never read as a zstd dictionary).
    public static func decompress(
        _ frame: [UInt8], expectedLength: Int, maximumLength: Int,
        prefix: [UInt8]? = nil
    ) throws -> [UInt8] {
        try decompress(frame[...], expectedLength: expectedLength, maximumLength: maximumLength, prefix: prefix)
    }

    /// ``decompress(_:expectedLength:maximumLength:prefix:)`` of a frame that is part of a
    /// larger array (after a magic or a reference id), read in place.
    public static func decompress(
        _ frame: ArraySlice<UInt8>, expectedLength: Int, maximumLength: Int,
        prefix: [UInt8]? = nil
    ) throws -> [UInt8] {
        try frame.withUnsafeBytes { source in
            let declared = ZSTD_getFrameContentSize(source.baseAddress, source.count)
            // ZSTD_CONTENTSIZE_UNKNOWN and ZSTD_CONTENTSIZE_ERROR are the two largest UInt64 values.
            guard declared < UInt64.max - 1 else {
                throw XferError(.corruptChunk, "zstd payload is not a frame with a declared size")
            }
            guard declared <= UInt64(maximumLength) else {
                throw XferError(.tooLarge, "zstd frame declares \(declared) bytes, over the limit of \(maximumLength)")
            }
            guard declared == UInt64(expectedLength) else {
                throw XferError(.corruptChunk, "zstd frame declares \(declared) bytes, expected \(expectedLength)")
            }
            let frameSize = ZSTD_findFrameCompressedSize(source.baseAddress, source.count)
            guard ZSTD_isError(frameSize) == 0, frameSize == source.count else {
                throw XferError(.corruptChunk, "zstd payload is truncated or has trailing bytes")
            }
            return try [UInt8](unsafeUninitializedCapacity: expectedLength) { out, initialized in
                let written = decompressionContexts.withContext { context in
                    guard let prefix else {
                        return ZSTD_decompressDCtx(
                            context.pointer, out.baseAddress, expectedLength,
                            source.baseAddress, source.count)
                    }
                    // A prefix is used by the next frame only; the context forgets it after.
                    return prefix.withUnsafeBytes { prefix in
                        let referenced = ZSTD_DCtx_refPrefix(context.pointer, prefix.baseAddress, prefix.count)
                        if ZSTD_isError(referenced) != 0 { return referenced }
                        return ZSTD_decompressDCtx(
                            context.pointer, out.baseAddress, expectedLength,
                            source.baseAddress, source.count)
                    }
                }
                if ZSTD_isError(written) != 0 {
                    initialized = 0
                    throw XferError(.corruptChunk, "zstd decompression failed: \(errorName(written))")
                }
                guard written == expectedLength else {
                    initialized = 0
                    throw XferError(
                        .corruptChunk, "zstd frame inflated to \(written) bytes, expected \(expectedLength)")
                }
                initialized = written
            }
        }
    }

    /// The name libzstd gives an error code.
    static func errorName(_ code: Int) -> String {
        String(cString: ZSTD_getErrorName(code))
    }

    static let compressionContexts = ContextPool<CompressionContext>()
    static let decompressionContexts = ContextPool<DecompressionContext>()
}

/// A libzstd context that a pool hands to one thread at a time.
protocol ZstdContext: AnyObject, Sendable {
    init()
}

/// One `ZSTD_CCtx` and the output buffer that goes with it. Used by one thread at a time:
/// the pool lends it exclusively.
final class CompressionContext: ZstdContext, @unchecked Sendable {
    let pointer: OpaquePointer
    private var buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    init() { pointer = ZSTD_createCCtx()! }

    deinit {
        ZSTD_freeCCtx(pointer)
        buffer.deallocate()
    }

    /// An output buffer of at least `size` bytes, reused across calls.
    func scratch(for size: Int) -> UnsafeMutableRawBufferPointer {
        if buffer.count < size {
            buffer.deallocate()
            buffer = .allocate(byteCount: max(size, 64 << 10), alignment: 16)
        }
        return UnsafeMutableRawBufferPointer(rebasing: buffer[..<size])
    }
}

/// One `ZSTD_DCtx`. Used by one thread at a time: the pool lends it exclusively.
final class DecompressionContext: ZstdContext, @unchecked Sendable {
    let pointer: OpaquePointer
    init() { pointer = ZSTD_createDCtx()! }
    deinit { ZSTD_freeDCtx(pointer) }
}

/// Lends reusable contexts, creating one only when all are in use. Contexts keep their
/// tables between uses, which is most of zstd's per-call cost on 64 KiB inputs.
final class ContextPool<Context: ZstdContext>: Sendable {
    private let idle = Mutex<[Context]>([])

    /// Runs `body` with a context no other thread is using.
    func withContext<R>(_ body: (Context) throws -> R) rethrows -> R {
        let context = idle.withLock { $0.popLast() } ?? Context()
        defer { idle.withLock { $0.append(context) } }
        return try body(context)
    }
}
