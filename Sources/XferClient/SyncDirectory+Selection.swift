import Foundation
import XferCore
import XferProtocol

// What this device holds (``SyncSelection``, docs/SYNC.md "Choosing what a device holds"): the
// rule for a document left out, apart from the decision table.
extension SyncDirectory {
    /// The directory's selection for a pass. A document made here (on disk, never synced)
    /// inside what the selection leaves out is kept (``SyncSelection/kept``): it was written on
    /// this device, so it is synced. With ``SyncSelection/noNewFolders``, every top-level folder
    /// the device holds now (on disk or recorded) is taken in, so only folders that first
    /// appear on the server stay out.
    func passSelection(local: [String: LocalDocument], records: [String: SyncRecord]) throws -> SyncSelection {
        let chosen = try options.selection ?? state.selection()
        guard !chosen.isEverything else { return chosen }
        var selection = chosen
        for (key, document) in local where records[key] == nil {
            if !selection.includes(key, isDirectory: document.kind == .directory) { selection.kept.append(key) }
        }
        if selection.noNewFolders {
            let held = local.map { ($0.key, $0.value.kind) } + records.map { ($0.key, $0.value.kind) }
            let tops = Set(held.compactMap { SyncSelection.folder(of: $0.0, isDirectory: $0.1 == .directory) })
            selection.folders = Set(selection.folders).union(tops).sorted()
        }
        if selection != chosen, options.selection == nil { try state.setSelection(selection) }
        return selection
    }

    /// What becomes of a document the selection leaves out, given what the decision table
    /// chose (`decided`). Nothing is downloaded and nothing is deleted on the server: a record
    /// without a local copy is forgotten; a copy with changes the server lacks sends them
    /// first; an unchanged copy of the server's current version goes to the trash (a
    /// directory, once empty). (A copy made here is kept in the selection, ``passSelection``.)
    static func leftOut(
        _ decided: (Action, DocumentSyncState), local: Bool, changed: Bool, synced: Int64?, remote: DocumentInfo?,
        isDirectory: Bool
    ) -> (Action, DocumentSyncState) {
        guard local, let synced else { return (synced == nil ? .none : .forget, .excluded) }
        if changed { return decided.0 == .push ? decided : (.none, .excluded) }
        if isDirectory { return (.exclude, .excluded) }
        guard let remote, remote.state == .current, remote.version == synced else { return (.none, .excluded) }
        return (.exclude, .excluded)
    }
}
