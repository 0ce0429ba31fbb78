import CCrypto
import Foundation

/// Document names of an end-to-end encrypted container, sealed one path component at a time so
/// the server still keys versions, conflicts and the change feed by path (docs/SECURITY.md,
/// "End-to-end encryption").
///
/// A component is padded to a multiple of 16 bytes (``Padding/block(_:multiple:)``), sealed with
/// AES-256-SIV (RFC 5297) under the container's `name` key with its parent's plain path as
/// associated data, and written as the 16-byte synthetic IV and the ciphertext in lowercase
/// base32 without padding (RFC 4648). SIV is deterministic: the same name in the same folder
/// always seals the same, so every device finds the same document; the same name in another
/// folder seals differently, and a sealed name moved to another folder does not open.
public struct NameSealing: Sendable, Hashable {
    /// Bytes in the key (AES-256-SIV takes two AES-256 keys).
    public static let keySize = 64
    /// The longest plain component, in UTF-8 bytes: its sealed form must fit the 255 bytes a
    /// component may have.
    public static let maximumComponentBytes = 127

    let key: [UInt8]

    init(key: [UInt8]) {
        precondition(key.count == Self.keySize)
        self.key = key
    }

    /// `component` of a document under `parent` (the plain path of its folder, `""` at the top)
    /// as the server sees it.
    /// - Throws: `invalid_path` if the component is longer than ``maximumComponentBytes``.
    public func seal(_ component: String, parent: String) throws -> String {
        let plain = Array(component.utf8)
        guard plain.count <= Self.maximumComponentBytes else {
            throw XferError(
                .invalidPath,
                """
                the name \(component.prefix(40))… is \(plain.count) bytes; in an encrypted container a name has at most \
                \(Self.maximumComponentBytes) bytes (its sealed form must fit in 255)
                """)
        }
        let sealed = try Self.siv(
            encrypting: true, key: key, associated: Self.associated(parent),
            input: Padding.block(plain, multiple: 16), tag: nil)
        return Base32.encode(sealed.tag + sealed.output)
    }

    /// The plain component a sealed one under `parent` stands for.
    /// - Throws: `corrupt_chunk` if it is not a sealed name, fails its tag (damaged, from
    ///   another folder or another container), or its padding is wrong.
    public func open(_ sealed: String, parent: String) throws -> String {
        // Only the one encoding of the bytes: two server-side names never open to one name.
        guard let bytes = Base32.decode(sealed), bytes.count >= 32, (bytes.count - 16) % 16 == 0,
            Base32.encode(bytes) == sealed
        else {
            throw XferError(.corruptChunk, "\(sealed.prefix(40)) is not a sealed name")
        }
        guard
            let opened = try? Self.siv(
                encrypting: false, key: key, associated: Self.associated(parent),
                input: Array(bytes[16...]), tag: Array(bytes.prefix(16))),
            let plain = Padding.unblock(opened.output), let name = String(validating: plain, as: UTF8.self)
        else {
            throw XferError(
                .corruptChunk,
                "the sealed name \(sealed.prefix(40)) fails its authentication tag: it is damaged or not from this folder"
            )
        }
        return name
    }

    /// A whole path (`/`-separated, plain), each component sealed under its plain parent.
    /// - Throws: `invalid_path` for a component over ``maximumComponentBytes``.
    public func seal(path: String) throws -> String {
        var parent = ""
        var sealed: [String] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: false) {
            sealed.append(try seal(String(component), parent: parent))
            parent = parent.isEmpty ? String(component) : parent + "/" + component
        }
        return sealed.joined(separator: "/")
    }

    /// The plain path a sealed one stands for, each component opened under its plain parent.
    /// - Throws: `corrupt_chunk` if a component is not a sealed name of this container there.
    public func open(path: String) throws -> String {
        var parent = ""
        for component in path.split(separator: "/", omittingEmptySubsequences: false) {
            let plain = try open(String(component), parent: parent)
            parent = parent.isEmpty ? plain : parent + "/" + plain
        }
        return parent
    }

    /// Whether every component of `path` has the form of a sealed name (its one base32
    /// encoding of 16 bytes of synthetic IV and a whole number of 16-byte blocks): what a server
    /// without the key checks before it takes a document into an end-to-end encrypted
    /// container, so that a client unaware of the encryption never writes a plain name there.
    public static func isSealed(path: some StringProtocol) -> Bool {
        !path.isEmpty
            && path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy { component in
                guard let bytes = Base32.decode(String(component)), bytes.count >= 32, (bytes.count - 16) % 16 == 0
                else { return false }
                return Base32.encode(bytes) == component
            }
    }

    static func associated(_ parent: String) -> [UInt8] { Array("xfer name v1 \(parent)".utf8) }

    private static let cipher: FetchedCipher = {
        guard let cipher = EVP_CIPHER_fetch(nil, "AES-256-SIV", nil) else {
            fatalError("libcrypto has no AES-256-SIV: \(CryptoErrors.drain())")
        }
        return FetchedCipher(cipher: cipher)
    }()

    /// One AES-SIV pass: the ciphertext (or plain text) and the synthetic IV.
    private static func siv(encrypting: Bool, key: [UInt8], associated: [UInt8], input: [UInt8], tag: [UInt8]?) throws
        -> (output: [UInt8], tag: [UInt8])
    {
        guard let context = EVP_CIPHER_CTX_new() else { throw XferError(.crypto, "out of memory") }
        defer { EVP_CIPHER_CTX_free(context) }
        var written: Int32 = 0
        var output = [UInt8](repeating: 0, count: input.count)
        var siv = tag ?? [UInt8](repeating: 0, count: 16)
        var ok = EVP_CipherInit_ex2(context, cipher.cipher, key, nil, encrypting ? 1 : 0, nil) == 1
        if ok, !encrypting { ok = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, 16, &siv) == 1 }
        ok = ok && EVP_CipherUpdate(context, nil, &written, associated, Int32(associated.count)) == 1
        ok = ok && EVP_CipherUpdate(context, &output, &written, input, Int32(input.count)) == 1
        var scratch = [UInt8](repeating: 0, count: 16)
        ok = ok && EVP_CipherFinal_ex(context, &scratch, &written) == 1
        if ok, encrypting { ok = EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, &siv) == 1 }
        guard ok else { throw XferError(.crypto, "AES-256-SIV failed: \(CryptoErrors.drain())") }
        return (output, siv)
    }
}

/// Padding that hides a value's exact length.
public enum Padding {
    /// ISO/IEC 7816-4 padding to a multiple of `multiple`: `0x80`, then zero bytes.
    public static func block(_ bytes: [UInt8], multiple: Int) -> [UInt8] {
        let padded = (bytes.count / multiple + 1) * multiple
        return bytes + [0x80] + [UInt8](repeating: 0, count: padded - bytes.count - 1)
    }

    /// The bytes before ISO/IEC 7816-4 padding; `nil` if there is none.
    public static func unblock(_ padded: [UInt8]) -> [UInt8]? {
        guard let end = padded.lastIndex(where: { $0 != 0 }), padded[end] == 0x80 else { return nil }
        return Array(padded[..<end])
    }

    /// Padmé (Nikitin et al., "Reducing Metadata Leakage from Encrypted Files and
    /// Communication with PURBs", 2019): the length a value of `length` bytes is padded to.
    /// At most 12 % more, and a length of `E` bits leaks only `O(log E)` bits.
    public static func padme(_ length: Int) -> Int {
        guard length > 2 else { return length }
        let e = Int.bitWidth - 1 - length.leadingZeroBitCount  // floor(log2 length)
        let s = Int.bitWidth - e.leadingZeroBitCount  // floor(log2 e) + 1
        let lastBits = e - s
        let mask = (1 << lastBits) - 1
        return (length + mask) & ~mask
    }

    /// `bytes` padded with ISO/IEC 7816-4 to the Padmé length of one byte more.
    public static func padme(_ bytes: [UInt8]) -> [UInt8] {
        let target = padme(bytes.count + 1)
        return bytes + [0x80] + [UInt8](repeating: 0, count: target - bytes.count - 1)
    }
}

/// RFC 4648 base32, lowercase, without padding: safe in a path on any file system.
enum Base32 {
    static let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        String(decoding: RecoveryText.fiveBits(bytes).map { alphabet[Int($0)] }, as: UTF8.self)
    }

    static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for c in text.utf8 {
            guard let index = alphabet.firstIndex(of: c) else { return nil }
            values.append(UInt8(index))
        }
        return RecoveryText.bytes(fromFiveBits: values, count: values.count * 5 / 8)
    }
}
