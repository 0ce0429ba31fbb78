import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// Sharing an encrypted container over /v1: account public keys, a member's wrapped key, and
/// who may set either.
@Suite struct AccountKeyRoutesTests {
    @Test func anEncryptedContainerIsSharedWithAWrappedKeyItsOwnerAloneSets() async throws {
        let shared = try await MemberRoutesTests.Shared.make()
        defer { shared.fixture.remove() }
        let key = ContainerKey.generate()
        let bobKey = AccountKey.generate()
        try await shared.fixture.application.test(.router) { client in
            let made = try await shared.status(
                client, .put, "/v1/containers/v/key", token: shared.fixture.token,
                body: json(
                    ContainerKeyWrite(
                        wrapped: try ContainerKeyStoreTests.wrapped("one", key), previous: nil, keyID: key.id)))
            #expect(made == .ok)
            try await shared.share(client, "bob", role: .writer, container: "v")

            // Bob's public key: his to set, anyone's to read.
            #expect(
                try await shared.status(
                    client, .put, "/v1/account/key", body: json(AccountKeyWrite(publicKey: bobKey.publicKey))) == .ok)
            let read = try await client.execute(
                uri: "/v1/accounts/bob/key", method: .get, headers: shared.fixture.headers()
            ) { try decode(AccountKeyInfo.self, $0) }
            #expect(read.publicKey == bobKey.publicKey && read.fingerprint == bobKey.publicKey.fingerprint)
            #expect(try await shared.status(client, .get, "/v1/accounts/nobody/key") == .notFound)
            let other = AccountKey.generate().publicKey
            #expect(
                try await shared.status(client, .put, "/v1/account/key", body: json(AccountKeyWrite(publicKey: other)))
                    == .conflict)

            // The wrapped key: the owner's to set, of the right form, and bob alone is given it.
            let box = try AccountKey.generate().seal(key.bytes, context: "x", to: bobKey.publicKey)
            let uri = "/v1/containers/v/members/bob/key"
            #expect(
                try await shared.status(
                    client, .put, "/v1/containers/alice:v/members/bob/key",
                    body: json(MemberKeyWrite(wrapped: box, keyID: key.id))) == .forbidden)
            #expect(
                try await shared.status(
                    client, .put, uri, token: shared.fixture.token,
                    body: json(MemberKeyWrite(wrapped: Array(box.dropLast()), keyID: key.id))) == .badRequest)
            #expect(
                try await shared.status(
                    client, .put, uri, token: shared.fixture.token,
                    body: json(MemberKeyWrite(wrapped: box, keyID: key.id))) == .ok)
            let bobs = try await client.execute(
                uri: "/v1/containers/alice:v/key", method: .get, headers: shared.fixture.headers(shared.bob)
            ) { try decode(ContainerKeyInfo.self, $0) }
            #expect(try bobs.memberWrappedBytes() == box && bobs.keyID == key.id && bobs.links == [])
            let alices = try await client.execute(
                uri: "/v1/containers/v/key", method: .get, headers: shared.fixture.headers()
            ) { try decode(ContainerKeyInfo.self, $0) }
            #expect(alices.memberWrapped == nil)
        }
    }
}
