import Foundation
import XferCore
import XferProtocol

/// Who a request acts for, as its token says.
public struct Principal: Sendable, Hashable {
    /// The account's row id (0 for the admin token, which belongs to no account).
    public var accountID: Int64
    /// The account's name ("admin" for the admin token).
    public var name: String
    /// Whether the token may use the admin routes.
    public var isAdmin: Bool
    /// The store's clock (``MetadataStore/clock()``) when the token was checked, read in the
    /// same round trip: a request's start in the store's time, so an upload needs no extra
    /// round trip to learn when it began.
    public var authenticatedAt: Int64
    /// The device the token was issued to: recorded as the writer of what it commits.
    public var device: String?
    /// What the token may do.
    public var scope: TokenScope
    /// When the token expires (store clock, ns), if it does.
    public var expiresAt: Int64?

    public init(
        accountID: Int64, name: String, isAdmin: Bool, authenticatedAt: Int64, device: String? = nil,
        scope: TokenScope = .full, expiresAt: Int64? = nil
    ) {
        self.accountID = accountID
        self.name = name
        self.isAdmin = isAdmin
        self.authenticatedAt = authenticatedAt
        self.device = device
        self.scope = scope
        self.expiresAt = expiresAt
    }

    /// Whether the token had expired when it was checked.
    public var isExpired: Bool { expiresAt.map { $0 <= authenticatedAt } ?? false }

    /// How a route uses what it names.
    public enum Access: Sendable {
        case read
        case write
        /// Changes who reaches a container (its members, share links and end-to-end key):
        /// its owner's alone (``ContainerTarget``).
        case manage
    }

    /// The one rule of a token's scope, which every route that acts for an account applies:
    /// a read-only token only reads, and a token of one container names no other.
    /// - Parameter container: The container the request names (`nil` for an account's chunks,
    ///   which every token of the account may reach by id, as dedup shares them).
    /// - Throws: `forbidden`, saying what the token may do.
    public func check(_ access: Access, container: ContainerName?) throws {
        let holder = device.map { "the token of device \"\($0)\"" } ?? "this token"
        if access != .read, scope.readOnly {
            throw XferError(
                .forbidden, "\(holder) is read-only: it may read but not change anything; use a token with write access"
            )
        }
        if let only = scope.container, let container, container.value != only {
            throw XferError(.forbidden, "\(holder) is for container \(only) only, not \(container)")
        }
    }

    /// The writing device a request records: the token's device when it was issued to one
    /// (a device token cannot write as another), else what the client says.
    public func device(claimed: String?) -> String? { device ?? claimed }
}
