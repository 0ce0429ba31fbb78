import Foundation
import XferCore
import XferProtocol

/// New versions written by the server itself on a client's behalf: the web view's uploads,
/// folders, renames and restores, and WebDAV's PUT, MKCOL, COPY and MOVE. Each is one direct
/// commit under the same metadata rules as a device's (a version based on the one the client
/// saw; a stale base is a conflict, never an overwrite), announced on the change feed.
struct DocumentWriter: Sendable {
    let metadata: any MetadataStore
    let changes: ChangeNotifier

    /// The version a new document at `path` is based on: none if there is none, the deleted
    /// one if it was deleted; a live one is refused when `refusingLive` (a new folder or a
    /// rename never replaces a document), else it is the base (a new version of it).
    func newBase(account: Int64, container: ContainerName, path: DocumentPath, refusingLive: Bool) async throws
        -> Int64?
    {
        let existing: DocumentInfo
        do {
            existing = try await metadata.document(account: account, container: container, path: path, version: nil)
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
        if existing.state == .deleted { return existing.version }
        if refusingLive { throw XferError(.alreadyExists, "\(path.value) already exists; choose another name") }
        return existing.state == .current ? existing.version : nil
    }

    /// Commits `manifest` at `path` as one new version from `device`, with the mode and time
    /// of the version it copies (`like`), or else its manifest's.
    func commit(
        account: Int64, container: ContainerName, path: DocumentPath, _ manifest: Manifest, base: Int64?,
        like copied: DocumentInfo? = nil, device: String
    ) async throws -> DocumentInfo {
        let kind = DocumentKind(manifest.kind)
        let entries = manifest.entries
        let mode = copied?.mode ?? (entries.count == 1 && entries.path(at: 0).isEmpty ? entries.mode(at: 0) : 0o755)
        let mtime = copied?.mtimeNs ?? (entries.isEmpty ? Self.now() : entries.mtimeNanoseconds(at: 0))
        let announce = AnnounceRequest(
            path: path, kind: kind, size: manifest.totalSize, mtimeNs: mtime, mode: mode,
            baseVersion: base, device: device)
        let results = try await metadata.commitDirect(
            account: account, container: container,
            [DirectCommitItem(announce: announce, manifest: manifest, encoded: manifest.encoded())])
        changes.notify(account: account, container: container)
        return try results[0].get()
    }

    /// Deletes the document at `path` from version `base`, announced on the change feed.
    func delete(account: Int64, container: ContainerName, path: DocumentPath, base: Int64) async throws -> DocumentInfo
    {
        let info = try await metadata.delete(account: account, container: container, path: path, baseVersion: base)
        changes.notify(account: account, container: container)
        return info
    }

    /// An empty folder's manifest: a directory document (docs/SYNC.md).
    static func folderManifest() throws -> Manifest {
        try Manifest(
            kind: .directory, chunker: .default,
            entries: [
                Manifest.Entry(path: "", kind: .directory, mode: 0o755, mtimeNanoseconds: now(), chunks: [])
            ])
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000_000_000) }
}
