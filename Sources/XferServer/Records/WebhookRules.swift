import Foundation
import XferCore
import XferProtocol

/// Which addresses `xfer serve` POSTs subscription webhooks to (`--webhooks`).
public enum WebhookDestinations: String, Codable, Sendable, Hashable, CaseIterable {
    /// No webhooks: a subscription asking for one is refused.
    case off
    /// Public addresses only: not loopback, private, link-local, shared or multicast ones, so
    /// an account cannot make the server reach what stands behind its firewall.
    case `public`
    /// Any address (a private deployment, or tests on one machine).
    case any
}

/// The rules of webhook delivery (docs/RECORDS.md, "Webhooks"), apart from its I/O: which URLs
/// and addresses are allowed, how a body is signed, when a failed delivery is tried again.
enum WebhookRules {
    /// Notifications one delivery carries.
    static let batch = 100
    /// How long a server holds a claimed webhook before another may take it (ms).
    static let lease: Int64 = 60_000
    /// The longest one attempt may take, and a host's name lookup.
    static let timeout: Duration = .seconds(15)
    static let lookupTimeout: Duration = .seconds(5)
    /// Undelivered notifications are kept this long past the week other notifications are (ms).
    static let keepUndelivered: Int64 = 30 * 86_400_000
    static let signatureHeader = "X-Xfer-Signature"
    static let deliveryHeader = "X-Xfer-Delivery"

    /// The URL a subscription names, checked: `http` or `https`, a host, no user or password,
    /// at most 2,048 bytes.
    /// - Throws: `bad_request` saying what is wrong.
    static func check(url text: String) throws -> URLComponents {
        guard text.utf8.count <= 2_048, let url = URLComponents(string: text),
            let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
            let host = url.host, !host.isEmpty, url.user == nil, url.password == nil
        else {
            throw XferError(
                .badRequest,
                "webhook url \"\(text.prefix(80))\" must be an http or https URL with a host and no user, at most 2,048 bytes"
            )
        }
        return url
    }

    /// The secret a subscription gives, checked, or a new one: 32 random bytes in hex.
    /// - Throws: `bad_request` for one shorter than 16 or longer than 256 bytes.
    static func secret(_ given: String?) throws -> String {
        guard let given else {
            var random = SystemRandomNumberGenerator()
            return (0..<32).map { _ in ChunkID.hexDigits(random.next() as UInt8) }.joined()
        }
        guard (16...256).contains(given.utf8.count) else {
            throw XferError(.badRequest, "a webhook secret is 16 to 256 bytes")
        }
        return given
    }

    /// Whether `address` (4 or 16 bytes) is one `--webhooks public` lets the server reach:
    /// not unspecified, loopback, private (RFC 1918, fc00::/7), link-local, shared (100.64/10),
    /// multicast or reserved, nor an IPv6 form of such an IPv4 address.
    static func isPublic(_ address: [UInt8]) -> Bool {
        if address.count == 16 {
            let head = Array(address.prefix(12))
            let mapped: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF]
            let nat64: [UInt8] = [0, 0x64, 0xFF, 0x9B] + Array(repeating: 0, count: 8)
            if head == mapped || head == nat64 { return isPublic(Array(address.suffix(4))) }
            if address[0] == 0x20, address[1] == 0x02 { return isPublic(Array(address[2..<6])) }  // 6to4
            if address[0] == 0x20, address[1] == 0x01, address[2] == 0x0D, address[3] == 0xB8 { return false }
            if address[0] == 0x20, address[1] == 0x01, address[2] == 0, address[3] == 0 { return false }  // Teredo
            return address[0] & 0xE0 == 0x20  // 2000::/3, the global unicast space
        }
        guard address.count == 4 else { return false }
        let (a, b) = (address[0], address[1])
        switch a {
        case 0, 10, 127: return false
        case 100 where b & 0xC0 == 64: return false
        case 169 where b == 254: return false
        case 172 where b & 0xF0 == 16: return false
        case 192 where b == 168 || (b == 0 && address[2] == 0): return false
        case 198 where b & 0xFE == 18: return false
        case 224...255: return false
        default: return true
        }
    }

    /// The signature header of a body sent at `seconds` (Unix time): `t=SECONDS,v1=HEX`, where
    /// HEX is HMAC-SHA-256 under the secret of `SECONDS.` followed by the body.
    static func signature(secret: String, seconds: Int64, body: [UInt8]) -> String {
        let mac = Digest.hmacSHA256(key: Array(secret.utf8), Array("\(seconds).".utf8) + body)
        return "t=\(seconds),v1=\(mac.map(ChunkID.hexDigits).joined())"
    }

    /// How long after its `failures`-th failure in a row a delivery is tried again (ms):
    /// 1 s, doubling, at most an hour.
    static func retryDelay(failures: Int) -> Int64 {
        let doubling = min(max(failures, 1) - 1, 12)
        return min(1_000 << doubling, 3_600_000)
    }
}
