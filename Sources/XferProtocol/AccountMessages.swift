import XferCore

// The JSON bodies of the account and token routes (docs/PROTOCOL.md).

/// `POST /v1/admin/accounts`: create an account (admin token only).
public struct CreateAccountRequest: Codable, Sendable, Hashable {
    /// 1–64 characters of `A-Z a-z 0-9 . _ -`.
    public var name: String
    /// Storage quota in bytes; the server's default when `nil`.
    public var quota: Int64?

    /// Creates a request.
    public init(name: String, quota: Int64?) {
        self.name = name
        self.quota = quota
    }
}

/// An account and, once, at creation, its token.
/// One account as the admin sees it (`GET /v1/admin/accounts`, `xfer account list|show`).
public struct AccountSummary: Codable, Sendable, Hashable {
    public var name: String
    /// Quota in bytes.
    public var quota: Int64
    /// Plain bytes of the chunks the account stores, each distinct chunk counted once.
    public var used: Int64
    /// Seconds since 1970.
    public var createdAt: Int64
    /// Tokens that act for it.
    public var tokens: Int64
    public var containers: Int64
    /// Documents whose current version is not a deletion.
    public var documents: Int64
    /// What its version records cost the quota beside ``used`` (each committed version and
    /// deletion 256 bytes plus its stored manifest); `nil` from a server that does not count them.
    public var versionBytes: Int64?

    public init(
        name: String, quota: Int64, used: Int64, versionBytes: Int64? = nil, createdAt: Int64, tokens: Int64,
        containers: Int64,
        documents: Int64
    ) {
        self.name = name
        self.quota = quota
        self.used = used
        self.versionBytes = versionBytes
        self.createdAt = createdAt
        self.tokens = tokens
        self.containers = containers
        self.documents = documents
    }
}

/// Every account (`GET /v1/admin/accounts`), by name.
public struct AccountList: Codable, Sendable, Hashable {
    public var accounts: [AccountSummary]

    public init(accounts: [AccountSummary]) { self.accounts = accounts }
}

/// What deleting an account removed, or would (`DELETE /v1/admin/accounts/NAME`,
/// `xfer account delete`).
public struct AccountDeletion: Codable, Sendable, Hashable {
    public var name: String
    public var containers: Int64
    /// Documents whose current version was not a deletion.
    public var documents: Int64
    /// Every version kept, deletions and conflicts included.
    public var versions: Int64
    public var tokens: Int64
    /// Plain bytes its chunks took; the chunks no other account holds go at the next gc.
    public var used: Int64
    /// Whether nothing was removed (`dry_run`).
    public var dryRun: Bool

    public init(
        name: String, containers: Int64, documents: Int64, versions: Int64, tokens: Int64, used: Int64, dryRun: Bool
    ) {
        self.name = name
        self.containers = containers
        self.documents = documents
        self.versions = versions
        self.tokens = tokens
        self.used = used
        self.dryRun = dryRun
    }
}

/// `PUT /v1/admin/accounts/NAME/quota`.
public struct SetQuotaRequest: Codable, Sendable, Hashable {
    /// Bytes; 0 or more. Below what the account uses, it refuses new data and keeps the old.
    public var quota: Int64

    public init(quota: Int64) { self.quota = quota }
}

public struct AccountInfo: Codable, Sendable, Hashable {
    /// The account's name.
    public var name: String
    /// Quota in bytes.
    public var quota: Int64
    /// Plain bytes of the chunks the account stores, each distinct chunk counted once.
    public var used: Int64
    /// The new token; only in the answer to account creation.
    public var token: String?
    /// What its version records cost the quota beside ``used`` (each committed version and
    /// deletion 256 bytes plus its stored manifest); `nil` from a server that does not count them.
    public var versionBytes: Int64?

    /// Creates a description.
    public init(name: String, quota: Int64, used: Int64, versionBytes: Int64? = nil, token: String? = nil) {
        self.name = name
        self.quota = quota
        self.used = used
        self.versionBytes = versionBytes
        self.token = token
    }

    /// All the quota counts: chunks and version records.
    public var charged: Int64 { used + (versionBytes ?? 0) }
}

extension AccountSummary {
    /// All the quota counts: chunks and version records.
    public var charged: Int64 { used + (versionBytes ?? 0) }
}
