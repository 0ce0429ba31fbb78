import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import XferCore
import XferProtocol

/// Signing in with an account token, signing out, and the form check every POST makes.
extension WebRoutes {
    @Sendable func signinPage(_ request: Request, context: XferRequestContext) async throws -> Response {
        if context.principal != nil { return Self.redirect("/web/") }
        return signinForm(error: nil, status: .ok)
    }

    func signinForm(error: String?, status: HTTPResponse.Status) -> Response {
        let token = WebSecurity.secret()
        var values: [String: Any] = ["csrf": token]
        if let error { values["error"] = error }
        var response = html("signin", values, title: "Sign in", session: nil, status: status)
        response.setCookie(
            WebSecurity.cookie(WebSecurity.signinCookie, token, maxAge: 3600, secure: limits.secureCookies))
        return response
    }

    @Sendable func signin(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        let form = try await WebSecurity.form(request)
        guard let expected = request.cookies[WebSecurity.signinCookie]?.value, WebSecurity.isSecret(expected),
            let sent = form["csrf"], WebSecurity.same(sent, expected)
        else {
            return signinForm(error: "The sign-in form had expired; sign in again.", status: .forbidden)
        }
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let secret = WebSecurity.secret()
        let lifetime = Int64(limits.webSessionLifetime.components.seconds)
        guard !token.isEmpty, token.utf8.count <= 256,
            let session = try await metadata.openWebSession(
                tokenHash: TokenHash.hash(token), sessionHash: WebSecurity.hash(secret),
                lifetime: lifetime * 1_000_000_000)
        else {
            return signinForm(
                error:
                    "That is not a valid account token of this server with full access (the admin token, a read-only or one-container token, and an expired one cannot sign in here).",
                status: .unauthorized)
        }
        _ = session
        var response = Self.redirect("/web/")
        response.setCookie(
            WebSecurity.cookie(WebSecurity.sessionCookie, secret, maxAge: Int(lifetime), secure: limits.secureCookies))
        response.setCookie(WebSecurity.cookie(WebSecurity.signinCookie, "", maxAge: 0, secure: limits.secureCookies))
        return response
    }

    @Sendable func signout(_ request: Request, context: XferRequestContext) async throws -> Response {
        let session = try requireSession(context)
        _ = try await checkForm(request, session)
        try await metadata.closeWebSession(hash: WebSecurity.hash(session.secret))
        var response = Self.redirect("/web/signin")
        response.setCookie(WebSecurity.cookie(WebSecurity.sessionCookie, "", maxAge: 0, secure: limits.secureCookies))
        return response
    }

    /// A form from a signed-in page: from this site, with the session's CSRF token.
    /// - Returns: The form's fields.
    func checkForm(_ request: Request, _ session: WebContext) async throws -> [String: String] {
        guard WebSecurity.isSameOrigin(request) else {
            throw XferError(.forbidden, "this form was sent from another site")
        }
        let form = try await WebSecurity.form(request)
        guard let sent = form["csrf"], WebSecurity.same(sent, WebSecurity.csrf(session.secret)) else {
            throw XferError(.forbidden, "the form's token does not match this session; reload the page and try again")
        }
        return form
    }
}
