import Foundation
import Hummingbird
import XferCore
import XferProtocol

/// Access tokens: 256 random bits, shown once, stored only as their SHA-256.
public enum TokenHash {
    /// A new token: `xfer_` and 64 hex digits.
    public static func generate() -> String {
        var random = SystemRandomNumberGenerator()
        let words = (0..<4).map { _ in random.next() as UInt64 }
        return "xfer_" + words.map { word in
            let hex = String(word, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    /// The stored form of a token.
    public static func hash(_ token: String) -> [UInt8] { ChunkID.of(Array(token.utf8)).bytes }

    /// Compares two hashes in time independent of where they differ.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// The request context of xfer's routes: Hummingbird's core storage plus who is asking.
public struct XferRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by ``AuthMiddleware`` for every route but the health check.
    public var principal: Principal?
    /// Set by ``WebSessionMiddleware`` on the web view's routes for a signed-in browser.
    public var web: WebContext?

    public init(source: Source) {
        coreContext = .init(source: source)
        principal = nil
        web = nil
    }

    /// The authenticated principal (the middleware guarantees one on authenticated routes).
    func requirePrincipal() throws -> Principal {
        guard let principal else { throw XferError(.unauthorized, "this route needs a token") }
        return principal
    }

    /// The principal, which must be an account (not the admin token).
    func requireAccount() throws -> Principal {
        let principal = try requirePrincipal()
        guard !principal.isAdmin else {
            throw XferError(.forbidden, "the admin token manages accounts only; use an account's token for documents")
        }
        return principal
    }
}

/// Resolves `Authorization: Bearer TOKEN` to a principal, or answers 401.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext
    let metadata: any MetadataStore

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else {
            throw XferError(.unauthorized, "missing token: send Authorization: Bearer TOKEN (xfer reads --token, XFER_TOKEN or the config file)")
        }
        let token = header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
        guard token.utf8.count <= 256, let principal = try await metadata.principal(tokenHash: TokenHash.hash(token)) else {
            throw XferError(.unauthorized, "the token is not valid on this server")
        }
        var context = context
        context.principal = principal
        return try await next(request, context)
    }
}
