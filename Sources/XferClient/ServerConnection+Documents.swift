import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XferCore
import XferProtocol

/// The document routes: announce and commit, stat, list, search, delete, manifests, the change
/// feed, a container's key-value store and key.
extension ServerConnection {
    /// Records a pending version before any data moves.
    public func announce(container: ContainerName, _ request: AnnounceRequest) async throws -> DocumentInfo {
        try await json(
            DocumentInfo.self, "POST", "/v1/containers/\(container.pathSegment)/announce",
            body: WireJSON.encode(request))
    }

    /// Commits an announced version.
    public func commit(container: ContainerName, _ request: CommitRequest) async throws -> DocumentInfo {
        try await commit(container: container, body: SpillArray(WireJSON.encode(request)))
    }

    /// Makes an announced version current, from a ``CommitRequest``'s JSON made beforehand
    /// (``CommitRequest/body(delta:)``).
    public func commit(container: ContainerName, body: SpillArray<UInt8>) async throws -> DocumentInfo {
        try await json(DocumentInfo.self, "POST", "/v1/containers/\(container.pathSegment)/commit", body: body)
    }

    /// Commits many documents in one request (their chunks uploaded first); one outcome per
    /// document, in order.
    public func commit(container: ContainerName, batch: BatchCommitRequest) async throws -> [BatchCommitResult.Outcome]
    {
        let answer = try await json(
            BatchCommitResult.self, "POST", "/v1/containers/\(container.pathSegment)/commits",
            body: WireJSON.encode(batch))
        guard answer.results.count == batch.documents.count else {
            throw XferError(
                .internal,
                "the server answered \(answer.results.count) outcomes for a batch of \(batch.documents.count)")
        }
        return answer.results
    }

    /// The manifests of many documents in one request; one item per document, in order.
    public func manifests(container: ContainerName, _ wanted: [ManifestBatchRequest.Wanted]) async throws
        -> [ManifestBatchResult.Item]
    {
        let answer = try await json(
            ManifestBatchResult.self, "POST", "/v1/containers/\(container.pathSegment)/manifests",
            body: WireJSON.encode(ManifestBatchRequest(documents: wanted)))
        guard answer.manifests.count == wanted.count else {
            throw XferError(
                .internal, "the server answered \(answer.manifests.count) manifests for \(wanted.count) documents")
        }
        return answer.manifests
    }

    /// A document's newest state, or one version of it.
    public func stat(container: ContainerName, path: DocumentPath, version: Int64? = nil) async throws -> DocumentInfo {
        var route = "/v1/containers/\(container.pathSegment)/document?path=\(Self.escape(path.value))"
        if let version { route += "&version=\(version)" }
        return try await json(DocumentInfo.self, "GET", route)
    }

    /// One version of a document as the server keeps it, or `nil` if it keeps no such version
    /// (`not_found`); any other failure is thrown, never taken for an answer.
    public func statIfKept(container: ContainerName, path: DocumentPath, version: Int64) async throws -> DocumentInfo? {
        do {
            return try await stat(container: container, path: path, version: version)
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
    }

    /// Every version the server keeps of a document, newest first.
    public func versions(container: ContainerName, path: DocumentPath) async throws -> VersionList {
        try await json(
            VersionList.self, "GET", "/v1/containers/\(container.pathSegment)/versions?path=\(Self.escape(path.value))")
    }

    /// Settles a document's conflict: `keep` becomes current.
    public func resolve(container: ContainerName, _ request: ResolveRequest) async throws -> DocumentInfo {
        try await json(
            DocumentInfo.self, "POST", "/v1/containers/\(container.pathSegment)/resolve", body: WireJSON.encode(request)
        )
    }

    /// Sets (or, with a `nil` value, deletes) a key-value entry; last writer wins.
    public func setValue(container: ContainerName, _ write: KeyValueWrite) async throws -> KeyValueWriteResult {
        try await json(
            KeyValueWriteResult.self, "PUT", "/v1/containers/\(container.pathSegment)/kv", body: WireJSON.encode(write))
    }

    /// Whether a container is end-to-end encrypted, and its wrapped key.
    public func containerKey(container: ContainerName) async throws -> ContainerKeyInfo {
        try await json(ContainerKeyInfo.self, "GET", "/v1/containers/\(container.pathSegment)/key")
    }

    /// Makes a container end-to-end encrypted, or replaces its wrapped key.
    public func setContainerKey(container: ContainerName, _ write: ContainerKeyWrite) async throws -> ContainerKeyInfo {
        try await json(
            ContainerKeyInfo.self, "PUT", "/v1/containers/\(container.pathSegment)/key", body: WireJSON.encode(write))
    }

    /// One key-value entry.
    public func value(container: ContainerName, key: String) async throws -> KeyValueEntry {
        try await json(KeyValueEntry.self, "GET", "/v1/containers/\(container.pathSegment)/kv?key=\(Self.escape(key))")
    }

    /// Every live key-value entry.
    public func values(container: ContainerName) async throws -> KeyValueList {
        try await json(KeyValueList.self, "GET", "/v1/containers/\(container.pathSegment)/kv")
    }

    /// Documents under a prefix.
    public func list(container: ContainerName, prefix: String) async throws -> DocumentList {
        var all = try await listPage(container: container, prefix: prefix, page: nil)
        var next = all.next
        while all.more {
            // A server that says "more" must move on: a repeated or missing token is refused,
            // so a listing is either complete or an error, never silently partial.
            guard let token = next else {
                throw XferError(.unavailable, "the server said more documents follow but gave no page token")
            }
            let page = try await listPage(container: container, prefix: prefix, page: token)
            guard
                page.documents.first.map({
                    $0.path.value.utf8.lexicographicallyPrecedes(token.utf8) == false && $0.path.value != token
                }) ?? true,
                !page.more || (page.next.map { $0 != token } ?? false)
            else {
                throw XferError(
                    .unavailable,
                    "the server's listing pages do not advance; the listing is incomplete, so nothing was decided from it"
                )
            }
            all.documents += page.documents
            all.more = page.more
            next = page.next
        }
        all.next = nil
        return all
    }

    /// One page of a listing (``list(container:prefix:)`` reads them all).
    /// - Parameter page: The previous page's `next`, or `nil` for the first.
    public func listPage(container: ContainerName, prefix: String, page: String?) async throws -> DocumentList {
        var route = "/v1/containers/\(container.pathSegment)/documents?prefix=\(Self.escape(prefix))"
        if let page { route += "&page=\(Self.escape(page))" }
        return try await json(DocumentList.self, "GET", route)
    }

    /// One page of a search (``DocumentQuery``), at most `limit` documents (the server may
    /// give fewer, and fewer than asked with `more` set when most of what it read did not match).
    /// - Parameter page: The previous page's `next`, or `nil` for the first.
    public func query(container: ContainerName, _ query: DocumentQuery, page: String?, limit: Int? = nil) async throws
        -> DocumentList
    {
        var items = query.parameters
        if let limit { items.append(("limit", String(limit))) }
        if let page { items.append(("page", page)) }
        let route =
            "/v1/containers/\(container.pathSegment)/query"
            + (items.isEmpty ? "" : "?" + items.map { "\($0.0)=\(Self.escape($0.1))" }.joined(separator: "&"))
        return try await json(DocumentList.self, "GET", route)
    }

    /// Deletes a document. `seal`: an end-to-end encrypted container's deletion seal
    /// (``EndToEndKeys/deletionSeal(of:at:)``), which such a container requires.
    public func delete(container: ContainerName, path: DocumentPath, baseVersion: Int64?, seal: String? = nil)
        async throws -> DocumentInfo
    {
        var route = "/v1/containers/\(container.pathSegment)/document?path=\(Self.escape(path.value))"
        if let baseVersion { route += "&base_version=\(baseVersion)" }
        if let seal { route += "&seal=\(seal)" }
        return try await json(DocumentInfo.self, "DELETE", route)
    }

    /// A manifest: the current version's (or `version`'s), as a delta against `base` when the
    /// server still has that version.
    /// - Returns: The delta bytes, the version they describe, the base they are against (or
    ///   `nil`: against nothing) and the full manifest's digest.
    public func manifest(container: ContainerName, path: DocumentPath, version: Int64?, base: Int64?) async throws
        -> (delta: SpillArray<UInt8>, version: Int64, base: Int64?, digest: ChunkID)
    {
        var route = "/v1/containers/\(container.pathSegment)/manifest?path=\(Self.escape(path.value))&compressed=1"
        if let version { route += "&version=\(version)" }
        if let base { route += "&base=\(base)" }
        let response = try await respond("GET", route) { try makeRequest("GET", route) }
        guard (200..<300).contains(response.status.code) else { throw try await Self.error(from: response) }
        // Read into a spilled array as it comes (a tree's delta is megabytes), at most the
        // largest a manifest may be.
        var body = SpillArray<UInt8>()
        try await reading {
            for try await part in response.body {
                guard body.count + part.readableBytes <= Manifest.maximumEncodedSize else {
                    throw XferError(
                        .tooLarge, "the server's manifest answer is over \(Manifest.maximumEncodedSize) bytes")
                }
                part.withUnsafeReadableBytes { body.append(contentsOf: $0) }
            }
        }
        guard let versionText = response.headers.first(name: XferHeader.version), let number = Int64(versionText),
            let digestText = response.headers.first(name: XferHeader.digest), let digest = ChunkID(hex: digestText)
        else {
            throw XferError(.internal, "the server's manifest answer lacks its version or digest headers")
        }
        let baseUsed = response.headers.first(name: XferHeader.base).flatMap { Int64($0) }
        return (body, number, baseUsed, digest)
    }

    /// Changes after a cursor, waiting up to `wait` seconds for one if there is none.
    public func changes(container: ContainerName, after: Int64, wait: Int = 0, limit: Int? = nil) async throws
        -> ChangeList
    {
        try await json(
            ChangeList.self, "GET",
            "/v1/containers/\(container.pathSegment)/changes?after=\(after)&wait=\(wait)\(limit.map { "&limit=\($0)" } ?? "")"
        )
    }

    /// The container's change-feed position now: a feed read from it sees only what is still
    /// to come. 0 from a server that does not say (its feed is then read from the beginning).
    public func head(container: ContainerName) async throws -> Int64 {
        try await changes(container: container, after: 0, limit: 1).head ?? 0
    }
}
