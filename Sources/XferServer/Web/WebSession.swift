import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import XferCore
import XferProtocol

/// Thrown where a page needs a signed-in browser and has none: answered with the sign-in page.
struct WebSignInNeeded: Error {}

/// A signed-in browser's session, as a request sees it.
public struct WebContext: Sendable {
    public var principal: Principal
    /// The cookie's secret (the CSRF token is derived from it).
    var secret: String
    /// The key of the token the session was opened with in the ``TokenLimiter``.
    var tokenKey: [UInt8]
}

/// Reads the session cookie; a valid one sets ``XferRequestContext/web``. A request without
/// one goes on (the sign-in page and the assets need none; other pages send it there).
struct WebSessionMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext
    let metadata: any MetadataStore

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var context = context
        if let secret = request.cookies[WebSecurity.sessionCookie]?.value, WebSecurity.isSecret(secret),
            let session = try await metadata.webSession(hash: WebSecurity.hash(secret))
        {
            context.web = WebContext(principal: session.principal, secret: secret, tokenKey: session.tokenHash)
        }
        return try await next(request, context)
    }
}
