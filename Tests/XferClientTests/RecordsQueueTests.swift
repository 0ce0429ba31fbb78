import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import Testing
import XferCore
import XferProtocol

@testable import XferClient

/// Records saved while offline (docs/RECORDS.md, "Offline"): kept durably, sent on reconnect in
/// order, conflicts handed back with the server's record.
@Suite struct RecordsQueueTests {
    static func note(_ name: String, _ title: String, tag: String? = nil) -> Record {
        Record(
            recordName: name, recordType: "Note", recordChangeTag: tag,
            fields: ["title": RecordField(value: .string(title))])
    }

    @Test(LiveServer.plainOnly("records are not sealed end to end"))
    func savesWaitOfflineAndConflictsComeBack() async throws {
        // While `down`, record saves answer as a server that cannot be reached does.
        let down = Atomic<Bool>(false)
        try await LiveServer.run(intercept: { request in
            guard down.load(ordering: .relaxed), request.uri.path.hasSuffix("/records/modify") else { return nil }
            return Response(
                status: .serviceUnavailable, headers: [.contentType: "application/json"],
                body: ResponseBody(
                    byteBuffer: ByteBuffer(string: #"{"error":{"code":"unavailable","message":"the server is down"}}"#))
            )
        }) { server in
            let records = RecordsClient(remote: server.remote)
            let made = try await records.modify(
                RecordModifyRequest(operations: [RecordOperation(.create, Self.note("c", "first"))]))
            let tag = try #require(made.records[0].record?.recordChangeTag)
            _ = try await records.modify(
                RecordModifyRequest(operations: [
                    RecordOperation(.update, Self.note("c", "changed elsewhere", tag: tag))
                ]))

            down.store(true, ordering: .relaxed)
            let queue = RecordsQueue(records: records)
            try queue.enqueue([
                RecordOperation(.create, Self.note("a", "one")), RecordOperation(.create, Self.note("b", "two"))
            ])
            try queue.enqueue([RecordOperation(.update, Self.note("c", "from the old tag", tag: tag))])
            let stuck = try await queue.flush()
            #expect(stuck.saved.isEmpty && stuck.refused.isEmpty && stuck.remaining == 3)
            // Kept on disk, in order, for any later queue object (a restarted app).
            #expect(try RecordsQueue(records: records).pending().map(\.operation.record.recordName) == ["a", "b", "c"])
            let mode = try FileManager.default.attributesOfItem(atPath: queue.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)

            down.store(false, ordering: .relaxed)
            let sent = try await RecordsQueue(records: records).flush()
            #expect(sent.saved.map(\.recordName) == ["a", "b"] && sent.remaining == 0)
            #expect(sent.refused.count == 1 && sent.refused[0].result.serverErrorCode == "CONFLICT")
            #expect(sent.refused[0].result.serverRecord?.fields?["title"]?.value == .string("changed elsewhere"))
            #expect(try queue.pending().isEmpty)
        }
    }
}
