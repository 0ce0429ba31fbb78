import Foundation
import XferCore

// The JSON bodies of an end-to-end encrypted container's key route (docs/PROTOCOL.md,
// "Encrypted containers"). The server keeps the container key only wrapped by a passphrase
// (``ContainerKeyWrap``); it never sees the key or the passphrase.

/// `GET /v1/containers/{container}/key`: whether the container is end-to-end encrypted, and
/// its wrapped key if so.
public struct ContainerKeyInfo: Codable, Sendable, Hashable {
    /// Whether the container is end-to-end encrypted.
    public var encrypted: Bool
    /// The wrapped container key, base64 (``ContainerKeyWrap``); `nil` for a plain container.
    public var wrapped: String?
    /// The container key's public id (``ContainerKey/id``): a device checks a key it holds or
    /// recovers against it before it wraps that key anew.
    public var keyID: String?

    /// Creates an answer.
    public init(encrypted: Bool, wrapped: String?, keyID: String?) {
        self.encrypted = encrypted
        self.wrapped = wrapped
        self.keyID = keyID
    }

    enum CodingKeys: String, CodingKey {
        case encrypted, wrapped
        case keyID = "keyId"  // key_id on the wire
    }

    /// The wrapped key's bytes.
    /// - Throws: `internal` if the server sent something that is not a wrapped key.
    public func wrappedBytes() throws -> [UInt8]? {
        guard let wrapped else { return nil }
        do {
            return try ContainerKeyWrite.bytes(wrapped, "wrapped")
        } catch {
            throw XferError(.internal, "the server sent a wrapped container key that is not one")
        }
    }
}

/// `PUT /v1/containers/{container}/key`: makes a new container end-to-end encrypted with this
/// wrapped key (no `previous`), or replaces its wrapped key (a passphrase change) if the one
/// kept is still `previous`.
public struct ContainerKeyWrite: Codable, Sendable, Hashable, WireRequest {
    /// The wrapped container key, base64.
    public var wrapped: String
    /// The wrapped key this one replaces, base64 (compare-and-swap: a device whose view is
    /// stale does not undo another's passphrase change); `nil` to create.
    public var previous: String?
    /// The container key's id, 16 hex digits: recorded when the container is made encrypted,
    /// and the same in every later write (a passphrase change keeps the key).
    public var keyID: String

    /// Creates a write.
    public init(wrapped: [UInt8], previous: [UInt8]?, keyID: String) {
        self.wrapped = Data(wrapped).base64EncodedString()
        self.previous = previous.map { Data($0).base64EncodedString() }
        self.keyID = keyID
    }

    enum CodingKeys: String, CodingKey {
        case wrapped, previous
        case keyID = "keyId"  // key_id on the wire
    }

    /// A wrapped key is ``ContainerKeyWrap/size`` bytes.
    public static var maximumBodyBytes: Int { 1024 }

    public func validate() throws {
        _ = try wrappedBytes()
        _ = try previousBytes()
        guard keyID.utf8.count == 16, keyID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else {
            throw XferError(.badRequest, "key_id must be 16 lowercase hex digits")
        }
    }

    /// The wrapped key's bytes.
    /// - Throws: `bad_request` if it is not base64 of a wrapped key.
    public func wrappedBytes() throws -> [UInt8] { try Self.bytes(wrapped, "wrapped") }

    /// The replaced key's bytes, if given.
    /// - Throws: `bad_request` if it is not base64 of a wrapped key.
    public func previousBytes() throws -> [UInt8]? { try previous.map { try Self.bytes($0, "previous") } }

    static func bytes(_ text: String, _ field: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text), ContainerKeyWrap.hasWrappedForm(data) else {
            throw XferError(
                .badRequest, "\(field) must be base64 of a \(ContainerKeyWrap.size)-byte wrapped container key (XFW1)")
        }
        return Array(data)
    }
}
