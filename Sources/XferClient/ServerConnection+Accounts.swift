import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XferCore
import XferProtocol

/// The account routes: the token's own account and tokens, and the admin's accounts, tokens,
/// garbage collection and verification.
extension ServerConnection {
    /// The account the token belongs to.
    public func account() async throws -> AccountInfo {
        try await json(AccountInfo.self, "GET", "/v1/account")
    }

    /// Creates an account (admin token only); the answer carries the new token.
    public func createAccount(_ request: CreateAccountRequest) async throws -> AccountInfo {
        try await json(AccountInfo.self, "POST", "/v1/admin/accounts", body: WireJSON.encode(request))
    }

    /// Every account, or one (admin token only).
    public func accounts(named name: String? = nil) async throws -> [AccountSummary] {
        guard let name else { return try await json(AccountList.self, "GET", "/v1/admin/accounts").accounts }
        return [try await json(AccountSummary.self, "GET", "/v1/admin/accounts/\(Self.escape(name))")]
    }

    /// Sets an account's quota (admin token only).
    public func setQuota(account name: String, quota: Int64) async throws -> AccountSummary {
        try await json(
            AccountSummary.self, "PUT", "/v1/admin/accounts/\(Self.escape(name))/quota",
            body: WireJSON.encode(SetQuotaRequest(quota: quota)))
    }

    /// Deletes an account and everything it has, or (`dryRun`) says what would go (admin token only).
    public func deleteAccount(_ name: String, dryRun: Bool) async throws -> AccountDeletion {
        try await json(
            AccountDeletion.self, "DELETE", "/v1/admin/accounts/\(Self.escape(name))\(dryRun ? "?dry_run=1" : "")")
    }

    /// Issues another token for an account (admin token only).
    public func newToken(account: String, terms: TokenTerms = TokenTerms()) async throws -> TokenInfo {
        try await json(
            TokenInfo.self, "POST", "/v1/admin/tokens",
            body: WireJSON.encode(NewTokenRequest(account: account, terms: terms)))
    }

    /// An account's tokens (admin token only).
    public func tokens(account name: String) async throws -> [TokenSummary] {
        try await json(TokenList.self, "GET", "/v1/admin/accounts/\(Self.escape(name))/tokens").tokens
    }

    /// The tokens of the account this connection's token belongs to, its own marked `current`
    /// (a token of full scope only).
    public func ownTokens() async throws -> [TokenSummary] {
        try await json(TokenList.self, "GET", "/v1/tokens").tokens
    }

    /// Another token of this connection's account, on `terms` (a token of full scope only; the
    /// new one expires no later than this one).
    public func issueOwnToken(_ terms: TokenTerms) async throws -> TokenInfo {
        try await json(TokenInfo.self, "POST", "/v1/tokens", body: WireJSON.encode(terms))
    }

    /// Revokes one of this account's tokens: by the token itself (any token may revoke itself)
    /// or by its id (a token of full scope only).
    public func revokeOwnToken(_ request: RevokeTokenRequest) async throws -> RevokeTokenResult {
        try await json(RevokeTokenResult.self, "POST", "/v1/tokens/revoke", body: WireJSON.encode(request))
    }

    /// Revokes one token or all of an account's (admin token only).
    public func revokeToken(_ request: RevokeTokenRequest) async throws -> RevokeTokenResult {
        try await json(RevokeTokenResult.self, "POST", "/v1/admin/tokens/revoke", body: WireJSON.encode(request))
    }

    /// Collects garbage on the server (admin token only).
    public func collectGarbage(_ request: GarbageRequest) async throws -> GarbageReport {
        try await json(GarbageReport.self, "POST", "/v1/admin/gc", body: WireJSON.encode(request))
    }

    /// Verifies the server's stores (admin token only); may take long on a large server.
    public func verifyServer() async throws -> ServerVerifyReport {
        try await json(
            ServerVerifyReport.self, "POST", "/v1/admin/verify",
            body: WireJSON.encode(GarbageRequest(graceSeconds: nil, dryRun: nil)))
    }
}
