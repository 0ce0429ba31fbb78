import XferCore
import XferProtocol

// Names as this device knows them: in an end-to-end encrypted container the server keeps only sealed paths, and every answer naming a document is opened here before anything is decided from it.
extension Remote {
    /// `info` as this device names it: its sealed path opened, in an end-to-end encrypted container.
    /// - Throws: `corrupt_chunk` if the name does not open under the container's key.
    func named(_ info: DocumentInfo) throws -> DocumentInfo {
        try endToEnd?.opened(info) ?? info
    }

    /// A page of the change feed as this device names it; in an end-to-end encrypted container
    /// a name or entry that does not open under the key (no device holding it wrote it) is left out.
    func named(_ page: ChangeList) -> ChangeList {
        endToEnd?.opened(page) ?? page
    }

    /// Documents of a listing as this device names them, and how many were left out because
    /// their names do not open under the container's key.
    func named(_ documents: [DocumentInfo]) -> (documents: [DocumentInfo], unopened: Int) {
        guard endToEnd != nil else { return (documents, 0) }
        let opened = documents.compactMap { try? named($0) }
        return (opened, documents.count - opened.count)
    }

    /// The seal of a deletion of version `base` at `sealedPath` (``EndToEndKeys/deletionSeal(of:at:)``);
    /// `nil` in a plain container.
    func deletionSeal(_ sealedPath: DocumentPath, base: Int64?) -> String? {
        guard let endToEnd, let base else { return nil }
        return endToEnd.deletionSeal(of: base, at: sealedPath.value)
    }

    /// Runs `body`, and in an end-to-end encrypted container gives an error it throws with
    /// the sealed paths in its message opened (``EndToEndKeys/openingNames(in:)``): what the
    /// server says about a document names it as the user does.
    func naming<T>(_ body: () async throws -> T) async throws -> T {
        guard let endToEnd else { return try await body() }
        do {
            return try await body()
        } catch var error as XferError {
            error.message = endToEnd.openingNames(in: error.message)
            throw error
        }
    }
}

extension ManifestBatchResult.Item {
    /// The version and its manifest, when this answer is for the document at `path` and its
    /// manifest decodes to the digest the server records; `nil` for anything amiss (an error, a
    /// digest that does not match), which the caller leaves to a request of that document's own.
    func checked(for path: DocumentPath) -> (info: DocumentInfo, manifest: Manifest)? {
        guard let info = document, info.path == path, let text = manifest,
            let decoded = try? Manifest(decoding: Base64.decode(text)), info.manifestDigest == decoded.digest.hex
        else { return nil }
        return (info, decoded)
    }
}
