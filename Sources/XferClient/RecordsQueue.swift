import Foundation
import XferCore
import XferProtocol

/// Record saves kept on the device while it is offline (docs/RECORDS.md, "Offline"): each
/// ``enqueue(_:zone:)`` is durable before it returns, and ``flush()`` sends what is queued, in
/// order, when the server answers again. A save the server refuses (a `CONFLICT`, with the
/// server's record to merge from) leaves the queue and is handed to the app; a save that could
/// not be sent stays, and so does everything after it.
///
/// The queue is one file per server and container in the state directory (mode 0600), replaced
/// atomically, so a crash leaves it as it was before or after a change, never between.
public struct RecordsQueue: Sendable {
    /// One queued save.
    public struct Entry: Codable, Sendable, Hashable {
        public var zoneID: ZoneID?
        public var operation: RecordOperation
    }

    /// What a flush did.
    public struct Flush: Sendable {
        /// The records the server saved or deleted, in order.
        public var saved: [Record] = []
        /// Saves refused by the server, with why (`CONFLICT` with `serverRecord`, `NOT_FOUND`, …):
        /// they are out of the queue, for the app to merge and save again.
        public var refused: [(entry: Entry, result: RecordResult)] = []
        /// Saves still queued (the server could not be reached).
        public var remaining: Int = 0
    }

    /// The client it sends through.
    public let records: RecordsClient
    /// The queue's file.
    public let path: String

    /// The queue of `records`' server and container, in its state directory.
    public init(records: RecordsClient) {
        self.records = records
        let remote = records.remote
        let name = ChunkID.of(Array("\(remote.connection.server)\n\(remote.container)".utf8)).hex.prefix(32)
        path = "\(remote.stateDirectory)/records-queue/\(name).json"
    }

    /// The saves queued, oldest first.
    /// - Throws: `invalid_configuration` if the file is damaged.
    public func pending() throws -> [Entry] {
        guard let data = try FileSystem.readSecret(path, what: "the records queue") else { return [] }
        do {
            return try RecordJSON.decode([Entry].self, from: Array(data))
        } catch {
            throw XferError(.invalidConfiguration, "the records queue \(path) is damaged; move it away to start afresh")
        }
    }

    /// Queues saves behind the ones there, durably.
    public func enqueue(_ operations: [RecordOperation], zone: ZoneID? = nil) throws {
        try write(try pending() + operations.map { Entry(zoneID: zone, operation: $0) })
    }

    /// Sends the queued saves, oldest first, a zone's run of them at a time (at most 200 a
    /// request, each alone), until the queue is empty or the server cannot be reached.
    /// - Returns: What was saved, what was refused, and how many remain.
    public func flush() async throws -> Flush {
        var queue = try pending()
        var flush = Flush()
        while let first = queue.first {
            let run = Array(queue.prefix { $0.zoneID == first.zoneID }.prefix(RecordLimits.operations))
            let answer: RecordResults
            do {
                answer = try await records.modify(
                    RecordModifyRequest(operations: run.map(\.operation), zoneID: first.zoneID, atomic: false))
            } catch let error as XferError where Self.offline(error) {
                break
            }
            guard answer.records.count == run.count else {
                throw XferError(.internal, "the server answered \(answer.records.count) of \(run.count) saves")
            }
            for (entry, result) in zip(run, answer.records) {
                if let record = result.record {
                    flush.saved.append(record)
                } else {
                    flush.refused.append((entry, result))
                }
            }
            queue.removeFirst(run.count)
            try write(queue)
        }
        flush.remaining = queue.count
        return flush
    }

    /// Whether an error means the server could not be reached (keep the saves for later), not
    /// that it refused them.
    static func offline(_ error: XferError) -> Bool {
        [.unavailable, .io, .cancelled].contains(error.code)
    }

    private func write(_ entries: [Entry]) throws {
        try FileSystem.writeSecret(RecordJSON.encode(entries), to: path)
    }
}
