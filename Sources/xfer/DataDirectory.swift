import ArgumentParser
import Foundation
import Logging
import XferClient
import XferCore
import XferProtocol
import XferServer

// What every command that opens a server's data directory shares.

/// Files a data-directory command creates are the server user's alone (umask 077): the
/// metadata, chunks and tokens are nobody else's business.
func restrictFileModes() {
    umask(0o077)
}

/// The keys that seal a server's data at rest, for `serve` and every command that opens a
/// data directory (`--data`): they all need the same keys.
struct SealingOptions: ParsableArguments {
    @Option(
        name: .customLong("encryption-key"),
        help: ArgumentHelp(
            """
            Seal chunks and manifests at rest with the keys in FILE (64 hex digits a line, mode 0600; make one with \
            `xfer server-key new FILE`). Repeatable: the first key seals new data, every key opens what it sealed. \
            The keys in XFER_ENCRYPTION_KEY come after those of the files. A data directory with sealed data refuses to \
            open without its keys.
            """, valueName: "FILE"))
    var encryptionKeys: [String] = []

    /// The keys of the files, then of XFER_ENCRYPTION_KEY; `nil` if none.
    func keys() throws -> SealingKeys? {
        try SealingKeys.load(
            files: encryptionKeys, environment: ProcessInfo.processInfo.environment["XFER_ENCRYPTION_KEY"])
    }
}

/// Opens a server's data directory for maintenance, refusing to create one where there is none.
func openExistingData(_ directory: String, sealing: SealingOptions) async throws -> ServerData {
    guard FileManager.default.fileExists(atPath: directory + "/metadata.sqlite") else {
        throw XferError(.notFound, "\(directory) is not an xfer data directory (no metadata.sqlite)")
    }
    let layout = try StoreLayout.recorded(in: directory)
    guard layout.isEmbedded else {
        let stores = [
            layout.metadataElsewhere ? "metadata in PostgreSQL" : nil, layout.chunksElsewhere ? "chunks in S3" : nil
        ]
        .compactMap { $0 }.joined(separator: " and ")
        throw XferError(
            .invalidConfiguration,
            """
            \(directory) is served with its \(stores) (recorded in \(directory)/stores), which --data cannot reach; \
            nothing was changed. Ask the server instead (--server URL with the admin token); if the server now keeps \
            everything in \(directory), remove \(directory)/stores first
            """)
    }
    restrictFileModes()
    return reportMigration(try await ServerData.open(directory, sealing: try sealing.keys(), use: .maintain))

}

/// Says on stderr what opening a data directory moved from the one-file-per-chunk layout of
/// earlier versions into packs, and which damaged files it left.
@discardableResult
func reportMigration(_ data: ServerData) -> ServerData {
    if data.migratedChunkFiles > 0 {
        printError("moved \(data.migratedChunkFiles) chunk files from \(data.directory)/chunks into packs")
    }
    for path in data.damagedChunkFiles.prefix(20) {
        printError("warning: left the damaged chunk file \(path) in place; `xfer verify` reports what it held")
    }
    if data.damagedChunkFiles.count > 20 {
        printError("warning: … and \(data.damagedChunkFiles.count - 20) more damaged chunk files")
    }
    return data
}
