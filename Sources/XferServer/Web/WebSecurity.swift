import Foundation
import HTTPTypes
import Hummingbird
import XferCore

/// The web view's cookies, CSRF tokens and response headers: one place for each rule.
enum WebSecurity {
    /// The session cookie: a 256-bit secret, kept by the server only as its SHA-256.
    static let sessionCookie = "xfer_session"
    /// The sign-in form's token: a random value in a cookie and in the form, which must agree
    /// (a page elsewhere cannot read the cookie, so it cannot sign a browser in to its account).
    static let signinCookie = "xfer_signin"
    /// Every cookie is scoped to the web view's paths.
    static let cookiePath = "/web"

    /// A new secret: 32 random bytes as 64 hex digits.
    static func secret() -> String {
        var random = SystemRandomNumberGenerator()
        return (0..<4).map { _ in
            let hex = String(random.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// Whether `value` looks like a secret this server made (64 lowercase hex digits).
    static func isSecret(_ value: String) -> Bool {
        value.utf8.count == 64 && value.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// The stored form of a session secret.
    static func hash(_ secret: String) -> [UInt8] { ChunkID.of(Array("xfer web session v1\0\(secret)".utf8)).bytes }

    /// The CSRF token of a session: derived from its secret, so it needs no storage, and
    /// useless without the cookie it came from (which a page elsewhere can neither read nor
    /// make the browser send: SameSite=Strict).
    static func csrf(_ secret: String) -> String { ChunkID.of(Array("xfer web csrf v1\0\(secret)".utf8)).description }

    /// Compares two tokens in time independent of where they differ.
    static func same(_ a: String, _ b: String) -> Bool { TokenHash.equal(Array(a.utf8), Array(b.utf8)) }

    static func cookie(_ name: String, _ value: String, maxAge: Int, secure: Bool) -> Cookie {
        Cookie(
            name: name, value: value, maxAge: maxAge, path: cookiePath, secure: secure, httpOnly: true,
            sameSite: .strict)
    }

    /// Whether a state-changing request came from one of this server's own pages: a browser
    /// names the page's origin (`Origin`) and whether it is this site (`Sec-Fetch-Site`); a
    /// request that names another is refused, whatever token it carries.
    static func isSameOrigin(_ request: Request) -> Bool {
        if let site = request.headers[HTTPField.Name("Sec-Fetch-Site")!] {
            // Every current browser says where a request comes from; it is the answer.
            return site == "same-origin"
        }
        guard let origin = request.headers[HTTPField.Name("Origin")!] else { return true }
        guard origin != "null", let host = request.head.authority ?? request.headers[HTTPField.Name("Host")!],
            let components = URLComponents(string: origin), let originHost = components.host
        else { return false }
        let originAuthority = originHost + (components.port.map { ":\($0)" } ?? "")
        return originAuthority.lowercased() == host.lowercased()
    }

    /// Headers every web response carries: no script, style, frame or form target but this
    /// server's own; no sniffing a download into a page; no referrer to another site (a URL
    /// names a path; `same-origin`, not `no-referrer`, under which a browser sends a form's
    /// `Origin` as `null`).
    static func harden(_ headers: inout HTTPFields) {
        headers[HTTPField.Name("Content-Security-Policy")!] = """
            default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; \
            form-action 'self'; frame-ancestors 'none'; base-uri 'none'
            """
        headers[HTTPField.Name("X-Content-Type-Options")!] = "nosniff"
        headers[HTTPField.Name("Referrer-Policy")!] = "same-origin"
        headers[HTTPField.Name("X-Frame-Options")!] = "DENY"
        headers[HTTPField.Name("Cross-Origin-Opener-Policy")!] = "same-origin"
        headers[HTTPField.Name("Cross-Origin-Resource-Policy")!] = "same-origin"
        if headers[.cacheControl] == nil { headers[.cacheControl] = "no-store" }
    }

    /// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
    static func encode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// A query string from pairs, values encoded, pairs without a value left out.
    static func query(_ pairs: [(String, String?)]) -> String {
        let kept = pairs.compactMap { key, value in value.map { "\(key)=\(encode($0))" } }
        return kept.isEmpty ? "" : "?" + kept.joined(separator: "&")
    }

    /// A `Content-Disposition` for a download named `name` (RFC 6266: an ASCII fallback, and
    /// the UTF-8 name encoded).
    static func attachment(_ name: String) -> String {
        let ascii = String(
            name.unicodeScalars.map {
                $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" && $0.value != 0x7F ? Character($0) : "_"
            })
        return "attachment; filename=\"\(ascii)\"; filename*=UTF-8''\(encode(name))"
    }

    /// A request's query read as a form (`+` is a space, as a browser's GET form sends it);
    /// the first of a repeated name wins.
    static func queryFields(_ request: Request) -> [String: String] {
        fields(request.uri.query ?? "")
    }

    /// `a=1&b=two+words`, decoded.
    static func fields(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
            }
            let key = decode(parts[0])
            if fields[key] == nil { fields[key] = parts.count > 1 ? decode(parts[1]) : "" }
        }
        return fields
    }

    /// Reads an `application/x-www-form-urlencoded` body of at most `limit` bytes.
    static func form(_ request: Request, limit: Int = 8192) async throws -> [String: String] {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch {
            throw XferError(.tooLarge, "the form is larger than \(limit) bytes")
        }
        return fields(String(buffer: body))
    }
}
