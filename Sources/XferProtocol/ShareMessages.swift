import Foundation
import XferCore

/// Share links over /v1 (docs/PROTOCOL.md, Share links): the read-only links to one document
/// the web view also makes, with the same rules.
/// `POST /v1/containers/{c}/shares`: a new link.
public struct ShareCreateRequest: Codable, Sendable, Hashable, WireRequest {
    /// The longest a link may last: a year.
    public static let maximumSeconds: Int64 = 365 * 86_400
    /// A password's most bytes.
    public static let maximumPasswordBytes = 1024

    /// The document.
    public var path: DocumentPath
    /// The one version the link shows (`nil`: whatever is current when it is opened).
    public var version: Int64?
    /// Seconds the link lasts: 0 until revoked; `nil` a week.
    public var expiresIn: Int64?
    /// A password the link asks for (`nil`: none).
    public var password: String?

    public init(path: DocumentPath, version: Int64? = nil, expiresIn: Int64? = nil, password: String? = nil) {
        self.path = path
        self.version = version
        self.expiresIn = expiresIn
        self.password = password
    }

    public func validate() throws {
        if let expiresIn, !(0...Self.maximumSeconds).contains(expiresIn) {
            throw XferError(.badRequest, "expires_in is 0 (until revoked) to \(Self.maximumSeconds) seconds (a year)")
        }
        if let version, version < 1 { throw XferError(.badRequest, "version must be 1 or more") }
        if let password, password.utf8.count > Self.maximumPasswordBytes {
            throw XferError(.badRequest, "the password is longer than \(Self.maximumPasswordBytes) bytes")
        }
    }
}

/// A share link as its owner sees it; `url` only in the answer that made it (the secret is
/// shown once and kept by the server as a hash).
public struct ShareInfo: Codable, Sendable, Hashable {
    public var id: Int64
    public var container: String
    public var path: DocumentPath
    /// The one version it shows (`nil`: whatever is current).
    public var version: Int64?
    public var hasPassword: Bool
    /// Nanoseconds since 1970.
    public var createdAt: Int64
    public var expiresAt: Int64?
    public var expired: Bool
    public var url: String?

    public init(
        id: Int64, container: String, path: DocumentPath, version: Int64?, hasPassword: Bool, createdAt: Int64,
        expiresAt: Int64?, expired: Bool, url: String? = nil
    ) {
        self.id = id
        self.container = container
        self.path = path
        self.version = version
        self.hasPassword = hasPassword
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.expired = expired
        self.url = url
    }
}

/// `GET /v1/containers/{c}/shares`: the account's links in that container, newest first.
public struct ShareList: Codable, Sendable, Hashable {
    public var shares: [ShareInfo]

    public init(shares: [ShareInfo]) { self.shares = shares }
}
