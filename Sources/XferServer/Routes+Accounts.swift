import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The admin routes (accounts, their tokens, garbage collection, verification, metrics) and an account's own.
extension Routes {
    /// `GET /metrics`: the Prometheus text format (``ServerMetrics``), for the admin token only
    /// (Prometheus sends it with `authorization: credentials_file: DIR/admin-token`).
    @Sendable func metrics(_ request: Request, context: XferRequestContext) async throws -> Response {
        guard let principal = try await Credentials.principal(request.headers[.authorization], metadata),
            principal.isAdmin
        else {
            throw XferError(
                .unauthorized, "metrics need the admin token (DIR/admin-token): send Authorization: Bearer TOKEN")
        }
        let text = try await ServerMetrics.process.scrape(metadata)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
    }

    // MARK: Accounts

    @Sendable func createAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "creating accounts")
        let body = try await Self.decode(CreateAccountRequest.self, request)
        let quota = body.quota ?? limits.defaultQuota
        guard quota >= 0 else { throw XferError(.badRequest, "quota must not be negative") }
        let token = TokenHash.generate()
        var info = try await metadata.createAccount(
            name: try AccountName(body.name), quota: quota, tokenHash: TokenHash.hash(token))
        info.token = token
        return Self.json(info, status: .created)
    }

    @Sendable func listAccounts(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "listing accounts")
        return Self.json(AccountList(accounts: try await metadata.accountSummaries(named: nil)))
    }

    @Sendable func showAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "showing accounts")
        let name = try AccountName(context.parameters.get("name") ?? "")
        return Self.json(try await metadata.accountSummaries(named: name)[0])
    }

    @Sendable func setQuota(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "setting quotas")
        let name = try AccountName(context.parameters.get("name") ?? "")
        let body = try await Self.decode(SetQuotaRequest.self, request)
        return Self.json(try await metadata.setQuota(account: name, quota: body.quota))
    }

    /// `DELETE /v1/admin/accounts/NAME[?dry_run=1]`.
    @Sendable func deleteAccount(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "deleting accounts")
        let name = try AccountName(context.parameters.get("name") ?? "")
        let dryRun = ["1", "true"].contains(request.uri.queryParameters.get("dry_run").map { String($0) } ?? "")
        return Self.json(try await metadata.deleteAccount(name, dryRun: dryRun))
    }

    @Sendable func newToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "issuing tokens")
        let body = try await Self.decode(NewTokenRequest.self, request)
        return Self.json(try await metadata.issueToken(account: body.account, terms: body.terms), status: .created)
    }

    /// `GET /v1/admin/accounts/NAME/tokens`.
    @Sendable func accountTokens(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "listing tokens")
        let name = try AccountName(context.parameters.get("name") ?? "")
        return Self.json(TokenList(tokens: try await metadata.tokens(account: name)))
    }

    // MARK: An account's own tokens

    /// Managing an account's tokens (issuing, listing, revoking another) takes a token of full
    /// scope: a narrower one could otherwise widen itself.
    private static func requireFullScope(_ principal: Principal, _ what: String) throws {
        guard principal.scope.isFull else {
            throw XferError(.forbidden, "\(what) needs a token of full scope; this one is \(principal.scope)")
        }
    }

    /// `GET /v1/tokens`: the account's tokens, the asking one marked `current`.
    @Sendable func ownTokens(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        try Self.requireFullScope(principal, "listing the account's tokens")
        let current = context.tokenKey.map(TokenHash.publicID(ofHash:))
        let tokens = try await metadata.tokens(account: try AccountName(principal.name)).map { token -> TokenSummary in
            var token = token
            token.current = token.id == current
            return token
        }
        return Self.json(TokenList(tokens: tokens))
    }

    /// `POST /v1/tokens`: another token of the asking account (a device's, `xfer login`).
    @Sendable func issueOwnToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        try Self.requireFullScope(principal, "issuing tokens")
        let terms = try await Self.decode(TokenTerms.self, request)
        // No later than the asking token's own expiry (the store clamps it in its transaction).
        return Self.json(
            try await metadata.issueToken(account: principal.name, terms: terms, notAfter: principal.expiresAt),
            status: .created)
    }

    /// `POST /v1/tokens/revoke`: one of the account's tokens, by the token itself (any token may
    /// revoke itself: `xfer logout`) or by its id (with a token of full scope).
    @Sendable func revokeOwnToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        let principal = try context.requireAccount()
        let body = try await Self.decode(RevokeTokenRequest.self, request)
        let account = try AccountName(principal.name)
        switch (body.token, body.id, body.account) {
        case (let token?, nil, nil):
            let hash = TokenHash.hash(token)
            if let key = context.tokenKey, TokenHash.equal(key, hash) {
                return Self.json(RevokeTokenResult(revoked: try await metadata.revokeToken(hash: hash) ? 1 : 0))
            }
            try Self.requireFullScope(principal, "revoking another token")
            guard let owner = try await metadata.principal(tokenHash: hash), !owner.isAdmin,
                owner.accountID == principal.accountID
            else {
                return Self.json(RevokeTokenResult(revoked: 0))
            }
            return Self.json(RevokeTokenResult(revoked: try await metadata.revokeToken(hash: hash) ? 1 : 0))
        case (nil, let id?, nil):
            try Self.requireFullScope(principal, "revoking another token")
            return Self.json(
                RevokeTokenResult(
                    revoked: try await metadata.revokeToken(id: try TokenHash.publicID(id), account: account) ? 1 : 0))
        default:
            throw XferError(.badRequest, "give one of \"token\" (a token of this account) or \"id\" (one by its id)")
        }
    }

    @Sendable func revokeToken(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "revoking tokens")
        return Self.json(try await metadata.revoke(try await Self.decode(RevokeTokenRequest.self, request)))
    }

    @Sendable func collectGarbage(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "garbage collection")
        let body = try await Self.decode(GarbageRequest.self, request)
        let grace = body.graceSeconds ?? Maintenance.defaultGrace
        guard grace >= 0 else { throw XferError(.badRequest, "grace_seconds must not be negative") }
        let report = try await Maintenance(metadata: metadata, chunks: chunks).collectGarbage(
            grace: grace, dryRun: body.dryRun ?? false)
        if !(body.dryRun ?? false) {
            ServerMetrics.process.gcRuns.increment()
            ServerMetrics.process.gcChunksRemoved.increment(by: Int64(report.chunksRemoved))
            ServerMetrics.process.gcBytesFreed.increment(by: report.packBytesFreed)
        }
        return Self.json(report)
    }

    @Sendable func verify(_ request: Request, context: XferRequestContext) async throws -> Response {
        try Self.requireAdmin(context, "verification")
        let report = try await Maintenance(metadata: metadata, chunks: chunks).verify()
        ServerMetrics.process.verifyRuns.increment()
        ServerMetrics.process.verifyDamaged.set(Int64(report.problemCount))
        return Self.json(report)
    }

    private static func requireAdmin(_ context: XferRequestContext, _ what: String) throws {
        guard try context.requirePrincipal().isAdmin else {
            throw XferError(.forbidden, "\(what) needs the admin token (DIR/admin-token on the server)")
        }
    }

    @Sendable func account(_ request: Request, context: XferRequestContext) async throws -> Response {
        Self.json(try await metadata.account(try context.requireAccount().accountID))
    }
}
