import XferCore

/// A JSON request body a server reads whole: how large it may be, and what its fields must
/// satisfy beyond their types. The one place a request's size and string-length rules live
/// (docs/PROTOCOL.md, "Limits").
public protocol WireRequest: Decodable {
    /// Bytes of the JSON body; a larger one is refused with `too_large` (413) before it is parsed.
    static var maximumBodyBytes: Int { get }
    /// Checks the fields' lengths and counts.
    /// - Throws: `bad_request` naming the field and its limit (`too_large` for id lists).
    func validate() throws
}

extension WireRequest {
    /// Small bodies: ``ProtocolLimits/maximumSmallJSONBody``.
    public static var maximumBodyBytes: Int { ProtocolLimits.maximumSmallJSONBody }
    /// Nothing beyond the types.
    public func validate() throws {}
}

/// Checks one string field's length.
public enum FieldLimit {
    /// Refuses `value` if longer than `maximumBytes` of UTF-8.
    /// - Parameters:
    ///   - value: The field (`nil` passes).
    ///   - name: Its wire name, for the message.
    ///   - maximumBytes: The limit.
    /// - Throws: `bad_request` naming the field and the limit.
    public static func check(_ value: String?, _ name: String, maximumBytes: Int) throws {
        guard let value, value.utf8.count > maximumBytes else { return }
        throw XferError(.badRequest, "\(name) is \(value.utf8.count) bytes; at most \(maximumBytes) are allowed")
    }
}

extension ProtocolLimits {
    /// Bytes of a JSON body that carries no bulk (accounts, tokens, announce, resolve, gc): 4 MiB.
    public static let maximumSmallJSONBody = 4 << 20
    /// Bytes of a chunk-id list body: ``maximumIDsPerRequest`` ids of 64 hex digits, quoted and
    /// separated (70 bytes each is generous), as many offered references (an id and a reference
    /// each, 140 bytes), plus 4 KiB.
    public static let maximumIDListBody = maximumIDsPerRequest * (70 + 140) + (4 << 10)
    /// Bytes of UTF-8 in a device name (announce, key-value writes).
    public static let maximumDeviceBytes = 128
    /// Bytes of an account name as it arrives (``AccountName`` then checks its characters).
    public static let maximumAccountNameBytes = 64
    /// Bytes of a token as it arrives.
    public static let maximumTokenBytes = 256
}

extension AnnounceRequest: WireRequest {
    public func validate() throws {
        try FieldLimit.check(device, "device", maximumBytes: ProtocolLimits.maximumDeviceBytes)
        guard size >= 0, mode <= 0o7777 else {
            throw XferError(.badRequest, "\(path): size must be ≥ 0 and mode ≤ 7777")
        }
    }
}

extension CommitRequest: WireRequest {
    /// A commit carries its manifest delta in base64: up to ``ProtocolLimits/maximumJSONBody``.
    public static var maximumBodyBytes: Int { ProtocolLimits.maximumJSONBody }

    public func validate() throws {
        try FieldLimit.check(manifestDigest, "manifest_digest", maximumBytes: 64)
    }
}

extension BatchCommitRequest: WireRequest {
    /// ``ProtocolLimits/maximumBatchBody``.
    public static var maximumBodyBytes: Int { ProtocolLimits.maximumBatchBody }

    public func validate() throws {
        guard documents.count <= ProtocolLimits.maximumBatchDocuments else {
            throw XferError(
                .tooLarge, "\(documents.count) documents in one batch; at most \(ProtocolLimits.maximumBatchDocuments)")
        }
        var paths = Set<String>()
        for document in documents {
            try document.announcement.validate()
            try FieldLimit.check(document.manifestDigest, "manifest_digest", maximumBytes: 64)
            guard paths.insert(document.path.value).inserted else {
                throw XferError(
                    .badRequest, "\(document.path) is in the batch twice; a batch commits each document once")
            }
        }
    }
}

extension ManifestBatchRequest: WireRequest {
    public func validate() throws {
        guard documents.count <= ProtocolLimits.maximumBatchDocuments else {
            throw XferError(
                .tooLarge,
                "\(documents.count) documents in one request; at most \(ProtocolLimits.maximumBatchDocuments)")
        }
    }
}

extension ResolveRequest: WireRequest {}

extension ChunkIDList: WireRequest {
    /// ``ProtocolLimits/maximumIDListBody``.
    public static var maximumBodyBytes: Int { ProtocolLimits.maximumIDListBody }

    public func validate() throws {
        guard ids.count <= ProtocolLimits.maximumIDsPerRequest else {
            throw XferError(
                .tooLarge, "\(ids.count) ids in one request; at most \(ProtocolLimits.maximumIDsPerRequest)")
        }
        guard (against?.count ?? 0) <= ids.count else {
            throw XferError(.badRequest, "\(against?.count ?? 0) references offered for \(ids.count) chunks")
        }
    }
}

extension KeyValueWrite: WireRequest {
    /// A server sets its own limit from its store's byte limit; this is the default's.
    public static var maximumBodyBytes: Int { ProtocolLimits.maximumSmallJSONBody }

    public func validate() throws {
        try FieldLimit.check(device, "device", maximumBytes: ProtocolLimits.maximumDeviceBytes)
    }
}

extension CreateAccountRequest: WireRequest {
    public func validate() throws {
        try FieldLimit.check(name, "name", maximumBytes: ProtocolLimits.maximumAccountNameBytes)
    }
}

extension SetQuotaRequest: WireRequest {
    public func validate() throws {
        guard quota >= 0 else { throw XferError(.badRequest, "quota must not be negative") }
    }
}

extension NewTokenRequest: WireRequest {
    public func validate() throws {
        try FieldLimit.check(account, "account", maximumBytes: ProtocolLimits.maximumAccountNameBytes)
        try terms.validate()
    }
}

extension TokenTerms: WireRequest {}

extension RevokeTokenRequest: WireRequest {
    public func validate() throws {
        try FieldLimit.check(token, "token", maximumBytes: ProtocolLimits.maximumTokenBytes)
        try FieldLimit.check(account, "account", maximumBytes: ProtocolLimits.maximumAccountNameBytes)
        try FieldLimit.check(id, "id", maximumBytes: TokenSummary.idLength)
    }
}

extension GarbageRequest: WireRequest {}
