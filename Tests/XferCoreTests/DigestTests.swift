import Testing

@testable import XferCore

/// SHA-256 and HMAC-SHA-256 against their published vectors (FIPS 180-2, RFC 4231).
@Suite struct DigestTests {
    @Test func sha256AndHMACMatchTheirPublishedVectors() {
        let hex = { (bytes: [UInt8]) in bytes.map { String($0, radix: 16).leftPadded(2) }.joined() }
        #expect(
            hex(Digest.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(Digest.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        // RFC 4231, test case 2.
        let mac = Digest.hmacSHA256(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8))
        #expect(hex(mac) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}
