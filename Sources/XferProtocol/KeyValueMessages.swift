import XferCore

// The JSON bodies of the key-value routes (docs/PROTOCOL.md, "Key-value store").

/// A key-value entry (or, with no value, the deletion of one).
public struct KeyValueEntry: Codable, Sendable, Hashable {
    /// The key: 1–64 bytes of UTF-8.
    public var key: String
    /// The value; `nil` for a deleted key.
    public var value: JSONValue?
    /// The writer's clock when it wrote, nanoseconds since 1970 (last writer wins).
    public var timestampNs: Int64
    /// The writing device (breaks timestamp ties).
    public var device: String
    /// Change-feed sequence number of the write.
    public var sequence: Int64

    /// Creates an entry.
    public init(key: String, value: JSONValue?, timestampNs: Int64, device: String, sequence: Int64) {
        self.key = key
        self.value = value
        self.timestampNs = timestampNs
        self.device = device
        self.sequence = sequence
    }

    /// Whether a write stamped (`timestampNs`, `device`) beats this entry: the later timestamp
    /// wins; equal timestamps go to the greater device name; an identical stamp changes nothing.
    public func isOlder(thanTimestamp timestampNs: Int64, device: String) -> Bool {
        (self.timestampNs, self.device) < (timestampNs, device)
    }
}

/// `PUT /v1/containers/{container}/kv`: set (or, with no value, delete) a key.
public struct KeyValueWrite: Codable, Sendable, Hashable {
    /// The key.
    public var key: String
    /// The value; `nil` deletes the key.
    public var value: JSONValue?
    /// The writer's clock, nanoseconds since 1970.
    public var timestampNs: Int64
    /// The writing device.
    public var device: String

    /// Creates a write.
    public init(key: String, value: JSONValue?, timestampNs: Int64, device: String) {
        self.key = key
        self.value = value
        self.timestampNs = timestampNs
        self.device = device
    }
}

/// The answer to a key-value write.
public struct KeyValueWriteResult: Codable, Sendable, Hashable {
    /// Whether this write won (false: a later write was already stored; `entry` is that one).
    public var applied: Bool
    /// The key's entry after the write.
    public var entry: KeyValueEntry

    /// Creates a result.
    public init(applied: Bool, entry: KeyValueEntry) {
        self.applied = applied
        self.entry = entry
    }
}

/// `GET /v1/containers/{container}/kv`: every live key.
public struct KeyValueList: Codable, Sendable, Hashable {
    /// Live entries in key order.
    public var entries: [KeyValueEntry]
    /// Bytes in use (keys plus JSON values) and the limit.
    public var bytes: Int
    /// The byte limit.
    public var maximumBytes: Int
    /// The key-count limit.
    public var maximumKeys: Int
    /// Set by a client of an end-to-end encrypted container: the keys it left out of
    /// ``entries``, each with why (a value that does not open under the key, or one older than
    /// this device has seen). Never sent by a server.
    public var withheld: [String]?

    /// Creates a list.
    public init(entries: [KeyValueEntry], bytes: Int, maximumBytes: Int, maximumKeys: Int) {
        self.entries = entries
        self.bytes = bytes
        self.maximumBytes = maximumBytes
        self.maximumKeys = maximumKeys
    }
}

/// Key-value entries of an end-to-end encrypted container as the server keeps them
/// (docs/FORMAT.md, "End-to-end documents"): the key a keyed hash (64 lowercase hex digits),
/// the value a JSON string, `xfe1:` and the base64 of a sealed value holding the plain key and
/// value. The server takes no other write into such a container.
public enum SealedValues {
    /// What a sealed value's string starts with.
    public static let prefix = "xfe1:"

    /// Whether a write has the form of a sealed one: a hashed key, and a sealed value or none
    /// (a deletion).
    public static func isSealed(key: String, value: JSONValue?) -> Bool {
        guard key.utf8.count == 64, key.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return false }
        guard let value else { return true }
        return unwrap(value) != nil
    }

    /// A sealed value as the server keeps it.
    public static func wrap(_ sealed: [UInt8]) -> JSONValue { .string(prefix + Base64.encode(sealed)) }

    /// The sealed bytes of a value kept so; `nil` if it is not one.
    public static func unwrap(_ value: JSONValue) -> [UInt8]? {
        guard case .string(let text) = value, text.hasPrefix(prefix),
            let bytes = try? Base64.decode(String(text.dropFirst(prefix.count))), bytes.count >= Sealing.overhead
        else { return nil }
        return bytes
    }
}
