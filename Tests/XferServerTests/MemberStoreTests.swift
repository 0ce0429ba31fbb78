import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Member rows on both backends: what ``ContainerTarget`` reads to let another account in.
@Suite struct MemberStoreTests {
    @Test(arguments: MetadataStoreTests.backends) func membersAreAddedChangedListedAndRemoved(_ kind: String)
        async throws
    {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            for name in ["bob", "carol"] {
                _ = try await store.createAccount(
                    name: try AccountName(name), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(name)-\(UUID())"))
            }
            let bob = try await MetadataStoreTests.accountID(store, "bob")
            let carol = try await MetadataStoreTests.accountID(store, "carol")
            let team = try ContainerName("team")
            let owner = try AccountName("alice")
            _ = try await store.setMember(owner: alice, container: team, member: try AccountName("bob"), role: .reader)
            _ = try await store.setMember(owner: alice, container: team, member: try AccountName("bob"), role: .writer)
            #expect(try await store.members(owner: alice, container: team).map(\.account) == ["bob"])
            #expect(try await store.members(owner: alice, container: team).first?.role == .writer)
            let granted = try await store.grant(member: bob, owner: owner, container: team)
            #expect(granted?.owner == alice && granted?.role == .writer)
            #expect(try await store.grant(member: carol, owner: owner, container: team) == nil)
            #expect(try await store.grant(member: bob, owner: owner, container: try ContainerName("other")) == nil)
            #expect(
                try await store.containerList(account: bob)
                    == [ContainerEntry(container: "alice/team", role: .writer, encrypted: false, members: 0)])
            #expect(
                try await store.containerList(account: alice)
                    == [ContainerEntry(container: "team", role: .owner, encrypted: false, members: 1)])
            await #expect(throws: XferError.self, "not with oneself") {
                _ = try await store.setMember(owner: alice, container: team, member: owner, role: .reader)
            }
            await #expect(throws: XferError.self, "not with no account") {
                _ = try await store.setMember(
                    owner: alice, container: team, member: try AccountName("nobody"), role: .reader)
            }
            #expect(try await store.removeMember(owner: alice, container: team, member: try AccountName("bob")))
            #expect(try await !store.removeMember(owner: alice, container: team, member: try AccountName("bob")))
            #expect(try await store.grant(member: bob, owner: owner, container: team) == nil)

            _ = try await store.setMember(
                owner: alice, container: team, member: try AccountName("carol"), role: .reader)
            _ = try await store.deleteAccount(try AccountName("carol"), dryRun: false)
            #expect(try await store.members(owner: alice, container: team).isEmpty, "its memberships end with it")
        }
    }

    @Test(arguments: MetadataStoreTests.backends) func anEncryptedContainerIsSharedByWrappedKeysAndRotated(
        _ kind: String
    ) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            for name in ["bob", "carol"] {
                _ = try await store.createAccount(
                    name: try AccountName(name), quota: 1 << 30, tokenHash: TokenHash.hash("t-\(name)-\(UUID())"))
            }
            let (bob, carol) = (try AccountName("bob"), try AccountName("carol"))
            let bobID = try await MetadataStoreTests.accountID(store, "bob")
            let sealed = try ContainerName("sealed")
            let key = ContainerKey.generate()
            let first = try ContainerKeyStoreTests.wrapped("one", key)
            try await store.setContainerKey(
                account: alice, container: sealed, wrapped: first, previous: nil, keyID: key.id)
            _ = try await store.setMember(owner: alice, container: sealed, member: bob, role: .writer)
            _ = try await store.setMember(owner: alice, container: sealed, member: carol, role: .reader)
            #expect(try await store.members(owner: alice, container: sealed).allSatisfy { $0.keyID == nil })

            // Public keys: kept, another refused unless replaced; gone with the account.
            try await store.setAccountKey(account: bobID, publicKey: Array(repeating: 1, count: 32), replace: false)
            try await store.setAccountKey(account: bobID, publicKey: Array(repeating: 1, count: 32), replace: false)
            await #expect(throws: XferError.self) {
                try await store.setAccountKey(account: bobID, publicKey: Array(repeating: 2, count: 32), replace: false)
            }
            #expect(try await store.accountKey(named: bob) == Array(repeating: 1, count: 32))
            #expect(try await store.accountKey(named: carol) == nil)

            // A member's wrapped key: only of the current key, only for a member.
            await #expect(throws: XferError.self, "of another key") {
                try await store.setMemberKey(
                    owner: alice, container: sealed, member: bob, wrapped: [1, 2, 3], keyID: "00000000000000ff")
            }
            try await store.setMemberKey(
                owner: alice, container: sealed, member: bob, wrapped: [1, 2, 3], keyID: key.id)
            try await store.setMemberKey(owner: alice, container: sealed, member: carol, wrapped: [4], keyID: key.id)
            #expect(try await store.memberKey(owner: alice, container: sealed, member: bobID)?.wrapped == [1, 2, 3])

            // A rotation: from the key kept only, wrapped again to the members named, carol's dropped.
            let next = ContainerKey.generate()
            let second = try ContainerKeyStoreTests.wrapped("two", next)
            await #expect(throws: XferError.self, "from a stale key") {
                try await store.rotateContainerKey(
                    account: alice, container: sealed, wrapped: second, previous: second, keyID: next.id, link: [9],
                    memberKeys: [:])
            }
            await #expect(throws: XferError.self, "to an account that is not a member") {
                try await store.rotateContainerKey(
                    account: alice, container: sealed, wrapped: second, previous: first, keyID: next.id, link: [9],
                    memberKeys: [try AccountName("alice"): [5]])
            }
            #expect(try await store.containerKeyLinks(account: alice, container: sealed).isEmpty, "nothing half done")
            try await store.rotateContainerKey(
                account: alice, container: sealed, wrapped: second, previous: first, keyID: next.id, link: [9],
                memberKeys: [bob: [7, 7]])
            #expect(try await store.containerKey(account: alice, container: sealed)?.keyID == next.id)
            #expect(try await store.containerKeyLinks(account: alice, container: sealed) == [[9]])
            let members = try await store.members(owner: alice, container: sealed)
            #expect(members.map(\.keyID) == [next.id, nil])
            #expect(try await store.memberKey(owner: alice, container: sealed, member: bobID)?.wrapped == [7, 7])

            _ = try await store.deleteAccount(bob, dryRun: false)
            await #expect(throws: XferError.self) { _ = try await store.accountKey(named: bob) }
            _ = try await store.deleteAccount(try AccountName("alice"), dryRun: false)
        }
    }
}
