import XferCore

/// The cause of a `conflict` error: the document's version on the server.
public struct ConflictDetail: Error, Sendable, Hashable, CustomStringConvertible {
    /// The server's current version, `nil` if the document has none.
    public var currentVersion: Int64?

    /// Creates a detail.
    public init(currentVersion: Int64?) { self.currentVersion = currentVersion }

    public var description: String { "current version \(currentVersion.map(String.init) ?? "none")" }
}

/// The cause of a `missing_chunks` error: (some of) the chunks the server lacks.
public struct MissingChunksDetail: Error, Sendable, Hashable, CustomStringConvertible {
    /// The missing ids, at most ``limit`` of them.
    public var ids: [ChunkID]
    /// How many ids an error carries at most.
    public static let limit = 1024

    /// Creates a detail.
    public init(ids: [ChunkID]) { self.ids = Array(ids.prefix(Self.limit)) }

    public var description: String { "\(ids.count) missing chunks" }
}

extension XferError {
    /// A `conflict` error for a stale base.
    /// - Parameters:
    ///   - path: The document.
    ///   - current: Its current version on the server.
    ///   - base: The base the request named.
    public static func conflict(path: DocumentPath, current: Int64?, base: Int64?) -> XferError {
        let currentText = current.map { "version \($0)" } ?? "no version"
        let baseText = base.map { "version \($0)" } ?? "no version (a new document)"
        return XferError(
            .conflict,
            "\(path) is at \(currentText) on the server but this change is based on \(baseText); pull it first, or push with --force to replace it",
            cause: ConflictDetail(currentVersion: current))
    }

    /// A `missing_chunks` error.
    /// - Parameter ids: The chunks the account lacks.
    public static func missingChunks(_ ids: [ChunkID]) -> XferError {
        XferError(
            .missingChunks, "the manifest references \(ids.count) chunks the server does not have; upload them first",
            cause: MissingChunksDetail(ids: ids))
    }
}
