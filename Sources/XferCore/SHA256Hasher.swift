import CCrypto

/// The SHA-256 message digest as fetched once from libcrypto's default provider.
///
/// `EVP_MD` objects are immutable and may be shared between threads once fetched; fetching
/// on every hash would cost a provider lookup per chunk.
private struct FetchedDigest: @unchecked Sendable {  // immutable after init; EVP_MD is thread-safe to share
    let md: OpaquePointer

    static let sha256: FetchedDigest = {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else {
            fatalError("libcrypto has no SHA256 digest: \(CryptoErrors.drain())")
        }
        return FetchedDigest(md: md)
    }()
}

/// An incremental SHA-256 over libcrypto's EVP interface (which uses SHA-NI where the CPU has it).
///
/// Not copyable: it owns one `EVP_MD_CTX`, reused across ``reset()`` calls.
public struct SHA256Hasher: ~Copyable {
    private let context: OpaquePointer

    /// Creates a hasher ready for input.
    public init() {
        guard let context = EVP_MD_CTX_new() else {
            fatalError("EVP_MD_CTX_new failed: out of memory")
        }
        self.context = context
        reset()
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Starts a new digest, discarding any input so far.
    public mutating func reset() {
        guard EVP_DigestInit_ex(context, FetchedDigest.sha256.md, nil) == 1 else {
            fatalError("EVP_DigestInit_ex(SHA256) failed: \(CryptoErrors.drain())")
        }
    }

    /// Adds bytes to the digest.
    /// - Parameter bytes: The next bytes of the message.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
            fatalError("EVP_DigestUpdate failed: \(CryptoErrors.drain())")
        }
    }

    /// Finishes the digest and resets the hasher for the next message.
    /// - Returns: The digest as a ``ChunkID``.
    public mutating func finalize() -> ChunkID {
        var digest = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        var length: UInt32 = 0
        let ok = withUnsafeMutableBytes(of: &digest) { raw in
            EVP_DigestFinal_ex(context, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), &length)
        }
        guard ok == 1, length == 32 else {
            fatalError("EVP_DigestFinal_ex failed: \(CryptoErrors.drain())")
        }
        let id = withUnsafeBytes(of: &digest) { ChunkID(bytes: $0)! }
        reset()
        return id
    }
}

/// Reads libcrypto's thread-local error queue into text.
enum CryptoErrors {
    /// Empties the error queue.
    /// - Returns: The queued errors' strings joined by "; ", or "no error queued".
    static func drain() -> String {
        var parts: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            parts.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return parts.isEmpty ? "no error queued" : parts.joined(separator: "; ")
    }
}
