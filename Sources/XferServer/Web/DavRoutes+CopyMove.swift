import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// COPY and MOVE: the same manifests committed under the new names (no chunk is copied).
extension DavRoutes {
    /// What a COPY or MOVE asks for, once its headers hold.
    struct CopyRequest {
        /// Where it goes.
        var destination: Target
        /// Whether what is at the destination may be replaced (`Overwrite` is not `F`).
        var overwrite: Bool
        /// Whether a folder goes with what lies below it (`Depth: infinity`, the default).
        var deep: Bool
    }

    /// One thing a COPY or MOVE does, in order.
    enum CopyStep: Equatable {
        /// Commit the manifest of `info` at `relative` (a new version on whatever is there).
        case place(DocumentInfo, at: String)
        /// Commit an empty folder's directory document at `relative`.
        case newFolder(at: String)
        /// Delete the source document (a move).
        case delete(DocumentInfo)
    }

    /// Reads a COPY or MOVE's `Destination`, `Overwrite` and `Depth` headers and checks them against
    /// the source `target`: one container, neither the root, not onto itself, nor into or over a
    /// folder holding the other.
    /// - Throws: ``DavStatus`` with 400, 403 or 502.
    static func copyRequest(
        _ target: Target, destination header: String?, overwrite: String?, depth: String?, move: Bool
    ) throws -> CopyRequest {
        guard let header else {
            throw DavStatus(status: .badRequest, message: "\(move ? "MOVE" : "COPY") needs a Destination header")
        }
        var destination = try Self.target(Self.path(ofURL: header), account: target.account)
        guard destination.named == target.named else {
            throw DavStatus(status: .badGateway, message: "copies and moves stay in one container")
        }
        destination.container = target.container
        let depth = depth?.lowercased() ?? "infinity"
        guard depth == "0" || depth == "infinity" else {
            throw DavStatus(status: .badRequest, message: "a COPY or MOVE has Depth 0 or infinity")
        }
        guard !target.relative.isEmpty, !destination.relative.isEmpty else {
            throw DavStatus(status: .forbidden, message: "the container's root is not copied or moved")
        }
        guard destination.relative != target.relative else {
            throw DavStatus(status: .forbidden, message: "the source and the destination are the same")
        }
        guard !Self.isBelow(destination.relative, target.relative) else {
            throw DavStatus(status: .forbidden, message: "a folder cannot be copied or moved into itself")
        }
        // Nor onto a folder it lies in: overwriting that folder would delete the source first.
        guard !Self.isBelow(target.relative, destination.relative) else {
            throw DavStatus(
                status: .forbidden,
                message: "\(target.relative) lies in \(destination.relative); it cannot replace a folder that holds it")
        }
        return CopyRequest(destination: destination, overwrite: overwrite?.uppercased() != "F", deep: depth != "0")
    }

    /// A package's contents are read only here: only a file, a folder or a whole package is copied.
    static func requireCopyable(_ source: Resource) throws {
        if case .packageFile = source {
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here; copy the package")
        }
        if case .packageFolder(_, _, let entry) = source, !entry.isEmpty {
            throw DavStatus(status: .forbidden, message: "a package's contents are read only here; copy the package")
        }
    }

    /// What placing `source` at `destination` does: its documents (`documents`, those below a
    /// folder) committed under the new names, a folder without a directory document or anything
    /// below it made a new empty one, and with `move` the sources deleted after.
    static func copySteps(_ source: Resource, documents: [DocumentInfo], to destination: String, move: Bool) throws
        -> [CopyStep]
    {
        switch source {
        case .file(let info), .packageFolder(let info, _, _):
            return [.place(info, at: destination)] + (move ? [.delete(info)] : [])
        case .folder(let prefix, let document):
            _ = try Self.documentPath(destination)
            // The folder itself: its directory document, or a new one (an empty folder stays one).
            var steps: [CopyStep] = []
            if let document {
                steps.append(.place(document, at: destination))
            } else if documents.isEmpty {
                steps.append(.newFolder(at: destination))
            }
            for info in documents {
                steps.append(.place(info, at: destination + "/" + Self.strip(prefix, from: info.path.value)))
            }
            if move {
                steps += documents.map { .delete($0) }
                if let document { steps.append(.delete(document)) }
            }
            return steps
        case .root, .packageFile:
            throw DavStatus(status: .forbidden, message: "this cannot be copied or moved")
        }
    }

    func copy(_ request: Request, _ target: Target, move: Bool) async throws -> Response {
        let asked = try Self.copyRequest(
            target, destination: request.headers[HTTPField.Name("Destination")!],
            overwrite: request.headers[HTTPField.Name("Overwrite")!], depth: request.headers[HTTPField.Name("Depth")!],
            move: move)
        let destination = asked.destination
        guard let source = try await resource(target, target.relative) else {
            throw DavStatus(status: .notFound, message: "no such file or folder")
        }
        try Self.requireCopyable(source)
        try await requireWritableParent(destination, destination.relative)
        try await checkWrite(
            request, target,
            [Change(relative: destination.relative, below: true, member: true)]
                + (move ? [Change(relative: target.relative, below: true, member: true)] : []))
        // What is to be placed is read, and bounded, before anything at the destination goes.
        var documents: [DocumentInfo] = []
        if case .folder(let prefix, _) = source, asked.deep || move { documents = try await tree(target, prefix) }
        let existing = try await resource(destination, destination.relative)
        if let existing {
            guard asked.overwrite else {
                throw DavStatus(
                    status: .preconditionFailed, message: "\(destination.relative) exists and Overwrite is F")
            }
            // A file replaced by a file is a new version of it; anything else goes first.
            if case .file = existing, !source.isCollection {} else { try await remove(destination, existing) }
        }
        // Dead properties go with what they describe (the destination's own are replaced): moved
        // (or copied) before a move deletes the source, which would take them with it. Moved,
        // they are never counted twice against the container's bounds.
        try await metadata.copyDeadProperties(
            account: target.account, container: target.container, from: Self.propertyPath(target.relative),
            to: Self.propertyPath(destination.relative), move: move)
        for step in try Self.copySteps(source, documents: documents, to: destination.relative, move: move) {
            try await perform(step, target)
        }
        // Locks stay on their URLs: a moved source's go (RFC 4918 §9.9.4), a copy takes none.
        if move {
            try await metadata.releaseDavLocks(
                account: target.account, container: target.container, below: Self.propertyPath(target.relative))
        }
        return Response(status: existing == nil ? .created : .noContent, headers: [.contentLength: "0"])
    }

    /// Does one step of a COPY or MOVE in the container of `target`, as its device.
    func perform(_ step: CopyStep, _ target: Target) async throws {
        let account = target.account
        let container = target.container
        switch step {
        case .place(let info, let relative):
            let stored = try await metadata.manifest(
                account: account, container: container, path: info.path, version: info.version)
            let path = try Self.documentPath(relative)
            let base = try await writer.newBase(account: account, container: container, path: path, refusingLive: false)
            _ = try await writer.commit(
                account: account, container: container, path: path, try Manifest(decoding: stored.manifest),
                base: base, like: info, device: target.device)
        case .newFolder(let relative):
            let folder = try Self.documentPath(relative)
            _ = try await writer.commit(
                account: account, container: container, path: folder, try DocumentWriter.folderManifest(),
                base: try await writer.newBase(
                    account: account, container: container, path: folder, refusingLive: false),
                device: target.device)
        case .delete(let info):
            _ = try await writer.delete(account: account, container: container, path: info.path, base: info.version)
        }
    }
}
