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
    /// The links of the container's rotations, newest first, base64 (``ContainerKeyRing``):
    /// each the key before sealed under the key after; empty until a member is removed.
    public var links: [String]?
    /// For a member: the current key sealed to its account's public key by the owner, base64;
    /// `nil` until the owner has (`xfer container share` again once the member has a key pair).
    public var memberWrapped: String?

    /// Creates an answer.
    public init(
        encrypted: Bool, wrapped: String?, keyID: String?, links: [String]? = nil, memberWrapped: String? = nil
    ) {
        self.encrypted = encrypted
        self.wrapped = wrapped
        self.keyID = keyID
        self.links = links
        self.memberWrapped = memberWrapped
    }

    enum CodingKeys: String, CodingKey {
        case encrypted, wrapped, links, memberWrapped
        case keyID = "keyId"  // key_id on the wire
    }

    /// The links' bytes, newest first.
    /// - Throws: `internal` if one is not base64 of a link.
    public func linkBytes() throws -> [[UInt8]] {
        try (links ?? []).map { text in
            guard let data = Data(base64Encoded: text), data.count == ContainerKeyWrite.linkSize else {
                throw XferError(.internal, "the server sent a key link that is not one")
            }
            return Array(data)
        }
    }

    /// The member's wrapped key's bytes.
    /// - Throws: `internal` if the server sent something that is not one.
    public func memberWrappedBytes() throws -> [UInt8]? {
        guard let memberWrapped else { return nil }
        do {
            return try MemberKeyWrite.bytes(memberWrapped, "member_wrapped")
        } catch {
            throw XferError(.internal, "the server sent a member's wrapped key that is not one")
        }
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
    /// A rotation (a member removed): the link that seals the container's current key under
    /// the new one `wrapped` holds, base64 (``ContainerKeyRing``). With a link, `keyID` is the
    /// new key's and `previous` must be given.
    public var link: String?
    /// In a rotation, the new key sealed to each remaining member's public key, by account name.
    public var memberKeys: [String: String]?

    /// Creates a write.
    public init(
        wrapped: [UInt8], previous: [UInt8]?, keyID: String, link: [UInt8]? = nil, memberKeys: [String: [UInt8]] = [:]
    ) {
        self.wrapped = Data(wrapped).base64EncodedString()
        self.previous = previous.map { Data($0).base64EncodedString() }
        self.keyID = keyID
        self.link = link.map { Data($0).base64EncodedString() }
        self.memberKeys = memberKeys.isEmpty ? nil : memberKeys.mapValues { Data($0).base64EncodedString() }
    }

    enum CodingKeys: String, CodingKey {
        case wrapped, previous, link, memberKeys
        case keyID = "keyId"  // key_id on the wire
    }

    /// Bytes in a link: a sealed 32-byte key.
    public static let linkSize = Sealing.overhead + ContainerKey.byteCount

    /// Wrapped keys and, in a rotation, one sealed key for each member (at most
    /// ``MemberList/maximumMembers``).
    public static var maximumBodyBytes: Int { 1024 + Int(MemberList.maximumMembers) * 320 }

    public func validate() throws {
        _ = try wrappedBytes()
        _ = try previousBytes()
        try Self.checkKeyID(keyID)
        _ = try linkBytes()
        guard (memberKeys?.count ?? 0) <= MemberList.maximumMembers else {
            throw XferError(.badRequest, "member_keys has at most \(MemberList.maximumMembers) entries")
        }
        _ = try memberKeyBytes()
        if link != nil, previous == nil {
            throw XferError(.badRequest, "a rotation (link) replaces a key: give previous")
        }
    }

    static func checkKeyID(_ keyID: String) throws {
        guard keyID.utf8.count == 16, keyID.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else {
            throw XferError(.badRequest, "key_id must be 16 lowercase hex digits")
        }
    }

    /// The link's bytes, if given.
    /// - Throws: `bad_request` if it is not base64 of a link.
    public func linkBytes() throws -> [UInt8]? {
        try link.map { text in
            guard let data = Data(base64Encoded: text), data.count == Self.linkSize, Sealing.isSealed(data) else {
                throw XferError(.badRequest, "link must be base64 of a \(Self.linkSize)-byte sealed key")
            }
            return Array(data)
        }
    }

    /// The members' sealed keys by account.
    /// - Throws: `bad_request` for an account name or a sealed key that is not one.
    public func memberKeyBytes() throws -> [AccountName: [UInt8]] {
        var out: [AccountName: [UInt8]] = [:]
        for (account, text) in memberKeys ?? [:] {
            out[try AccountName(account)] = try MemberKeyWrite.bytes(text, "member_keys.\(account.prefix(64))")
        }
        return out
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
