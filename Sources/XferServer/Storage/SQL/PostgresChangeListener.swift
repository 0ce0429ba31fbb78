import Logging
import PostgresNIO
import Synchronization

/// The LISTEN on `xfer_changes` that wakes this server's long polls when another server
/// sharing the database commits: idle until a server watches, then on a connection of its own,
/// reconnecting after a failure. ``PostgresMetadataStore/run()`` runs it beside the client.
final class PostgresChangeListener: Sendable {
    private let client: PostgresClient
    private let logger: Logger
    /// What ``watch(_:)`` was last given.
    private let handler = Mutex<(@Sendable () -> Void)?>(nil)
    /// Says that a handler was given (the first one starts the LISTEN), or ends by ``stop()``.
    private let watching = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Calls `handler` for every notification from now on, in place of the one before.
    func watch(_ handler: @escaping @Sendable () -> Void) {
        self.handler.withLock { $0 = handler }
        watching.continuation.yield()
    }

    /// Ends a ``run()`` still waiting for a first handler.
    func stop() {
        watching.continuation.finish()
    }

    /// LISTENs from the first ``watch(_:)`` on, until cancelled or the client closes.
    func run() async {
        var started = watching.stream.makeAsyncIterator()
        guard await started.next() != nil else { return }
        while !Task.isCancelled {
            do {
                try await client.withConnection { connection in
                    try await connection.listen(on: "xfer_changes") { notifications in
                        for try await _ in notifications { self.handler.withLock { $0 }?() }
                    }
                }
            } catch {
                if Task.isCancelled || (error as? PSQLError)?.code == .clientClosedConnection { return }
                logger.warning(
                    "LISTEN xfer_changes failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }
}
