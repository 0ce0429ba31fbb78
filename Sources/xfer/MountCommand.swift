import ArgumentParser
import Foundation
import XferClient
import XferCore
import XferMount
import XferProtocol

/// `xfer mount DIR`: the container as a directory, its documents' data downloaded as it is
/// read; `xfer mount pin|unpin|status`: what this device keeps.
struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Show a container as a directory; each document's data is downloaded only when it is read.",
        usage: """
            xfer mount DIR [--cache-size SIZE] [-o OPTION]… [client options]
            xfer mount pin|unpin NAME…
            xfer mount status [PREFIX]
            """,
        discussion: """
            `xfer mount DIR` mounts (the `run` subcommand, see `xfer mount run --help`) and stays \
            in the foreground until Ctrl-C, SIGTERM or `fusermount3 -u DIR`. `pin` keeps documents \
            on this device, `status` shows what is where. See docs/MOUNT.md.
            """,
        subcommands: [Run.self, Pin.self, Unpin.self, MountStatus.self],
        defaultSubcommand: Run.self)
}

/// The on-disk chunk cache of a state directory, shared by mounts and pins.
func chunkCache(_ remote: Remote, bytes: Int64 = 1 << 30) throws -> SegmentChunkCache {
    try SegmentChunkCache(directory: remote.stateDirectory + "/chunk-cache", maximumBytes: bytes)
}

extension MountCommand {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "run",
            abstract: "Mount a container on DIR (what `xfer mount DIR` does).",
            discussion: """
                Every document is listed at once (names, sizes, modes and times need no download); \
                reading a file fetches only the chunks that cover what is read, checks each against \
                its id, and keeps it in an on-disk cache of at most --cache-size (least recently \
                used out first). A file open when a newer version arrives keeps reading the \
                version it opened; other devices' changes show within a second. A file written \
                here is uploaded as a version once closed (based on the version it was edited \
                from: a stale one becomes a conflict version); --read-only refuses writes. It \
                stays in the foreground: Ctrl-C, SIGTERM or `fusermount3 -u DIR` \
                unmounts it. Needs /dev/fuse and fusermount3 (Debian: apt install fuse3). See \
                docs/MOUNT.md.
                """)

        @Argument(help: "An empty directory to mount the container on.", completion: .directory)
        var directory: String

        @Option(
            help: ArgumentHelp("Bytes of chunks the on-disk cache keeps at most (e.g. 512M, 4G).", valueName: "SIZE"))
        var cacheSize: ByteCount = ByteCount(Int64(1) << 30)

        @Option(
            name: .customShort("o"),
            help: ArgumentHelp("A mount option for the kernel (allow_other, …); repeatable.", valueName: "OPTION"))
        var mountOptions: [String] = []

        @Flag(help: "Refuse every write (EROFS); without it, files written here are uploaded as versions once closed.")
        var readOnly = false

        @OptionGroup var client: ClientOptions
        @OptionGroup var output: OutputOptions

        func run() async throws {
            try await runReportingErrors(json: output.json) {
                let remote = try client.remote()
                let documents = DocumentClient(remote: remote)
                let stop = SignalStop()
                let path = URL(fileURLWithPath: directory).standardizedFileURL.path
                let mount: Mount
                do {
                    mount = try await Mount.start(
                        client: documents, at: path,
                        options: Mount.Options(
                            cachePath: try chunkCache(remote).directory, cacheBytes: Int(cacheSize.value),
                            mountOptions: mountOptions, stateDirectory: readOnly ? nil : remote.stateDirectory))
                } catch {
                    await documents.shutdown()
                    throw error
                }
                if !output.quiet && !output.json {
                    printError(
                        "mounted \(remote.container) at \(path)\(readOnly ? " (read-only)" : ""); Ctrl-C or `fusermount3 -u \(path)` unmounts"
                    )
                }
                let watcher = Task {
                    await stop.wait()
                    mount.stop()
                }
                await mount.finished()
                watcher.cancel()
                await documents.shutdown()
                let statistics = mount.statistics
                if output.json {
                    printJSON(statistics)
                } else if !output.quiet {
                    printError(
                        "unmounted \(path): \(statistics.chunksFetched) chunks fetched (\(ByteCount(statistics.bytesFetched))), \(statistics.chunksFromDisk) from the cache"
                            + (mount.queued > 0
                                ? "; \(mount.queued) written files not uploaded yet (they go up at the next mount)"
                                : "")
                    )
                }
            }
        }
    }
}
