import XferCore

/// What a token may do: everything its account may (``full``), or less: only read, and or
/// only one container. A scope only narrows; nothing widens a token past its account.
public struct TokenScope: Codable, Sendable, Hashable, CustomStringConvertible {
    /// Reads only: no uploads, commits, deletions, resolutions, key-value or key writes.
    public var readOnly: Bool
    /// The one container it may name (`nil`: any of the account's).
    public var container: String?

    public init(readOnly: Bool = false, container: String? = nil) {
        self.readOnly = readOnly
        self.container = container
    }

    /// Everything the account may do.
    public static let full = TokenScope()

    /// Whether this is ``full``: only such a token manages the account's tokens.
    public var isFull: Bool { !readOnly && container == nil }

    /// "full", "read-only", "container NAME" or "read-only, container NAME".
    public var description: String {
        var parts: [String] = []
        if readOnly { parts.append("read-only") }
        if let container { parts.append("container \(container)") }
        return parts.isEmpty ? "full" : parts.joined(separator: ", ")
    }
}

/// The terms a new token is asked for with (`POST /v1/tokens`; `POST /v1/admin/tokens` adds
/// the account): a device name, a scope and a lifetime, each optional.
public struct TokenTerms: Codable, Sendable, Hashable {
    /// A name for the device that will hold it: shown in token lists, and recorded as the
    /// writing device of every version it commits.
    public var device: String?
    /// Reads only.
    public var readOnly: Bool?
    /// The one container it may use.
    public var container: String?
    /// Seconds until it expires (never when absent).
    public var expiresInSeconds: Int64?

    public init(device: String? = nil, readOnly: Bool? = nil, container: String? = nil, expiresInSeconds: Int64? = nil)
    {
        self.device = device
        self.readOnly = readOnly
        self.container = container
        self.expiresInSeconds = expiresInSeconds
    }

    /// The longest lifetime a token may be given: ten years.
    public static let maximumLifetimeSeconds: Int64 = 10 * 366 * 86_400

    /// The scope asked for.
    public var scope: TokenScope { TokenScope(readOnly: readOnly ?? false, container: container) }

    /// Checks each term: a device name of 1 to 128 bytes without control characters, a valid
    /// container name, a lifetime of a second to ten years.
    /// - Throws: `bad_request` (`invalid_path` for the container) naming the term.
    public func validate() throws {
        if let device {
            try FieldLimit.check(device, "device", maximumBytes: ProtocolLimits.maximumDeviceBytes)
            guard !device.isEmpty, !device.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
            else {
                throw XferError(
                    .badRequest,
                    "device is a name of 1 to \(ProtocolLimits.maximumDeviceBytes) bytes without control characters")
            }
        }
        if let container { _ = try ContainerName(container) }
        if let expiresInSeconds, !(1...Self.maximumLifetimeSeconds).contains(expiresInSeconds) {
            throw XferError(.badRequest, "expires_in_seconds is 1 to \(Self.maximumLifetimeSeconds) (ten years)")
        }
    }
}

/// A token as a list shows it: never the token, only its public id and terms.
public struct TokenSummary: Codable, Sendable, Hashable {
    /// The hex digits of a public id.
    public static let idLength = 16

    /// The token's public id: the first 8 bytes of its stored hash, in hex. It names the token
    /// for `revoke-token --id` and reveals nothing of it.
    public var id: String
    /// The account's name (`admin` for an admin token).
    public var account: String
    /// Whether it is an admin token.
    public var admin: Bool
    /// The device it was issued to, if named.
    public var device: String?
    /// Whether it only reads.
    public var readOnly: Bool
    /// The one container it may use.
    public var container: String?
    /// When it was issued (Unix seconds).
    public var createdAt: Int64
    /// When it expires (Unix seconds), if it does.
    public var expiresAt: Int64?
    /// Whether it has expired (it is refused, and `xfer gc` removes it).
    public var expired: Bool
    /// Whether it is the token that asked (lists an account asks for itself).
    public var current: Bool?

    public init(
        id: String, account: String, admin: Bool, device: String?, scope: TokenScope, createdAt: Int64,
        expiresAt: Int64?, expired: Bool, current: Bool? = nil
    ) {
        self.id = id
        self.account = account
        self.admin = admin
        self.device = device
        readOnly = scope.readOnly
        container = scope.container
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.expired = expired
        self.current = current
    }

    /// Its scope.
    public var scope: TokenScope { TokenScope(readOnly: readOnly, container: container) }
}

/// `GET /v1/tokens`, `GET /v1/admin/accounts/{name}/tokens`: an account's tokens, oldest first.
public struct TokenList: Codable, Sendable, Hashable {
    public var tokens: [TokenSummary]

    public init(tokens: [TokenSummary]) { self.tokens = tokens }
}
