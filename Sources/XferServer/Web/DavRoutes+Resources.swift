import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import XferCore
import XferDav
import XferProtocol

/// What a path names (a file, a folder, a package or its contents, the root) and the paths WebDAV shows.
extension DavRoutes {
    /// What a path names.
    enum Resource {
        /// The scope's root.
        case root
        /// A folder: documents below `prefix` (ending in `/`), and or a directory document.
        case folder(prefix: String, document: DocumentInfo?)
        /// A file document.
        case file(DocumentInfo)
        /// A package, or a folder inside one (`entry` its path there, empty for the package itself).
        case packageFolder(DocumentInfo, Manifest, entry: String)
        /// A file inside a package.
        case packageFile(DocumentInfo, Manifest, index: Int)

        var isCollection: Bool {
            switch self {
            case .root, .folder, .packageFolder: return true
            case .file, .packageFile: return false
            }
        }
    }

    static func documentPath(_ relative: String) throws -> DocumentPath { try DocumentPath(scope + relative) }

    // Paths are split, compared and cut on their UTF-8 bytes, never on Characters: a component
    // may begin with a combining mark, which a Character comparison would join to the "/".

    /// The `/`-separated components of a path.
    static func components(_ path: some StringProtocol) -> [String] {
        path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Whether `path` lies strictly below the folder `ancestor` (`ancestor/…`).
    static func isBelow(_ path: String, _ ancestor: String) -> Bool {
        path.utf8.starts(with: (ancestor + "/").utf8)
    }

    /// `path` without its leading `prefix` (which it must start with).
    static func strip(_ prefix: String, from path: String) -> String {
        String(decoding: path.utf8.dropFirst(prefix.utf8.count), as: UTF8.self)
    }

    /// The live document at `path`, if any.
    func live(_ target: Target, _ path: DocumentPath) async throws -> DocumentInfo? {
        do {
            let info = try await metadata.document(
                account: target.account, container: target.container, path: path, version: nil)
            return info.state == .current ? info : nil
        } catch let error as XferError where error.code == .notFound {
            return nil
        }
    }

    /// Whether any live document lies below `prefix`.
    func hasDocuments(_ target: Target, below prefix: String) async throws -> Bool {
        var after: String? = nil
        for _ in 0..<(Self.maximumTreeDocuments / 100) {
            let page = try await metadata.list(
                account: target.account, container: target.container, prefix: prefix, after: after, limit: 100)
            if page.documents.contains(where: { $0.state == .current }) { return true }
            guard page.more, let last = page.documents.last else { return false }
            after = last.path.value
        }
        return false
    }

    /// What `relative` names, or `nil` for nothing.
    func resource(_ target: Target, _ relative: String) async throws -> Resource? {
        if relative.isEmpty { return .root }
        let path = try Self.documentPath(relative)
        if let info = try await live(target, path) {
            switch info.kind {
            case .file: return .file(info)
            case .directory: return .folder(prefix: path.value + "/", document: info)
            case .package:
                let stored = try await metadata.manifest(
                    account: target.account, container: target.container, path: path, version: info.version)
                return .packageFolder(info, try Manifest(decoding: stored.manifest), entry: "")
            }
        }
        if try await hasDocuments(target, below: path.value + "/") {
            return .folder(prefix: path.value + "/", document: nil)
        }
        // Inside a package: the nearest ancestor that is one.
        var components = Self.components(relative)
        var inner: [String] = []
        while components.count > 1 {
            inner.insert(components.removeLast(), at: 0)
            let ancestor = try Self.documentPath(components.joined(separator: "/"))
            guard let info = try await live(target, ancestor) else { continue }
            guard info.kind == .package else { return nil }
            let stored = try await metadata.manifest(
                account: target.account, container: target.container, path: ancestor, version: info.version)
            let manifest = try Manifest(decoding: stored.manifest)
            let entryPath = inner.joined(separator: "/")
            let entries = manifest.entries
            for index in 0..<entries.count where entries.path(at: index) == entryPath {
                return entries.kind(at: index) == .directory
                    ? .packageFolder(info, manifest, entry: entryPath) : .packageFile(info, manifest, index: index)
            }
            return nil
        }
        return nil
    }

    /// The folder a new document at `relative` goes into must exist and be writable.
    func requireWritableParent(_ target: Target, _ relative: String) async throws {
        let parent = Self.components(relative).dropLast().joined(separator: "/")
        switch try await resource(target, parent) {
        case .root?, .folder?: return
        case .packageFolder?, .packageFile?:
            throw DavStatus(
                status: .forbidden, message: "a package is written whole by a device; its contents are read only here")
        case .file?, nil:
            throw DavStatus(status: .conflict, message: "the folder \(parent) does not exist; make it first (MKCOL)")
        }
    }
}
