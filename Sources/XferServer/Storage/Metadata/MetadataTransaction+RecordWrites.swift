import Foundation
import XferCore
import XferProtocol

// What one records/modify operation writes (docs/RECORDS.md): the decision is RecordDecision's;
// these carry it out, with the subscriptions it fires, the records a deletion takes with it
// and the assets a record names.
extension MetadataTransaction {
    /// One records/modify operation: decided, then carried out.
    func apply(_ operation: RecordOperation, in scope: RecordWriteScope) throws -> RecordResult {
        let (account, container, zone, writer) = (scope.account, scope.container, scope.zone.id, scope.writer)
        let name = operation.record.recordName
        let stored = try scope.stored(name, in: self)
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
            let sequence = try scope.nextSequence(in: self)
            let saved: StoredRecord
            do {
                saved = try writeRecord(
                    account: account, zone: zone, name: name, type: type, fields: fields, stored: stored,
                    sequence: sequence, writer: writer)
            } catch let error as XferError where error.code == .tooLarge {
                return RecordResult(recordName: name, error: RecordErrorCode.limitExceeded, reason: error.message)
            } catch let error as XferError where error.code == .quotaExceeded {
                return RecordResult(recordName: name, error: RecordErrorCode.quotaExceeded, reason: error.message)
            }
            scope.saved(saved, sequence: sequence)
            try fireSubscriptions(
                record: saved.id, name: name, type: type, event: live == nil ? .create : .update, sequence: sequence,
                in: scope)
            return RecordResult(record: RecordRules.keeping(operation.desiredKeys ?? scope.desired, of: saved.record))
        case .delete:
            try delete(stored!.id, name: name, type: live?.recordType ?? "", fields: stored?.fields, in: scope)
            try cascade(from: name, in: scope)
            return RecordResult(record: Record(recordName: name, deleted: true))
        }
    }

    /// The first record a `VALIDATE` reference of `fields` names that is not a live record of
    /// the zone, if any.
    func missingReference(zone: Int64, fields: [String: RecordField]) throws -> String? {
        for field in fields.values where field.type == .reference || field.type == .referenceList {
            let items = RecordRules.items(field)
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
            let items = RecordRules.items(field)
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
    func cascade(from name: String, in scope: RecordWriteScope) throws {
        var queue = [name]
        var deleted = 0
        while let target = queue.popLast(), deleted < RecordRules.maximumCascade {
            // The kind written out, so that the partial index of DELETE_SELF references serves it.
            let rows = try sql.rows(
                """
                SELECT r.id, r.name, r.type, r.fields FROM records r WHERE r.deleted = ? AND r.id IN (
                  SELECT v.record_id FROM record_values v
                  WHERE v.zone_id = ? AND v.kind = '\(RecordRules.deleteSelfKind)' AND v.text = ?)
                ORDER BY r.id
                """, false, scope.zone.id, target)
            for row in rows.prefix(RecordRules.maximumCascade - deleted) {
                let source = try row.text("name")
                try delete(
                    try row.int("id"), name: source, type: try row.text("type"), fields: try row.optionalText("fields"),
                    in: scope)
                deleted += 1
                queue.append(source)
            }
        }
    }

    /// Deletes one record at the next change number, telling its subscriptions first.
    private func delete(_ id: Int64, name: String, type: String, fields: String?, in scope: RecordWriteScope) throws {
        let sequence = try scope.nextSequence(in: self)
        try fireSubscriptions(record: id, name: name, type: type, event: .delete, sequence: sequence, in: scope)
        try deleteRecord(account: scope.account, id, fields: fields, sequence: sequence, writer: scope.writer)
        scope.saved((id, Record(recordName: name, deleted: true), nil), sequence: sequence)
    }
}
