import ArgumentParser
import XferClient
import XferCore

/// `xfer sync`'s choice of what this device holds (docs/SYNC.md, "Choosing what a device
/// holds"): kept in the folder's state, changed only by these flags, never synced to others.
struct SelectionOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Hold only this folder (repeatable): the rest stays on the server. Replaces an earlier --only.",
            valueName: "PREFIX"))
    var only: [String] = []

    @Option(
        help: ArgumentHelp(
            "Leave this folder or document out on this device (repeatable); never deleted on the server.",
            valueName: "PATH"))
    var excludePath: [String] = []

    @Option(
        help: ArgumentHelp("Take a folder or document left out back in (repeatable).", valueName: "PATH"))
    var includePath: [String] = []

    @Flag(help: "Leave new top-level folders from other devices out until included (--include-path).")
    var noNewFolders = false

    @Flag(help: "Take new top-level folders in again (the default).")
    var newFolders = false

    @Flag(help: "Hold everything again: forget --only, --exclude-path and --no-new-folders.")
    var selectAll = false

    /// Whether any flag changes the selection.
    var changes: Bool {
        !only.isEmpty || !excludePath.isEmpty || !includePath.isEmpty || noNewFolders || newFolders || selectAll
    }

    func validate() throws {
        if noNewFolders && newFolders { throw ValidationError("--no-new-folders and --new-folders exclude each other") }
        if selectAll && (!only.isEmpty || !excludePath.isEmpty || noNewFolders) {
            throw ValidationError(
                "--select-all holds everything; it goes with no --only, --exclude-path or --no-new-folders")
        }
        do {
            for path in only + excludePath + includePath { _ = try SyncSelection.normalized(path) }
        } catch let error as XferError {
            throw ValidationError(error.message)
        }
    }

    /// `selection` with these flags applied: everything first (--select-all), then --only,
    /// the folders left out, those taken back in, and the rule for new folders.
    func applied(to selection: SyncSelection) throws -> SyncSelection {
        var selection = selectAll ? SyncSelection() : selection
        if !only.isEmpty { selection.only = try only.map(SyncSelection.normalized) }
        for path in try excludePath.map(SyncSelection.normalized) { selection.exclude(path) }
        for path in try includePath.map(SyncSelection.normalized) { selection.include(path) }
        if noNewFolders { selection.noNewFolders = true }
        if newFolders { selection.noNewFolders = false }
        return selection
    }
}
