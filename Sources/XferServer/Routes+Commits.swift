import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization
import XferCore
import XferProtocol

/// The routes that write documents (announce, commit, a batch of commits) and read manifests in batches.
extension Routes {
    @Sendable func announce(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        var body = try await Self.decode(AnnounceRequest.self, request)
        body.device = target.device(claimed: body.device)
        let info = try await metadata.announce(account: target.accountID, container: container, body)
        changes.notify(account: target.accountID, container: container)
        return Self.json(info, status: .created)
    }

    @Sendable func commit(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(CommitRequest.self, request)
        guard let digest = ChunkID(hex: body.manifestDigest) else {
            throw XferError(.badRequest, "manifest_digest is not 64 hex digits")
        }
        var base: Manifest? = nil
        if let deltaBase = body.deltaBase {
            let stored = try await metadata.manifest(
                account: target.accountID, container: container, path: body.path, version: deltaBase)
            base = try Manifest(decoding: stored.manifest)
        }
        let delta = try Base64.decode(body.manifestDelta)
        if Manifest.isCompressedDelta(delta) && !limits.features.contains(.compressedManifests) {
            throw XferError(
                .invalidManifest,
                "the manifest delta is compressed (XFDZ), which this server does not offer; send it plain")
        }
        let manifest = try Manifest(applying: delta, to: base)
        let encoded = manifest.encoded()
        guard ChunkID.of(encoded) == digest else {
            throw XferError(
                .invalidManifest, "the manifest rebuilt from the delta has digest \(ChunkID.of(encoded)), not \(digest)"
            )
        }
        let info = try await metadata.commit(
            account: target.accountID, container: container, path: body.path,
            version: body.version, baseVersion: body.baseVersion, manifest: manifest, encoded: encoded)
        ServerMetrics.process.counted(info)
        changes.notify(account: target.accountID, container: container)
        return Self.json(info)
    }

    @Sendable func commitBatch(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(BatchCommitRequest.self, request)
        // Each document is checked on its own: one bad manifest fails that document only.
        var outcomes = [BatchCommitResult.Outcome?](repeating: nil, count: body.documents.count)
        var valid: [(index: Int, commit: DirectCommitItem)] = []
        for (index, document) in body.documents.enumerated() {
            do {
                guard let digest = ChunkID(hex: document.manifestDigest) else {
                    throw XferError(.badRequest, "\(document.path): manifest_digest is not 64 hex digits")
                }
                let manifest = try Manifest(decoding: try Base64.decode(document.manifest))
                let encoded = manifest.encoded()
                guard ChunkID.of(encoded) == digest else {
                    throw XferError(
                        .invalidManifest,
                        "\(document.path): the manifest has digest \(ChunkID.of(encoded)), not \(digest)")
                }
                guard DocumentKind(manifest.kind) == document.kind else {
                    throw XferError(
                        .invalidManifest,
                        "\(document.path): a \(document.kind.rawValue) document with a \(manifest.kind) manifest")
                }
                var announce = document.announcement
                announce.device = target.device(claimed: announce.device)
                valid.append(
                    (
                        index,
                        DirectCommitItem(
                            announce: announce, manifest: manifest, encoded: encoded, version: document.version)
                    ))
            } catch {
                outcomes[index] = BatchCommitResult.Outcome(error: ErrorMiddleware.body(for: error).error)
            }
        }
        if !valid.isEmpty {
            let results = try await metadata.commitDirect(
                account: target.accountID, container: container, valid.map(\.commit))
            for (item, result) in zip(valid, results) {
                switch result {
                case .success(let info):
                    ServerMetrics.process.counted(info)
                    outcomes[item.index] = BatchCommitResult.Outcome(document: info)
                case .failure(let error):
                    outcomes[item.index] = BatchCommitResult.Outcome(error: ErrorMiddleware.body(for: error).error)
                }
            }
            changes.notify(account: target.accountID, container: container)
        }
        return Self.json(BatchCommitResult(results: outcomes.map { $0! }))
    }

    @Sendable func manifestBatch(_ request: Request, context: XferRequestContext) async throws -> Response {
        let target = try context.requireTarget()
        let container = target.container
        let body = try await Self.decode(ManifestBatchRequest.self, request)
        // The answer is bounded: past the budget every later document answers `too_large`
        // unread, so one request loads at most one manifest it does not send. All are read in
        // one transaction (on PostgreSQL, 500 transactions of their own took 1.9 s).
        let reads = try await metadata.manifests(
            account: target.accountID, container: container,
            body.documents.map { ($0.path, $0.version) }, budget: ProtocolLimits.maximumBatchBody)
        let items = zip(body.documents, reads).map { wanted, read -> ManifestBatchResult.Item in
            switch read {
            case .manifest(let info, let manifest):
                ManifestBatchResult.Item(document: info, manifest: Base64.encode(manifest))
            case .failed(let error): ManifestBatchResult.Item(error: ErrorMiddleware.body(for: error).error)
            case .overBudget:
                ManifestBatchResult.Item(error: ErrorMiddleware.body(for: Self.overBudget(wanted.path)).error)
            }
        }
        return Self.json(ManifestBatchResult(manifests: items))
    }

    private static func overBudget(_ path: DocumentPath) -> XferError {
        XferError(
            .tooLarge,
            "\(path): the answer is full (\(ByteCount(Int64(ProtocolLimits.maximumBatchBody))) of manifests); ask for it alone"
        )
    }
}
