import CXferShims

/// SHA-256 of many messages at once: on a processor with the x86 SHA extensions, two messages
/// are hashed in one interleaved loop (`cxfer_sha256_lanes`), which keeps the core's SHA unit
/// busier than one message's chain of rounds can; elsewhere, one after another by
/// ``SHA256Hasher``. The digests are SHA-256's either way (`SHA256LanesTests`).
public enum SHA256Lanes {
    /// Whether the interleaved loop runs here.
    public static let interleaved = cxfer_sha256_lanes_available() == 1

    /// The SHA-256 digests of the arrays `messages`, in order.
    public static func ids(of messages: [[UInt8]]) -> [ChunkID] {
        RawBuffers.with(messages) { ids(of: $0) }
    }

    /// The SHA-256 digests of `messages`, in order.
    /// - Parameter messages: The bytes of each message.
    /// - Returns: One id a message.
    public static func ids(of messages: [UnsafeRawBufferPointer]) -> [ChunkID] {
        guard interleaved, messages.count > 1 else {
            var hasher = SHA256Hasher()
            return messages.map { bytes in
                hasher.update(bytes)
                return hasher.finalize()
            }
        }
        let lengths = messages.map(\.count)
        let empty: UInt8 = 0
        // An empty message may have no address; any readable one does for its zero bytes.
        let digests = withUnsafePointer(to: empty) { anywhere in
            let starts: [UnsafePointer<UInt8>?] = messages.map {
                $0.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? anywhere
            }
            return [UInt8](unsafeUninitializedCapacity: 32 * messages.count) { out, initialized in
                cxfer_sha256_lanes(starts, lengths, messages.count, out.baseAddress)
                initialized = 32 * messages.count
            }
        }
        return digests.withUnsafeBytes { raw in
            (0..<messages.count).map { ChunkID(bytes: raw[(32 * $0)..<(32 * $0 + 32)])! }
        }
    }
}
