import Foundation
import XferCore
import XferProtocol

/// Record fields sealed on the device (CloudKit's `encryptedValues`; docs/RECORDS.md,
/// "Encrypted fields"): a field marked `isEncrypted` is sealed under the `record field` key of
/// an end-to-end encrypted container's newest key before it is sent, and opened when it comes
/// back. The sealed value is the field's JSON (`{"value", "type"}`) padded to its Padmé length,
/// bound to the zone, record and field, so a server that moves it elsewhere gets it refused.
/// The server keeps it as `ENCRYPTED_BYTES`, indexes nothing of it and refuses queries on it.
struct RecordSealing: Sendable {
    let keys: SealingKeys

    init(_ ring: ContainerKeyRing) { keys = ring.sealing("record field") }

    private static func context(zone: String, record: String, field: String) -> [UInt8] {
        Array("xfer e2e record field v1 \(zone.utf8.count):\(zone)\(record.utf8.count):\(record)\(field)".utf8)
    }

    /// `fields` with each one marked `isEncrypted` sealed.
    func seal(_ fields: [String: RecordField], zone: String, record: String) -> [String: RecordField] {
        var out = fields
        for (name, field) in fields where field.isEncrypted == true && field.type != .encryptedBytes {
            let plain = RecordJSON.encode(RecordField(value: field.value, type: field.type))
            let sealed = keys.seal(Padding.padme(plain), context: Self.context(zone: zone, record: record, field: name))
            out[name] = RecordField(
                value: .string(Data(sealed).base64EncodedString()), type: .encryptedBytes, isEncrypted: true)
        }
        return out
    }

    /// Whether any field of `records` is to be sealed.
    static func wanted(_ records: [Record]) -> Bool {
        records.contains { $0.fields?.values.contains { $0.isEncrypted == true } == true }
    }

    /// Whether any record of `results` holds a sealed field.
    static func present(_ results: [RecordResult]) -> Bool {
        results.contains { result in
            [result.record, result.serverRecord].contains {
                $0?.fields?.values.contains { $0.type == .encryptedBytes } == true
            }
        }
    }

    /// `record` with each `ENCRYPTED_BYTES` field opened, marked `isEncrypted`. A field that
    /// does not open under the container's keys here (damaged, moved, or written by someone
    /// without them) stays sealed: one bad field does not hide the rest of an answer.
    func open(_ record: Record, zone: String) -> Record {
        guard let fields = record.fields else { return record }
        var opened = record
        for (name, field) in fields where field.type == .encryptedBytes {
            guard case .string(let text) = field.value, let sealed = Data(base64Encoded: text),
                let padded = try? keys.open(
                    Array(sealed), context: Self.context(zone: zone, record: record.recordName, field: name),
                    what: "encrypted field \(name) of record \(record.recordName)"),
                let plain = Padding.unblock(padded), var inner = try? RecordJSON.decode(RecordField.self, from: plain),
                inner.type != .encryptedBytes
            else { continue }
            inner.isEncrypted = true
            opened.fields?[name] = inner
        }
        return opened
    }

    /// Each record of `results` (and each server record of a conflict) opened.
    func open(_ results: [RecordResult], zone: String) -> [RecordResult] {
        results.map { result in
            var result = result
            result.record = result.record.map { open($0, zone: zone) }
            result.serverRecord = result.serverRecord.map { open($0, zone: zone) }
            return result
        }
    }

    /// Refuses a query that names a value marked `isEncrypted`: a filter's value travels to
    /// the server in the clear, and the server could not match a sealed field with it anyway.
    static func checkQuery(_ query: RecordQuery) throws {
        if let filter = query.filterBy?.first(where: { $0.fieldValue.isEncrypted == true }) {
            throw XferError(
                .badRequest,
                "the filter on \(filter.fieldName) is marked isEncrypted: fields sealed on the device cannot be queried, and the value would go to the server in the clear; nothing was sent"
            )
        }
    }
}
