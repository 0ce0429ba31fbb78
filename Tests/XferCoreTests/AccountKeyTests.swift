import Foundation
import Testing

@testable import XferCore

/// Account key pairs and the authenticated box a shared container's key travels in, and the
/// key ring a rotation grows (docs/FORMAT.md, "End-to-end keys").
@Suite struct AccountKeyTests {
    static func bytes(_ hex: String) -> [UInt8] { Sealing.hexBytes(hex)! }

    @Test func x25519MatchesRFC7748() throws {
        // RFC 7748, section 6.1.
        let alice = try AccountKey(
            privateKey: Self.bytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try AccountKey(
            privateKey: Self.bytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey.bytes == Self.bytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(bob.publicKey.bytes == Self.bytes("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = Self.bytes("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try alice.agree(bob.publicKey) == shared)
        #expect(try bob.agree(alice.publicKey) == shared)
    }

    @Test func aBoxOpensForItsRecipientFromItsSenderOnly() throws {
        let owner = AccountKey.generate()
        let member = AccountKey.generate()
        let server = AccountKey.generate()
        let secret = Array(0..<32).map { UInt8($0) }
        let box = try owner.seal(secret, context: "team bob", to: member.publicKey)
        #expect(box.count == AccountKey.boxOverhead + 32)
        #expect(try member.open(box, context: "team bob", from: owner.publicKey) == secret)
        // Another recipient, another context, or a sender posing as the owner: refused.
        #expect(throws: XferError.self) { try server.open(box, context: "team bob", from: owner.publicKey) }
        #expect(throws: XferError.self) { try member.open(box, context: "team eve", from: owner.publicKey) }
        let forged = try server.seal(Array(repeating: 7, count: 32), context: "team bob", to: member.publicKey)
        #expect(throws: XferError.self) { try member.open(forged, context: "team bob", from: owner.publicKey) }
        var damaged = box
        damaged[40] ^= 1
        #expect(throws: XferError.self) { try member.open(damaged, context: "team bob", from: owner.publicKey) }
    }

    @Test func aKeyOfSmallOrderIsRefused() throws {
        let member = AccountKey.generate()
        let zero = try AccountPublicKey(bytes: Array(repeating: 0, count: 32))
        #expect(throws: XferError.self) { try member.agree(zero) }
        #expect(throws: XferError.self) { try member.seal([1], context: "", to: zero) }
    }

    @Test func thePrivateKeyTravelsAsTextAndTheFingerprintIsStable() throws {
        let key = AccountKey.generate()
        let again = try AccountKey(privateText: key.privateText)
        #expect(again.publicKey == key.publicKey)
        #expect(key.publicKey.fingerprint.count == 39)  // 8 groups of 4 and 7 dashes
        #expect(try key.publicKey.fingerprint == AccountPublicKey(bytes: key.publicKey.bytes).fingerprint)
        var typo = Array(key.privateText)
        typo[3] = typo[3] == "A" ? "B" : "A"
        #expect(throws: XferError.self) { try AccountKey(privateText: String(typo)) }
    }

    @Test func aRotatedRingWalksBackAndKeepsNamingWhileSealingAnew() throws {
        let first = ContainerKeyRing(single: ContainerKey.generate())
        let (second, link2) = first.rotated(container: "team")
        let (third, link3) = second.rotated(container: "team")
        #expect(third.generation == 3 && third.identity.id == first.current.id)
        let walked = try ContainerKeyRing.walking(from: third.current, links: [link3, link2], container: "team")
        #expect(walked.keys.map(\.id) == third.keys.map(\.id))
        // A link of another container, or out of order, does not open.
        #expect(throws: XferError.self) {
            try ContainerKeyRing.walking(from: third.current, links: [link3, link2], container: "other")
        }
        #expect(throws: XferError.self) {
            try ContainerKeyRing.walking(from: third.current, links: [link2, link3], container: "team")
        }

        // Names and chunk ids stay the first key's; what is sealed now, the first key cannot open.
        let old = EndToEndKeys(ring: first)
        let new = EndToEndKeys(ring: third)
        #expect(try old.sealedPath("Documents/plan.txt") == new.sealedPath("Documents/plan.txt"))
        let plain = Array("the plan after bob left".utf8)
        let sealedNew = try plain.withUnsafeBytes { try new.chunks.seal($0) }
        let sealedOld = try plain.withUnsafeBytes { try old.chunks.seal($0) }
        #expect(sealedNew.id == sealedOld.id)
        #expect(try new.chunks.open(sealedOld) == plain, "the newest ring opens what the first key sealed")
        #expect(throws: XferError.self) { try old.chunks.open(sealedNew) }
        // A deletion counts only sealed under the newest key: one an older key sealed (a removed
        // member's) is taken as unsealed, and the copy is kept.
        #expect(new.isDeletionSeal(new.deletionSeal(of: 3, at: "x"), of: 3, at: "x"))
        #expect(!new.isDeletionSeal(old.deletionSeal(of: 3, at: "x"), of: 3, at: "x"))
    }
}
