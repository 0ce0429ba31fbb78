import ArgumentParser
import XferCore

@main
struct Xfer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xfer",
        abstract: "Incremental chunked file transfer: sync files and packages, sending only what changed.",
        discussion: """
            Files are cut into content-defined chunks (FastCDC), named by SHA-256 and stored \
            zstd-compressed, so an edit costs bytes on the order of the edit.

            Start a server with `xfer serve --data DIR`, create an account with \
            `xfer account create NAME --data DIR`, then `xfer push PATH NAME` and \
            `xfer pull NAME [DEST]` with --server/--token (or XFER_SERVER/XFER_TOKEN; \
            `xfer login` keeps this device's own token in the config file instead). \
            `xfer sync DIR --watch` keeps a whole directory in sync; edits made from a \
            stale version are kept as conflict versions (`xfer versions`, `xfer resolve`). \
            `xfer verify` checks a server or a synced directory and `xfer gc` frees what no \
            version needs; \
            `xfer serve --metadata postgres://… --chunks s3://…` lets several servers share one \
            deployment. `xfer container create NAME --encrypted` makes a container only devices \
            holding its key can read: push, pull, listings and `xfer kv` seal and open on the \
            device (`xfer key unlock` on another one).
            """,
        version: XferVersion.current,
        subcommands: [
            Push.self, Pull.self, List.self, Find.self, Remove.self, Versions.self, Resolve.self, Changes.self,
            KeyValue.self, Records.self, Share.self,
            Sync.self, Status.self, Evict.self, Fetch.self, TrashCommand.self, Quota.self, Container.self, Key.self,
            Login.self, Logout.self, TokenCommand.self, Serve.self, ServerKey.self, Account.self, Verify.self,
            GarbageCollect.self, Chunk.self, MountCommand.self
        ]
    )

    /// ArgumentParser's entry point, after the process-wide memory setting.
    static func main() async {
        ProcessMemory.configure(serving: CommandLine.arguments.dropFirst().first == "serve")
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}

/// Chunking flags shared by every command that cuts files.
struct ChunkingOptions: ParsableArguments {
    @Option(name: .customLong("min"), help: "Smallest chunk (e.g. 16K).")
    var minimumSize: ByteCount = ByteCount(Int64(ChunkerConfiguration.default.minimumSize))

    @Option(name: .customLong("avg"), help: "Target average chunk, a power of two (e.g. 64K).")
    var averageSize: ByteCount = ByteCount(Int64(ChunkerConfiguration.default.averageSize))

    @Option(name: .customLong("max"), help: "Largest chunk (e.g. 256K, at most 16M).")
    var maximumSize: ByteCount = ByteCount(Int64(ChunkerConfiguration.default.maximumSize))

    func configuration() throws -> ChunkerConfiguration {
        do {
            return try ChunkerConfiguration(
                minimumSize: Int(minimumSize.value), averageSize: Int(averageSize.value),
                maximumSize: Int(maximumSize.value))
        } catch let error as XferError {
            throw ValidationError(error.message)
        }
    }
}

extension ByteCount: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
    public var defaultValueDescription: String { description.replacingOccurrences(of: ".00 ", with: " ") }
}
