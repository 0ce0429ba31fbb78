import XferCore

// The JSON bodies of the chunk routes (docs/PROTOCOL.md); the chunks themselves travel framed
// (ChunkFrames.swift).

/// `POST /v1/chunks/missing`: which of these chunks does the account lack?
public struct ChunkIDList: Codable, Sendable, Hashable {
    /// Hex chunk ids, at most ``ProtocolLimits/maximumIDsPerRequest``.
    public var ids: [String]

    /// For a download: a chunk the client holds, by the wanted chunk it may be sent against
    /// (``ChunkEncoding/zstdAgainst``; hex ids, keys among ``ids``). The server uses one only if
    /// the account holds it and the result is smaller.
    public var against: [String: String]?

    /// Creates a list.
    /// - Parameters:
    ///   - ids: The chunks.
    ///   - against: For a download, references the client offers, by wanted chunk.
    public init(ids: [ChunkID], against: [ChunkID: ChunkID] = [:]) {
        self.ids = ids.map(\.hex)
        self.against =
            against.isEmpty ? nil : Dictionary(uniqueKeysWithValues: against.map { ($0.key.hex, $0.value.hex) })
    }

    /// The offered references, parsed.
    /// - Throws: `bad_request` for an id that is not 64 hex digits or a reference for a chunk
    ///   not asked for (``validate()`` refuses more references than ids).
    public func parsedAgainst(ids wanted: [ChunkID]) throws -> [ChunkID: ChunkID] {
        guard let against, !against.isEmpty else { return [:] }
        let asked = Set(wanted)
        var result: [ChunkID: ChunkID] = [:]
        for (key, value) in against {
            guard let id = ChunkID(hex: key), let reference = ChunkID(hex: value) else {
                throw XferError(
                    .badRequest,
                    "\"\(key.prefix(80))\": \"\(value.prefix(80))\" is not a pair of chunk ids (64 hex digits)")
            }
            guard asked.contains(id) else {
                throw XferError(.badRequest, "a reference is offered for chunk \(id), which is not asked for")
            }
            result[id] = reference
        }
        return result
    }

    /// The ids, parsed.
    /// - Throws: `bad_request` for anything but 64 hex digits.
    public func parsed() throws -> [ChunkID] {
        try ids.map { text in
            guard let id = ChunkID(hex: text) else {
                throw XferError(.badRequest, "\"\(text.prefix(80))\" is not a chunk id (64 hex digits)")
            }
            return id
        }
    }
}

/// The answer to `POST /v1/chunks`: how the upload went.
public struct UploadResult: Codable, Sendable, Hashable {
    /// Chunks in the body.
    public var received: Int
    /// Chunks newly stored for the account.
    public var stored: Int
    /// Plain bytes newly stored.
    public var storedBytes: Int64
    /// Chunks sent against a reference (``ChunkEncoding/zstdAgainst``) that were not stored:
    /// the account does not hold the reference, or they did not decode. Send them whole.
    public var unresolved: [String]?

    /// Creates a result.
    public init(received: Int, stored: Int, storedBytes: Int64, unresolved: [ChunkID] = []) {
        self.received = received
        self.stored = stored
        self.storedBytes = storedBytes
        self.unresolved = unresolved.isEmpty ? nil : unresolved.map(\.hex)
    }
}
