import Foundation
import Testing
import XferClient
import XferCore
import XferProtocol

/// The keys of end-to-end encrypted containers across devices (``EncryptedContainers``): made
/// on one, unlocked with the passphrase on another, the passphrase changed without the key
/// changing, recovered with the recovery key, and no plain data ever accepted in the container.
@Suite struct EncryptedContainerKeyTests {
    static let fast = try! ScryptParameters(logN: 10, r: 8, p: 1)

    static func device(_ server: LiveServer, _ name: String, container: String = "vault") throws -> EncryptedContainers
    {
        EncryptedContainers(
            remote: Remote(
                connection: server.remote.connection, container: try ContainerName(container),
                stateDirectory: server.root + "/state-" + name))
    }

    @Test func aSecondDeviceJoinsWithThePassphraseAloneAndAChangeKeepsTheKey() async throws {
        try await LiveServer.run { server in
            let a = try Self.device(server, "a")
            let b = try Self.device(server, "b")
            let c = try Self.device(server, "c")
            let key = try await a.create(passphrase: "correct horse", parameters: Self.fast)
            let status = try await a.status()
            #expect(status.encrypted && status.unlocked && status.keyID == key.id)
            let file = try #require(status.keyFile)
            var mode = stat()
            #expect(stat(file, &mode) == 0 && mode.st_mode & 0o777 == 0o600)
            #expect(
                try String(contentsOfFile: file, encoding: .utf8).contains(key.recoveryText),
                "kept as its recovery text")

            // B is locked until it gives the passphrase; a wrong one is refused and keeps nothing.
            #expect(try await b.status().unlocked == false)
            let wrong = await #expect(throws: XferError.self) { _ = try await b.unlock(passphrase: "correct horse!") }
            #expect(wrong?.code == .unauthorized)
            #expect(try await b.status().keyFile == nil)
            #expect(try await b.unlock(passphrase: "correct horse") == key)

            // B changes the passphrase with the key it holds: the old one no longer unlocks C.
            try await b.changePassphrase(to: "battery staple", parameters: Self.fast)
            await #expect(throws: XferError.self) { _ = try await c.unlock(passphrase: "correct horse") }
            #expect(try await c.unlock(passphrase: "battery staple") == key)
            // A still holds the key (nothing was encrypted again).
            #expect(try a.heldKey() == key)
            #expect(try await a.status().unlocked)

            // The old passphrase no longer changes it; a write over a wrapped key that is no longer
            // the server's (a device whose view went stale) is refused, and changes nothing.
            let old = await #expect(throws: XferError.self) {
                try await Self.device(server, "d").changePassphrase(
                    to: "x", currentPassphrase: "correct horse", parameters: Self.fast)
            }
            #expect(old?.code == .unauthorized)
            let vault = try ContainerName("vault")
            let current = try #require(try await server.remote.connection.containerKey(container: vault).wrappedBytes())
            let staleView = try ContainerKeyWrap.wrap(
                key, passphrase: "correct horse", container: "vault", parameters: Self.fast)
            let stale = await #expect(throws: XferError.self) {
                _ = try await server.remote.connection.setContainerKey(
                    container: vault,
                    ContainerKeyWrite(
                        wrapped: try ContainerKeyWrap.wrap(
                            key, passphrase: "mine", container: "vault", parameters: Self.fast),
                        previous: staleView, keyID: key.id))
            }
            #expect(stale?.code == .conflict)
            #expect(try await server.remote.connection.containerKey(container: vault).wrappedBytes() == current)
            #expect(try c.forget())
            #expect(try await c.status().unlocked == false)

            // The recovery key restores it with a new passphrase; another container's is refused.
            let other = try Self.device(server, "a", container: "other")
            let otherKey = try await other.create(passphrase: "p", parameters: Self.fast)
            let refused = await #expect(throws: XferError.self) {
                _ = try await c.recover(
                    recoveryText: otherKey.recoveryText, newPassphrase: "new", parameters: Self.fast)
            }
            #expect(refused?.code == .invalidConfiguration)
            #expect(
                try await c.recover(
                    recoveryText: key.recoveryText.lowercased(), newPassphrase: "forgotten no more",
                    parameters: Self.fast) == key)
            #expect(try await Self.device(server, "e").unlock(passphrase: "forgotten no more") == key)
        }
    }

    @Test(LiveServer.plainOnly("makes the default container encrypted itself"))
    func aPlainClientStoresNothingInAnEncryptedContainer() async throws {
        let requests = FollowFeedTests.Requests()
        try await LiveServer.run(intercept: requests.count) { server in
            _ = try await Self.device(server, "a").create(passphrase: "pw", parameters: Self.fast)
            let vault = Remote(
                connection: server.remote.connection, container: try ContainerName("vault"),
                stateDirectory: server.root + "/state-a")
            try Files.write(server.root + "/secret.txt", Array("plain text that must not be stored".utf8))
            let used = try await server.remote.connection.account().used
            let push = await #expect(throws: XferError.self) {
                _ = try await PushEngine(remote: vault).push(
                    server.root + "/secret.txt", as: try DocumentPath("secret.txt"))
            }
            #expect(push?.code == .encryptedContainer, "\(String(describing: push))")
            // Through the front door from a device without the key, which looks at the file while
            // the server answers: refused for the key it lacks, and nothing announced.
            let head = try await server.remote.connection.head(container: vault.container)
            let keyless = Remote(
                connection: server.remote.connection, container: vault.container,
                stateDirectory: server.root + "/state-b")
            let front = await #expect(throws: XferError.self) {
                _ = try await DocumentClient(remote: keyless, device: "b").push(
                    server.root + "/secret.txt", as: "secret.txt")
            }
            #expect(
                front?.code == .unauthorized && front?.message.contains("xfer key unlock") == true,
                "\(String(describing: front))")
            #expect(try await server.remote.connection.head(container: vault.container) == head)
            // A pull from it too, before it asks for the document or makes its destination's directory.
            _ = requests.take()
            let pull = await #expect(throws: XferError.self) {
                _ = try await DocumentClient(remote: keyless, device: "b").pull(
                    "secret.txt", into: server.root + "/pulled/secret.txt")
            }
            #expect(
                pull?.code == .unauthorized && pull?.message.contains("xfer key unlock") == true,
                "\(String(describing: pull))")
            #expect(
                !FileManager.default.fileExists(atPath: server.root + "/pulled"),
                "the destination's directory was not made")
            #expect(requests.take() == ["key": 1], "the pull asked for nothing but the container's key")
            // A batch push (what a sync pass does) asks before it uploads a byte.
            let state = try ClientState(root: server.root, stateDirectory: server.root + "/state-a")
            let batch = await #expect(throws: XferError.self) {
                _ = try await PushEngine(remote: vault).pushMany([
                    PushItem(path: server.root + "/secret.txt", name: try DocumentPath("secret.txt"), state: state)
                ])
            }
            #expect(batch?.code == .encryptedContainer)
            #expect(
                try await server.remote.connection.account().used == used, "no chunk of either push reached the server")
            // A plain key-value write (what a client unaware of the encryption sends) too.
            let value = await #expect(throws: XferError.self) {
                _ = try await vault.connection.setValue(
                    container: vault.container,
                    KeyValueWrite(key: "k", value: .string("plain"), timestampNs: 1, device: "a"))
            }
            #expect(value?.code == .encryptedContainer)
            #expect(
                try await server.remote.connection.list(container: try ContainerName("vault"), prefix: "").documents
                    .isEmpty)
            // A container that already holds data cannot be made encrypted.
            _ = try await server.push(server.root + "/secret.txt", "secret.txt")
            let held = await #expect(throws: XferError.self) {
                _ = try await EncryptedContainers(remote: server.remote).create(passphrase: "pw", parameters: Self.fast)
            }
            #expect(held?.code == .encryptedContainer)
        }
    }
}
