/// SHA-256 and HMAC-SHA-256 of whole messages, through libcrypto (the same calls chunk ids and
/// container keys use), for the few places that need a digest that is not a chunk id.
package enum Digest {
    /// The SHA-256 of `bytes`.
    package static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { ChunkID.of($0).withUnsafeBytes { Array($0) } }
    }

    /// HMAC-SHA-256 of `message` under `key`.
    package static func hmacSHA256(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Sealing.hmac(key: key, message)
    }
}
