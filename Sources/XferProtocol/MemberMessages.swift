import Foundation
import XferCore

/// What an account may do in a container (docs/SHARING.md): its owner does everything; a
/// member the owner added reads, or reads and writes.
public enum ContainerRole: String, Codable, Sendable, Hashable, CaseIterable {
    /// Everything, sharing included: the account the container belongs to.
    case owner
    /// Reads and writes documents, versions and the key-value store; shares nothing.
    case writer
    /// Reads everything and changes nothing.
    case reader

    /// Whether the role may change what the container holds.
    public var writes: Bool { self != .reader }
}

/// `PUT /v1/containers/{c}/members/{account}`: shares the container with an account, or changes
/// its role.
public struct MemberWrite: Codable, Sendable, Hashable, WireRequest {
    /// `reader` or `writer`.
    public var role: ContainerRole

    public init(role: ContainerRole) { self.role = role }

    public func validate() throws {
        guard role != .owner else {
            throw XferError(.badRequest, "a member's role is reader or writer; a container has one owner")
        }
    }
}

/// An account a container is shared with.
public struct MemberInfo: Codable, Sendable, Hashable {
    public var account: String
    public var role: ContainerRole
    /// When it was added or its role last changed (nanoseconds since 1970, the store's clock).
    public var addedAt: Int64
    /// In an end-to-end encrypted container: the id of the container key wrapped to the
    /// member, `nil` while it has none (it cannot open the container until the owner wraps it).
    public var keyID: String?

    public init(account: String, role: ContainerRole, addedAt: Int64, keyID: String? = nil) {
        self.account = account
        self.role = role
        self.addedAt = addedAt
        self.keyID = keyID
    }

    enum CodingKeys: String, CodingKey {
        case account, role, addedAt
        case keyID = "keyId"  // key_id on the wire
    }
}

/// `GET /v1/containers/{c}/members`.
public struct MemberList: Codable, Sendable, Hashable {
    /// Accounts one container may be shared with.
    public static let maximumMembers: Int64 = 256

    public var members: [MemberInfo]

    public init(members: [MemberInfo]) { self.members = members }
}

/// A container an account reaches: one of its own, or one shared with it (named `OWNER/NAME`).
public struct ContainerEntry: Codable, Sendable, Hashable {
    /// As this account names it: `NAME` for its own, `OWNER/NAME` for a shared one.
    public var container: String
    public var role: ContainerRole
    /// End-to-end encrypted.
    public var encrypted: Bool
    /// Accounts it is shared with (for the owner's own containers; 0 for a shared one).
    public var members: Int

    public init(container: String, role: ContainerRole, encrypted: Bool, members: Int) {
        self.container = container
        self.role = role
        self.encrypted = encrypted
        self.members = members
    }
}

/// `GET /v1/containers`: the account's containers, then those shared with it.
public struct ContainerList: Codable, Sendable, Hashable {
    public var containers: [ContainerEntry]

    public init(containers: [ContainerEntry]) { self.containers = containers }
}
