import Foundation
import XferCore

// The JSON bodies of sharing an end-to-end encrypted container (docs/PROTOCOL.md, "Sharing
// encrypted containers"): an account's public key, and the container key wrapped to a member's.

/// `PUT /v1/account/key`: the account's public key (``AccountPublicKey``), base64.
public struct AccountKeyWrite: Codable, Sendable, Hashable, WireRequest {
    /// The public key.
    public var publicKey: AccountPublicKey
    /// Whether to replace a different key kept already: keys wrapped to the old one stop
    /// opening on this account's devices, so it is refused (`conflict`) unless asked.
    public var replace: Bool?

    /// Creates a write.
    public init(publicKey: AccountPublicKey, replace: Bool = false) {
        self.publicKey = publicKey
        self.replace = replace
    }
}

/// `GET /v1/account/key` and `GET /v1/accounts/{account}/key`: an account's public key, if it
/// has one, and its fingerprint.
public struct AccountKeyInfo: Codable, Sendable, Hashable {
    /// The account.
    public var account: String
    /// Its public key; `nil` until one of its devices makes its key pair (`xfer account key`).
    public var publicKey: AccountPublicKey?
    /// The key's fingerprint (``AccountPublicKey/fingerprint``): a client computes it again
    /// from `publicKey` and never takes the server's word for it.
    public var fingerprint: String?

    /// Creates an answer.
    public init(account: String, publicKey: AccountPublicKey?) {
        self.account = account
        self.publicKey = publicKey
        fingerprint = publicKey?.fingerprint
    }
}

/// `PUT /v1/containers/{container}/members/{account}/key`: the container's current key sealed
/// to the member's public key (``AccountPublicKey/seal(_:context:)``), by its owner.
public struct MemberKeyWrite: Codable, Sendable, Hashable, WireRequest {
    /// The sealed key, base64.
    public var wrapped: String
    /// The id of the key sealed: it must be the container's current key.
    public var keyID: String

    /// Creates a write.
    public init(wrapped: [UInt8], keyID: String) {
        self.wrapped = Data(wrapped).base64EncodedString()
        self.keyID = keyID
    }

    enum CodingKeys: String, CodingKey {
        case wrapped
        case keyID = "keyId"  // key_id on the wire
    }

    /// Bytes in a member's wrapped key: a sealed box of a 32-byte key.
    public static let wrappedSize = AccountKey.boxOverhead + ContainerKey.byteCount

    public func validate() throws {
        _ = try wrappedBytes()
        try ContainerKeyWrite.checkKeyID(keyID)
    }

    /// The sealed key's bytes.
    /// - Throws: `bad_request` if it is not base64 of a sealed box of a key.
    public func wrappedBytes() throws -> [UInt8] { try Self.bytes(wrapped, "wrapped") }

    static func bytes(_ text: String, _ field: String) throws -> [UInt8] {
        guard let data = Data(base64Encoded: text), data.count == wrappedSize, data.prefix(4).elementsEqual("XFA1".utf8)
        else {
            throw XferError(
                .badRequest, "\(field) must be base64 of a \(wrappedSize)-byte key sealed to an account (XFA1)")
        }
        return Array(data)
    }
}
