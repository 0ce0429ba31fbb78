import Foundation
import XferCore
import XferProtocol

/// Which of the container's documents this device holds (docs/SYNC.md, "Choosing what a device
/// holds"): kept in the directory's own state, never sent to the server or to other devices. A
/// document left out is never downloaded and never deleted anywhere on that account; a local
/// copy left out is moved to the trash only once every byte of it is on the server.
public struct SyncSelection: Codable, Sendable, Hashable {
    /// Folders (or documents) to hold, and nothing else; empty: everything.
    public var only: [String] = []
    /// Folders (or documents) left out.
    public var excluded: [String] = []
    /// Top-level folders from other devices stay out until included.
    public var noNewFolders = false
    /// With ``noNewFolders``: the top-level folders this device holds (taken in as they appear
    /// here, or included by name).
    public var folders: [String] = []
    /// Documents made on this device inside what it leaves out (a file saved or moved there):
    /// held and synced, so nothing written here stays off the server.
    public var kept: [String] = []

    public init() {}

    /// Everything: the default.
    public var isEverything: Bool { only.isEmpty && excluded.isEmpty && !noNewFolders }

    private enum CodingKeys: String, CodingKey { case only, excluded, noNewFolders, folders, kept }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        only = try values.decodeIfPresent([String].self, forKey: .only) ?? []
        excluded = try values.decodeIfPresent([String].self, forKey: .excluded) ?? []
        noNewFolders = try values.decodeIfPresent(Bool.self, forKey: .noNewFolders) ?? false
        folders = try values.decodeIfPresent([String].self, forKey: .folders) ?? []
        kept = try values.decodeIfPresent([String].self, forKey: .kept) ?? []
    }

    /// Whether the device holds `path`. A directory above a folder it holds is held too (its
    /// mode travels with it; removing it would take what is held inside).
    public func includes(_ path: String, isDirectory: Bool) -> Bool {
        if kept.contains(path) { return true }
        if excluded.contains(where: { Self.isUnder(path, $0) }) { return false }
        if !only.isEmpty, !only.contains(where: { Self.isUnder(path, $0) }),
            !(isDirectory && only.contains { $0.hasPrefix(path + "/") })
        {
            return false
        }
        if noNewFolders, let top = Self.folder(of: path, isDirectory: isDirectory), !folders.contains(top) {
            return false
        }
        return true
    }

    /// The top-level folder `path` lies in (itself for a top-level directory), or `nil` for a
    /// document at the top.
    static func folder(of path: String, isDirectory: Bool) -> String? {
        if let slash = path.firstIndex(of: "/") { return String(path[..<slash]) }
        return isDirectory ? path : nil
    }

    static func isUnder(_ path: String, _ prefix: String) -> Bool {
        path == prefix || path.hasPrefix(prefix + "/")
    }

    /// Takes `path` in: out of ``excluded`` (with what lies below it), into ``only`` when that
    /// is in use, and into ``folders``.
    public mutating func include(_ path: String) {
        excluded.removeAll { Self.isUnder($0, path) || Self.isUnder(path, $0) }
        if !only.isEmpty, !only.contains(where: { Self.isUnder(path, $0) }) { only.append(path) }
        if let top = Self.folder(of: path, isDirectory: true), !folders.contains(top) { folders.append(top) }
    }

    /// Leaves `path` out.
    public mutating func exclude(_ path: String) {
        guard !excluded.contains(where: { Self.isUnder(path, $0) }) else { return }
        excluded.removeAll { Self.isUnder($0, path) }
        excluded.append(path)
    }

    /// A folder or document path as the selection keeps it: relative, `/`-separated, no
    /// trailing slash, a valid document path.
    /// - Throws: `invalid_path` for anything else.
    public static func normalized(_ raw: String) throws -> String {
        let trimmed = raw.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
        return try DocumentPath(trimmed).value
    }
}

extension SyncState {
    /// This directory's selection (everything when none was set).
    public func selection() throws -> SyncSelection {
        guard let text = try meta("selection") else { return SyncSelection() }
        return try JSONDecoder().decode(SyncSelection.self, from: Data(text.utf8))
    }

    /// Keeps `selection` for this directory; the next pass plans every document again (a
    /// settled pass's shortcut would not see what the new selection takes in or leaves out).
    public func setSelection(_ selection: SyncSelection) throws {
        guard try self.selection() != selection else { return }
        try setMeta("selection", String(decoding: try JSONEncoder().encode(selection), as: UTF8.self))
        try setMeta(SyncDirectory.settledKey, "")
    }
}
