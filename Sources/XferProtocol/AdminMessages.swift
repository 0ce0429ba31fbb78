import XferCore

/// What a garbage collection did (the JSON of `xfer gc --json` and `POST /v1/admin/gc`).
public struct GarbageReport: Codable, Sendable, Hashable {
    /// Seconds of grace: uploads, leases and files younger than this were left alone.
    public var graceSeconds: Int64
    /// Whether this was a dry run (nothing removed; the counts say what would go).
    public var dryRun: Bool
    /// Versions announced but never committed, removed.
    public var uploadsExpired = 0
    /// Chunks accounts held for a commit that never came, released.
    public var leasesExpired = 0
    /// Plain bytes given back to quotas by those releases.
    public var quotaReleased: Int64 = 0
    /// Account tokens that had expired before the grace began, removed.
    public var tokensExpired = 0
    /// Chunk files looked at.
    public var chunksScanned = 0
    /// Chunk files no one holds, removed.
    public var chunksRemoved = 0
    /// Their bytes on disk.
    public var bytesRemoved: Int64 = 0
    /// Pack objects deleted (an object store's packs with no live chunk left, or rewritten).
    public var packsRemoved = 0
    /// Packs mostly dead whose live chunks were copied into a new pack.
    public var packsRewritten = 0
    /// Bytes of object storage those gave back.
    public var packBytesFreed: Int64 = 0
    /// Wall time.
    public var milliseconds: Int64 = 0

    public init(graceSeconds: Int64, dryRun: Bool) {
        self.graceSeconds = graceSeconds
        self.dryRun = dryRun
    }
}

/// What a verification found (the JSON of `xfer verify --data` and `POST /v1/admin/verify`).
public struct ServerVerifyReport: Codable, Sendable, Hashable {
    /// Chunk files read and checked (decoded, SHA-256 compared with the id).
    public var chunksChecked = 0
    /// Their plain bytes.
    public var bytesChecked: Int64 = 0
    /// Committed versions whose manifest was decoded and checked.
    public var versionsChecked = 0
    /// Account chunk records checked against the manifests that reference them.
    public var recordsChecked = 0
    /// How many problems were found (``problems`` lists the first 100).
    public var problemCount = 0
    /// What is wrong, one line each: corrupt or missing chunks, bad manifests, wrong
    /// reference counts or quota use.
    public var problems: [String] = []
    /// Wall time.
    public var milliseconds: Int64 = 0
    /// No problems.
    public var ok = true

    public init() {}

    /// Records a problem (the first 100 are listed).
    public mutating func record(problem line: String) {
        ok = false
        problemCount += 1
        if problems.count < 100 { problems.append(line) }
    }
}

/// `POST /v1/admin/gc`: collect garbage.
public struct GarbageRequest: Codable, Sendable, Hashable {
    /// Seconds of grace for uploads, leases and files (a day when absent).
    public var graceSeconds: Int64?
    /// Count only.
    public var dryRun: Bool?

    public init(graceSeconds: Int64?, dryRun: Bool?) {
        self.graceSeconds = graceSeconds
        self.dryRun = dryRun
    }
}

/// `POST /v1/admin/tokens`: another token for an account, with the terms of ``TokenTerms``.
public struct NewTokenRequest: Codable, Sendable, Hashable {
    /// The account's name.
    public var account: String
    /// A name for the device that will hold it (shown in versions and in token lists).
    public var device: String?
    /// Reads only.
    public var readOnly: Bool?
    /// The one container it may use.
    public var container: String?
    /// Seconds until it expires (never when absent).
    public var expiresInSeconds: Int64?

    public init(account: String, terms: TokenTerms = TokenTerms()) {
        self.account = account
        device = terms.device
        readOnly = terms.readOnly
        container = terms.container
        expiresInSeconds = terms.expiresInSeconds
    }

    /// Its terms.
    public var terms: TokenTerms {
        TokenTerms(device: device, readOnly: readOnly, container: container, expiresInSeconds: expiresInSeconds)
    }
}

/// A token, shown once, with its terms.
public struct TokenInfo: Codable, Sendable, Hashable {
    /// The account's name.
    public var account: String
    /// The token.
    public var token: String
    /// Its public id (``TokenSummary/id``), for `revoke-token --id`.
    public var id: String?
    /// The device it was issued to.
    public var device: String?
    /// Whether it only reads.
    public var readOnly: Bool?
    /// The one container it may use.
    public var container: String?
    /// When it expires (Unix seconds), if it does.
    public var expiresAt: Int64?

    public init(
        account: String, token: String, id: String? = nil, device: String? = nil, readOnly: Bool? = nil,
        container: String? = nil, expiresAt: Int64? = nil
    ) {
        self.account = account
        self.token = token
        self.id = id
        self.device = device
        self.readOnly = readOnly
        self.container = container
        self.expiresAt = expiresAt
    }
}

/// `POST /v1/admin/tokens/revoke`: revoke one token (by the token itself or by its public id),
/// or every token of an account.
public struct RevokeTokenRequest: Codable, Sendable, Hashable {
    /// The token to revoke.
    public var token: String?
    /// The account whose tokens all go.
    public var account: String?
    /// The public id of the token to revoke (``TokenSummary/id``).
    public var id: String?

    public init(token: String?, account: String?, id: String? = nil) {
        self.token = token
        self.account = account
        self.id = id
    }
}

/// How many tokens a revocation removed.
public struct RevokeTokenResult: Codable, Sendable, Hashable {
    /// Tokens revoked (0 if the token was unknown).
    public var revoked: Int

    public init(revoked: Int) { self.revoked = revoked }
}
