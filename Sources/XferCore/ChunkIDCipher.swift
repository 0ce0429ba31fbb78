import CCrypto
import Foundation

/// Chunk ids as a store keeps them at rest: each 16-byte half enciphered with AES-256 under a
/// key of the store's own (its index key, kept sealed beside the data), so the store names no
/// chunk by the SHA-256 of its bytes, while the same id always gives the same stored bytes (the
/// store still looks ids up, and every lookup goes through here) and the stored bytes give the
/// id back. A chunk id is uniformly random, so enciphering its halves apart hides as much as a
/// wide block would.
public final class ChunkIDCipher: @unchecked Sendable {  // the template contexts are only copied from, never used
    private let encryptTemplate: OpaquePointer
    private let decryptTemplate: OpaquePointer

    /// Bytes in an index key.
    public static let keySize = 32

    /// A new random index key.
    public static func newKey() -> [UInt8] { Crypto.randomBytes(keySize) }

    /// A cipher under `key` (32 bytes).
    public init(key: [UInt8]) throws {
        guard key.count == Self.keySize else {
            throw XferError(.invalidConfiguration, "an index key is \(Self.keySize) bytes")
        }
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-ECB", nil) else {
            throw XferError(.crypto, "libcrypto has no AES-256-ECB: \(CryptoErrors.drain())")
        }
        defer { EVP_CIPHER_free(cipher) }
        func template(_ encrypting: Bool) throws -> OpaquePointer {
            guard let context = EVP_CIPHER_CTX_new(),
                EVP_CipherInit_ex2(context, cipher, key, nil, encrypting ? 1 : 0, nil) == 1,
                EVP_CIPHER_CTX_set_padding(context, 0) == 1
            else {
                throw XferError(.crypto, "cannot set up AES-256-ECB: \(CryptoErrors.drain())")
            }
            return context
        }
        encryptTemplate = try template(true)
        decryptTemplate = try template(false)
    }

    deinit {
        EVP_CIPHER_CTX_free(encryptTemplate)
        EVP_CIPHER_CTX_free(decryptTemplate)
    }

    /// The bytes a store keeps for `id`.
    public func encipher(_ id: ChunkID) -> [UInt8] {
        id.withUnsafeBytes { run(encryptTemplate, $0) }
    }

    /// The id whose stored bytes these are; `nil` if they are not 32 bytes.
    public func decipher(_ stored: [UInt8]) -> ChunkID? {
        guard stored.count == ChunkID.byteCount else { return nil }
        return ChunkID(bytes: stored.withUnsafeBytes { run(decryptTemplate, $0) })
    }

    private func run(_ template: OpaquePointer, _ input: UnsafeRawBufferPointer) -> [UInt8] {
        let context = Self.copy(template)
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: ChunkID.byteCount)
        out.withUnsafeMutableBytes { Self.update(context, input, into: $0) }
        return out
    }

    /// A context of its own, copied from `template`.
    fileprivate static func copy(_ template: OpaquePointer) -> OpaquePointer {
        guard let context = EVP_CIPHER_CTX_new() else { fatalError("EVP_CIPHER_CTX_new failed: out of memory") }
        guard EVP_CIPHER_CTX_copy(context, template) == 1 else {
            fatalError("AES-256-ECB failed: \(CryptoErrors.drain())")
        }
        return context
    }

    /// ECB over whole blocks: every block in, every block out, nothing kept for the next call.
    fileprivate static func update(
        _ context: OpaquePointer, _ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer
    ) {
        precondition(input.count % 16 == 0 && output.count == input.count && input.count <= Int(Int32.max))
        guard !input.isEmpty else { return }
        var written: Int32 = 0
        let ok =
            EVP_CipherUpdate(
                context, output.baseAddress!.assumingMemoryBound(to: UInt8.self), &written,
                input.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1
            && written == Int32(input.count)
        guard ok else { fatalError("AES-256-ECB failed: \(CryptoErrors.drain())") }
    }

    /// Contexts for many ids (one transaction's), made once instead of one per id.
    public func contexts() -> Contexts { Contexts(self) }

    /// A context each way, copied from the cipher's templates once and kept: each call takes
    /// the object's lock, so rows read on another thread never share a context mid-call, and
    /// the contexts are freed with the object, never before its last user lets go.
    public final class Contexts: @unchecked Sendable {  // the contexts are only used under `lock`
        private let lock = NSLock()
        private let encrypting: OpaquePointer
        private let decrypting: OpaquePointer

        fileprivate init(_ cipher: ChunkIDCipher) {
            encrypting = ChunkIDCipher.copy(cipher.encryptTemplate)
            decrypting = ChunkIDCipher.copy(cipher.decryptTemplate)
        }

        deinit {
            EVP_CIPHER_CTX_free(encrypting)
            EVP_CIPHER_CTX_free(decrypting)
        }

        /// The bytes a store keeps for each of `ids`, in order: one cipher call for all of them.
        public func encipher(_ ids: [ChunkID]) -> [[UInt8]] {
            let output = enciphered(ids)
            return (0..<ids.count).map { Array(output[$0 * ChunkID.byteCount..<($0 + 1) * ChunkID.byteCount]) }
        }

        /// The bytes a store keeps for each of `ids`, as ids (the order a database sorts them
        /// in is theirs: ``ChunkID``'s `<` is bytewise).
        public func storedForms(_ ids: [ChunkID]) -> [ChunkID] {
            let output = enciphered(ids)
            return (0..<ids.count).map {
                ChunkID(bytes: output[$0 * ChunkID.byteCount..<($0 + 1) * ChunkID.byteCount])!
            }
        }

        /// `ids`' stored bytes, one after another.
        private func enciphered(_ ids: [ChunkID]) -> [UInt8] {
            let size = ChunkID.byteCount
            var input = [UInt8](repeating: 0, count: ids.count * size)
            input.withUnsafeMutableBytes { buffer in
                for (index, id) in ids.enumerated() {
                    id.withUnsafeBytes {
                        buffer.baseAddress!.advanced(by: index * size).copyMemory(
                            from: $0.baseAddress!, byteCount: size)
                    }
                }
            }
            var output = [UInt8](repeating: 0, count: input.count)
            lock.withLock {
                input.withUnsafeBytes { inBytes in
                    output.withUnsafeMutableBytes { ChunkIDCipher.update(encrypting, inBytes, into: $0) }
                }
            }
            return output
        }

        /// The id whose stored bytes these are; `nil` if they are not 32 bytes.
        public func decipher(_ stored: [UInt8]) -> ChunkID? {
            guard stored.count == ChunkID.byteCount else { return nil }
            var out = [UInt8](repeating: 0, count: ChunkID.byteCount)
            lock.withLock {
                stored.withUnsafeBytes { inBytes in
                    out.withUnsafeMutableBytes { ChunkIDCipher.update(decrypting, inBytes, into: $0) }
                }
            }
            return ChunkID(bytes: out)
        }
    }
}
