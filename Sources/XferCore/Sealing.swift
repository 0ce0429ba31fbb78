import CCrypto
import Foundation

/// The sealed-value format and its primitives (libcrypto's AES-256-GCM and HMAC-SHA-256).
public enum Sealing {
    static let magic: [UInt8] = Array("XFS1".utf8)
    static let keyIDSize = 8
    static let saltSize = 16
    static let tagSize = 16
    static let headerSize = 4 + keyIDSize + saltSize
    /// Bytes a sealed value has beyond its plain value: 44.
    public static let overhead = headerSize + tagSize

    static let keyIDLabel = Array("xfer key id v1".utf8)
    static let chunkNameLabel = Array("xfer chunk name v1".utf8)
    static let valueKeyLabel = Array("xfer sealed value v1".utf8)

    /// Whether `bytes` starts as a sealed value does (a plain stored chunk starts `XFC1`, a
    /// manifest `XFM`).
    public static func isSealed(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.count >= overhead && bytes.prefix(4).elementsEqual(magic)
    }

    /// The id of the key a sealed value names.
    public static func keyID(of sealed: some Collection<UInt8>) -> SealingKeyID? {
        guard isSealed(sealed) else { return nil }
        return SealingKeyID(sealed.dropFirst(4).prefix(keyIDSize).reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// The context of a chunk's sealed bytes: a label and the chunk's id.
    public static func chunkContext(_ id: ChunkID) -> [UInt8] {
        id.withUnsafeBytes { Array("xfer chunk v1".utf8) + Array($0) }
    }

    /// The context of a manifest's sealed bytes: the version it is the manifest of.
    public static func manifestContext(document: Int64, version: Int64) -> [UInt8] {
        Array("xfer manifest v1 \(document) \(version)".utf8)
    }

    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        message.withUnsafeBytes { Crypto.hmac(key: key, $0) }
    }

    /// The bytes of an even number of hex digits (either case); `nil` for anything else.
    package static func hexBytes(_ text: some StringProtocol) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static let cipher: FetchedCipher = {
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil) else {
            fatalError("libcrypto has no AES-256-GCM: \(CryptoErrors.drain())")
        }
        return FetchedCipher(cipher: cipher)
    }()

    static func seal(
        _ plain: UnsafeRawBufferPointer, key: SealingKey, salt: [UInt8], context: [UInt8],
        appendingTo out: inout [UInt8]
    ) {
        let valueKey = hmac(key: key.bytes, valueKeyLabel + salt)
        out.reserveCapacity(out.count + overhead + plain.count)
        out += magic
        withUnsafeBytes(of: key.id.value.bigEndian) { out.append(contentsOf: $0) }
        out += salt
        let start = out.count
        out += repeatElement(0, count: plain.count + tagSize)
        let ok = out.withUnsafeMutableBufferPointer { buffer in
            crypt(
                encrypting: true, key: valueKey, context: context, input: plain,
                output: buffer.baseAddress! + start, tag: buffer.baseAddress! + start + plain.count)
        }
        guard ok else { fatalError("AES-256-GCM sealing failed: \(CryptoErrors.drain())") }
    }

    /// The plain value of `sealed` (a whole sealed value, at least ``overhead`` bytes), or `nil`
    /// if it fails its tag under `key`.
    static func open(_ sealed: UnsafeRawBufferPointer, key: SealingKey, context: [UInt8]) -> [UInt8]? {
        guard sealed.count >= overhead else { return nil }
        let salt = Array(sealed[(4 + keyIDSize)..<headerSize])
        let valueKey = hmac(key: key.bytes, valueKeyLabel + salt)
        let length = sealed.count - overhead
        var tag = Array(sealed[(sealed.count - tagSize)...])
        var ok = false
        let plain = [UInt8](unsafeUninitializedCapacity: length) { out, initialized in
            ok = tag.withUnsafeMutableBufferPointer { tag in
                crypt(
                    encrypting: false, key: valueKey, context: context,
                    input: UnsafeRawBufferPointer(rebasing: sealed[headerSize..<(headerSize + length)]),
                    output: out.baseAddress, tag: tag.baseAddress!)
            }
            initialized = length
        }
        if !ok { _ = CryptoErrors.drain() }
        return ok ? plain : nil
    }

    /// One AES-256-GCM pass with an all-zero nonce (each value has its own key).
    private static func crypt(
        encrypting: Bool, key: [UInt8], context: [UInt8], input: UnsafeRawBufferPointer,
        output: UnsafeMutablePointer<UInt8>?, tag: UnsafeMutablePointer<UInt8>
    ) -> Bool {
        guard let ctx = EVP_CIPHER_CTX_new() else { return false }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let nonce = [UInt8](repeating: 0, count: 12)
        var written: Int32 = 0
        guard EVP_CipherInit_ex2(ctx, cipher.cipher, key, nonce, encrypting ? 1 : 0, nil) == 1 else { return false }
        if !context.isEmpty {
            guard EVP_CipherUpdate(ctx, nil, &written, context, Int32(context.count)) == 1 else { return false }
        }
        if input.count > 0, let output {
            guard
                EVP_CipherUpdate(
                    ctx, output, &written, input.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(input.count))
                    == 1
            else { return false }
        }
        if !encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagSize), tag) == 1 else { return false }
        }
        var final: Int32 = 0
        var scratch = [UInt8](repeating: 0, count: 16)
        guard EVP_CipherFinal_ex(ctx, &scratch, &final) == 1 else { return false }
        if encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagSize), tag) == 1 else { return false }
        }
        return true
    }
}
