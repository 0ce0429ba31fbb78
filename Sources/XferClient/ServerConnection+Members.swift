import Foundation
import XferCore
import XferProtocol

/// Containers shared with other accounts (docs/SHARING.md): which this account reaches, and
/// who a container is shared with.
extension ServerConnection {
    /// The account's own containers, then those shared with it (named `OWNER/NAME`).
    public func containers() async throws -> [ContainerEntry] {
        try await json(ContainerList.self, "GET", "/v1/containers").containers
    }

    /// The accounts `container` is shared with.
    public func members(container: ContainerName) async throws -> [MemberInfo] {
        try await json(MemberList.self, "GET", "/v1/containers/\(container.pathSegment)/members").members
    }

    /// Shares `container` with `account` as `role`, or changes its role (its owner only).
    public func setMember(container: ContainerName, account: AccountName, role: ContainerRole) async throws
        -> MemberInfo
    {
        try await json(
            MemberInfo.self, "PUT", "/v1/containers/\(container.pathSegment)/members/\(account.value)",
            body: WireJSON.encode(MemberWrite(role: role)))
    }

    /// Ends `account`'s access to `container`: its owner removes anyone, a member itself.
    /// - Throws: `not_found` if the container is not shared with it.
    public func removeMember(container: ContainerName, account: AccountName) async throws {
        _ = try await send("DELETE", "/v1/containers/\(container.pathSegment)/members/\(account.value)")
    }

    /// This account's public key, if it has one.
    public func ownAccountKey() async throws -> AccountKeyInfo {
        try await json(AccountKeyInfo.self, "GET", "/v1/account/key")
    }

    /// `account`'s public key, if it has one.
    /// - Throws: `not_found` for no such account.
    public func accountKey(_ account: AccountName) async throws -> AccountKeyInfo {
        try await json(AccountKeyInfo.self, "GET", "/v1/accounts/\(account.value)/key")
    }

    /// Keeps this account's public key on the server.
    /// - Throws: `conflict` if it has another and `replace` is false.
    public func setAccountKey(_ key: AccountPublicKey, replace: Bool) async throws -> AccountKeyInfo {
        try await json(
            AccountKeyInfo.self, "PUT", "/v1/account/key",
            body: WireJSON.encode(AccountKeyWrite(publicKey: key, replace: replace)))
    }

    /// Keeps `container`'s key wrapped to member `account` (its owner only).
    public func setMemberKey(container: ContainerName, account: AccountName, _ write: MemberKeyWrite) async throws
        -> [MemberInfo]
    {
        try await json(
            MemberList.self, "PUT", "/v1/containers/\(container.pathSegment)/members/\(account.value)/key",
            body: WireJSON.encode(write)
        ).members
    }
}
