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

    @Test(arguments: MetadataStoreTests.backends) func anEncryptedContainerIsNotShared(_ kind: String) async throws {
        try await MetadataStoreTests.withStore(kind) { store, alice in
            _ = try await store.createAccount(
                name: try AccountName("bob"), quota: 1 << 30, tokenHash: TokenHash.hash("t-bob-\(UUID())"))
            let sealed = try ContainerName("sealed")
            let key = ContainerKey.generate()
            try await store.setContainerKey(
                account: alice, container: sealed, wrapped: try ContainerKeyStoreTests.wrapped("one", key),
                previous: nil,
                keyID: key.id)
            do {
                _ = try await store.setMember(
                    owner: alice, container: sealed, member: try AccountName("bob"), role: .reader)
                Issue.record("an encrypted container was shared")
            } catch let error as XferError {
                #expect(error.code == .encryptedContainer)
            }
            #expect(try await store.members(owner: alice, container: sealed).isEmpty)
        }
    }
}
