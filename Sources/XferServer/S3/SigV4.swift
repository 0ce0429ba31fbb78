import Foundation
import XferCore

/// AWS Signature Version 4 for S3 requests (header form), as docs.aws.amazon.com describes
/// it: a canonical request, a string to sign, a signing key derived from the secret by four
/// HMAC-SHA256 rounds, and the `Authorization` header.
public struct SigV4Signer: Sendable {
    /// The access key id.
    public var accessKey: String
    /// The secret access key.
    public var secretKey: String
    /// The region (`us-east-1` for Ceph RGW and most S3-compatible stores).
    public var region: String
    /// The service (`s3`).
    public var service = "s3"

    /// The hash S3 expects in `x-amz-content-sha256` for a body.
    public static func payloadHash(_ body: [UInt8]) -> String { hex(Digest.sha256(body)) }

    /// Creates a signer.
    public init(accessKey: String, secretKey: String, region: String = "us-east-1") {
        self.accessKey = accessKey
        self.secretKey = secretKey
        self.region = region
    }

    /// The headers to add to a request: `x-amz-date`, `x-amz-content-sha256` and `Authorization`.
    /// - Parameters:
    ///   - method: `GET`, `PUT`, …
    ///   - host: The `Host` header's value (with the port if not the scheme's default).
    ///   - path: The absolute path, not yet encoded (`/bucket/key`).
    ///   - query: Query parameters, not yet encoded.
    ///   - headers: Other headers to sign (names in any case).
    ///   - payloadHash: ``payloadHash(_:)`` of the body.
    ///   - date: The request time.
    public func sign(
        method: String, host: String, path: String, query: [(String, String)], headers: [(String, String)] = [],
        payloadHash: String, date: Date
    ) -> [(String, String)] {
        let (amzDate, day) = Self.timestamps(date)
        var signed = headers.map { ($0.0.lowercased(), $0.1.trimmingCharacters(in: .whitespaces)) }
        signed.append(("host", host))
        signed.append(("x-amz-content-sha256", payloadHash))
        signed.append(("x-amz-date", amzDate))
        signed.sort { $0.0 < $1.0 }
        let signedHeaders = signed.map(\.0).joined(separator: ";")
        var pairs: [(name: String, value: String)] = query.map {
            (Self.encode($0.0, slash: true), Self.encode($0.1, slash: true))
        }
        pairs.sort { (a: (name: String, value: String), b: (name: String, value: String)) -> Bool in
            a.name == b.name ? a.value < b.value : a.name < b.name
        }
        let canonicalQuery: String = pairs.map { (pair: (name: String, value: String)) -> String in
            pair.name + "=" + pair.value
        }
        .joined(separator: "&")
        let canonicalHeaders: String = signed.map { (header: (String, String)) -> String in
            header.0 + ":" + header.1 + "\n"
        }.joined()
        let canonicalRequest: String = [
            method, Self.encode(path, slash: false), canonicalQuery, canonicalHeaders, signedHeaders, payloadHash
        ]
        .joined(separator: "\n")
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = [
            "AWS4-HMAC-SHA256", amzDate, scope, Self.hex(Digest.sha256(Array(canonicalRequest.utf8)))
        ].joined(separator: "\n")
        var key = Array("AWS4\(secretKey)".utf8)
        for part in [day, region, service, "aws4_request"] { key = Digest.hmacSHA256(key: key, Array(part.utf8)) }
        let signature = Self.hex(Digest.hmacSHA256(key: key, Array(stringToSign.utf8)))
        return [
            ("x-amz-date", amzDate), ("x-amz-content-sha256", payloadHash),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=\(accessKey)/\(scope),SignedHeaders=\(signedHeaders),Signature=\(signature)"
            )
        ]
    }

    /// URI-encodes as SigV4 wants: every byte but `A-Z a-z 0-9 - _ . ~` as `%XX`; `/` kept in
    /// paths (`slash: false`), encoded in query parts (`slash: true`).
    public static func encode(_ text: String, slash: Bool) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case UInt8(ascii: "/") where !slash:
                out.append("/")
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    static func timestamps(_ date: Date) -> (String, String) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let c = calendar.dateComponents([.year, .month, .day, .hour, .minute, .second], from: date)
        let day = String(format: "%04d%02d%02d", c.year!, c.month!, c.day!)
        return (day + String(format: "T%02d%02d%02dZ", c.hour!, c.minute!, c.second!), day)
    }

    static func hex(_ digest: some Sequence<UInt8>) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}
