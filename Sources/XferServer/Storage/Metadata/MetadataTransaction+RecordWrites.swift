import Foundation
import XferCore
import XferProtocol

// What one records/modify operation writes (docs/RECORDS.md): the decision is RecordDecision's;
// these carry it out, with the subscriptions it fires, the records a deletion takes with it
// and the assets a record names.
extension MetadataTransaction {
    /// One records/modify operation: decided, then carried out.
    func apply(
        _ operation: RecordOperation, account: Int64, zone named: (id: Int64, name: String), container: Int64,
        writer: RecordWriter, desired: [String]?
    ) throws -> RecordResult {
        let zone = named.id
        let name = operation.record.recordName
        let stored = try storedRecord(zone: zone, name: name)
        let live = stored.flatMap { $0.record.deleted == true ? nil : $0.record }
        switch try RecordDecision.decide(operation, stored: live) {
        case .refuse(let code, let reason):
            return RecordResult(
                recordName: name, error: code, reason: reason,
                serverRecord: code == RecordErrorCode.conflict ? live : nil)
        case .write(let type, let fields):
            if let path = try missingAsset(container: container, fields: fields) {
                return RecordResult(
                    recordName: name, error: RecordErrorCode.badRequest,
                    reason: "asset \(path) is not a committed document (version) of this container: push it first")
            }
            if let target = try missingReference(zone: zone, fields: fields) {
                return RecordResult(
                    recordName: name, error: RecordErrorCode.validatingReference,
                    reason: "record \(target.prefix(64)), which a VALIDATE reference names, is not in this zone")
            }
            let sequence = try nextRecordSequence(container: container)
            let (id, written): (Int64, Record)
            do {
                (id, written) = try writeRecord(
                    account: account, zone: zone, name: name, type: type, fields: fields, stored: stored,
                    sequence: sequence, writer: writer)
            } catch let error as XferError where error.code == .tooLarge {
                return RecordResult(recordName: name, error: RecordErrorCode.limitExceeded, reason: error.message)
            } catch let error as XferError where error.code == .quotaExceeded {
                return RecordResult(recordName: name, error: RecordErrorCode.quotaExceeded, reason: error.message)
            }
            try touchZone(zone, sequence: sequence)
            try fireSubscriptions(
                container: container, zone: zone, zoneName: named.name, record: id, name: name, type: type,
                event: live == nil ? .create : .update, sequence: sequence)
            return RecordResult(record: RecordRules.keeping(operation.desiredKeys ?? desired, of: written))
        case .delete:
            let sequence = try nextRecordSequence(container: container)
            try fireSubscriptions(
                container: container, zone: zone, zoneName: named.name, record: stored!.id, name: name,
                type: live?.recordType ?? "", event: .delete, sequence: sequence)
            try deleteRecord(account: account, stored!.id, sequence: sequence, writer: writer)
            try touchZone(zone, sequence: sequence)
            try cascade(from: name, account: account, zone: named, container: container, writer: writer)
            return RecordResult(record: Record(recordName: name, deleted: true))
        }
    }

    /// The first record a `VALIDATE` reference of `fields` names that is not a live record of
    /// the zone, if any.
    func missingReference(zone: Int64, fields: [String: RecordField]) throws -> String? {
        for field in fields.values where field.type == .reference || field.type == .referenceList {
            let items: [JSONValue]
            if case .array(let list) = field.value { items = list } else { items = [field.value] }
            for case .object(let reference) in items where reference["action"] == .string("VALIDATE") {
                guard case .string(let target)? = reference["recordName"] else { continue }
                let found = try sql.one(
                    "SELECT 1 FROM records WHERE zone_id = ? AND name = ? AND deleted = ?", zone, target, false)
                if found == nil { return target }
            }
        }
        return nil
    }

    /// The first asset of `fields` that is not a committed document version of the container
    /// (its current one, or the version it names), if any: an asset names data the container holds.
    func missingAsset(container: Int64, fields: [String: RecordField]) throws -> String? {
        for field in fields.values where field.type == .asset || field.type == .assetList {
            let items: [JSONValue]
            if case .array(let list) = field.value { items = list } else { items = [field.value] }
            for case .object(let asset) in items {
                guard case .string(let path)? = asset["path"] else { continue }
                let found: SQLRow?
                if case .int(let version)? = asset["version"] {
                    found = try sql.one(
                        """
                        SELECT 1 FROM versions v JOIN documents d ON d.id = v.document_id
                        WHERE d.container_id = ? AND d.path = ? AND v.version = ? AND v.state IN ('current', 'superseded')
                        """, container, path, version)
                } else {
                    found = try sql.one(
                        "SELECT 1 FROM documents WHERE container_id = ? AND path = ? AND current_version IS NOT NULL",
                        container, path)
                }
                if found == nil { return path }
            }
        }
        return nil
    }

    /// Deletes the records that reference `name` with `DELETE_SELF`, and theirs in turn, at
    /// most ``RecordRules/maximumCascade`` in all (the rest keep their dangling reference).
    func cascade(
        from name: String, account: Int64, zone: (id: Int64, name: String), container: Int64, writer: RecordWriter
    ) throws {
        var queue = [name]
        var deleted = 0
        while let target = queue.popLast(), deleted < RecordRules.maximumCascade {
            let rows = try sql.rows(
                """
                SELECT DISTINCT r.id, r.name, r.type FROM record_values v JOIN records r ON r.id = v.record_id
                WHERE v.zone_id = ? AND v.kind = ? AND v.text = ? AND r.deleted = ? ORDER BY r.id
                """, zone.id, RecordRules.deleteSelfKind, target, false)
            for row in rows.prefix(RecordRules.maximumCascade - deleted) {
                let (id, source) = (try row.int("id"), try row.text("name"))
                let sequence = try nextRecordSequence(container: container)
                try fireSubscriptions(
                    container: container, zone: zone.id, zoneName: zone.name, record: id, name: source,
                    type: try row.text("type"), event: .delete, sequence: sequence)
                try deleteRecord(account: account, id, sequence: sequence, writer: writer)
                try touchZone(zone.id, sequence: sequence)
                deleted += 1
                queue.append(source)
            }
        }
    }
}
