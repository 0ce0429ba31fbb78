import Foundation
import XferCore
import XferProtocol

// Records beside documents (docs/RECORDS.md), written once for both backends.
extension SQLMetadataStore {
    public func modifyRecords(
        account: Int64, container: ContainerName, _ request: RecordModifyRequest, writer: RecordWriter
    ) async throws -> RecordResults {
        guard (1...RecordLimits.operations).contains(request.operations.count) else {
            throw XferError(.badRequest, "records/modify takes 1 to \(RecordLimits.operations) operations")
        }
        let zoneName = try RecordRules.zoneName(request.zoneID)
        // Atomic by default in a zone of one's own, as CloudKit is; each alone in the default zone.
        let atomic = request.atomic ?? (zoneName != ZoneID.defaultZone.zoneName)
        for operation in request.operations { try RecordRules.checkName(operation.record.recordName, "record name") }
        return try await write { tx in
            let containerID = try tx.recordContainer(account: account, name: container)
            guard let zone = try tx.recordZone(container: containerID, name: zoneName, create: true) else {
                return RecordResults(
                    records: request.operations.map {
                        RecordResult(
                            recordName: $0.record.recordName, error: RecordErrorCode.zoneNotFound,
                            reason: "there is no zone \(zoneName)")
                    })
            }
            let scope = RecordWriteScope(
                account: account, container: containerID, zone: (zone, zoneName), writer: writer,
                desired: request.desiredKeys, operations: request.operations.count)
            do {
                // All in one savepoint: an atomic request that fails leaves nothing. An operation
                // refused writes nothing (it is refused before it writes), so none needs its own.
                return try tx.savepoint {
                    try scope.prefetch(request.operations.map(\.record.recordName), in: tx)
                    let results = try request.operations.map { try tx.apply($0, in: scope) }
                    if atomic, results.contains(where: { $0.serverErrorCode != nil }) {
                        throw AtomicFailure(results: results)
                    }
                    if let last = scope.lastSequence { try tx.touchZone(zone, sequence: last) }
                    try tx.pruneNotifications(container: containerID)
                    return RecordResults(records: results)
                }
            } catch let failure as AtomicFailure {
                return failure.answer
            }
        }
    }

    public func lookupRecords(account: Int64, container: ContainerName, _ request: RecordLookupRequest) async throws
        -> RecordResults
    {
        guard (1...RecordLimits.operations).contains(request.records.count) else {
            throw XferError(.badRequest, "records/lookup takes 1 to \(RecordLimits.operations) names")
        }
        let zoneName = try RecordRules.zoneName(request.zoneID)
        return try await read { tx in
            let zone = try tx.containerID(account: account, name: container, create: false).flatMap {
                try tx.recordZone(container: $0, name: zoneName, create: false)
            }
            return RecordResults(
                records: try request.records.map { asked in
                    if let zone, let record = try tx.storedRecord(zone: zone, name: asked.recordName)?.record,
                        record.deleted != true
                    {
                        return RecordResult(record: RecordRules.keeping(request.desiredKeys, of: record))
                    }
                    return RecordResult(
                        recordName: asked.recordName, error: RecordErrorCode.notFound,
                        reason: "there is no record \(asked.recordName)")
                })
        }
    }

    public func queryRecords(account: Int64, container: ContainerName, _ request: RecordQueryRequest) async throws
        -> RecordQueryResults
    {
        try await queryRecords(account: account, container: container, request, ways: nil)
    }

    /// A records/query asked `ways` (nil: as ``RecordQueryPlan`` decides; tests ask each way).
    func queryRecords(
        account: Int64, container: ContainerName, _ request: RecordQueryRequest, ways: [RecordQueryWay]?
    ) async throws -> RecordQueryResults {
        let zoneName = try RecordRules.zoneName(request.zoneID)
        let limit = try RecordRules.resultsLimit(request.resultsLimit)
        let offset = try RecordQueryMarker.offset(request.continuationMarker, query: request.query)
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false),
                let zone = try tx.recordZone(container: containerID, name: zoneName, create: false)
            else {
                return RecordQueryResults(records: [], continuationMarker: nil)
            }
            let query = try RecordQuerySQL(request.query, zone: zone, offset: offset, limit: limit, dialect: tx.dialect)
            if let check = RecordQuerySQL.encryptedFields(of: request.query),
                let sealed = try tx.sql.rows(check.sql, [.int(zone)] + check.values).first
            {
                throw XferError(
                    .badRequest,
                    "field \(try sealed.text("field").prefix(64)) is sealed on the device (encrypted): it cannot be filtered or sorted by"
                )
            }
            let rows = try tx.page(of: query, ways: ways)
            let records = try rows.prefix(limit).map {
                RecordResult(record: RecordRules.keeping(request.desiredKeys, of: try tx.record(row: $0)))
            }
            let marker =
                rows.count > limit ? RecordQueryMarker.marker(offset: offset + limit, query: request.query) : nil
            return RecordQueryResults(records: records, continuationMarker: marker)
        }
    }

    public func zones(account: Int64, container: ContainerName) async throws -> ZoneList {
        try await read { tx in
            var zones = [ZoneInfo(zoneID: .defaultZone, syncToken: RecordRules.syncToken(0))]
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return ZoneList(zones: zones.map(ZoneResult.init))
            }
            let rows = try tx.sql.rows(
                "SELECT name, sequence FROM record_zones WHERE container_id = ? AND deleted = ? ORDER BY name\(tx.dialect.bytewise)",
                containerID, false)
            for row in rows {
                let zone = ZoneInfo(
                    zoneID: ZoneID(zoneName: try row.text("name")),
                    syncToken: RecordRules.syncToken(try row.int("sequence")))
                if zone.zoneID == .defaultZone { zones[0] = zone } else { zones.append(zone) }
            }
            return ZoneList(zones: zones.map(ZoneResult.init))
        }
    }

    public func modifyZones(account: Int64, container: ContainerName, _ request: ZoneModifyRequest) async throws
        -> ZoneList
    {
        guard (1...RecordLimits.operations).contains(request.operations.count) else {
            throw XferError(.badRequest, "zones/modify takes 1 to \(RecordLimits.operations) operations")
        }
        for operation in request.operations { _ = try RecordRules.zoneName(operation.zone.zoneID) }
        return try await write { tx in
            let containerID = try tx.recordContainer(account: account, name: container)
            var results: [ZoneResult] = []
            for operation in request.operations {
                results.append(try tx.apply(operation, account: account, container: containerID))
            }
            return ZoneList(zones: results)
        }
    }

    public func zoneChanges(account: Int64, container: ContainerName, _ request: ZoneChangesRequest) async throws
        -> ZoneChangesList
    {
        guard (1...RecordLimits.operations).contains(request.zones.count) else {
            throw XferError(.badRequest, "changes/zone takes 1 to \(RecordLimits.operations) zones")
        }
        return try await read { tx in
            let containerID = try tx.containerID(account: account, name: container, create: false)
            return ZoneChangesList(
                zones: try request.zones.map { try tx.changes(in: $0, container: containerID) })
        }
    }

    public func databaseChanges(account: Int64, container: ContainerName, _ request: DatabaseChangesRequest)
        async throws -> DatabaseChanges
    {
        let after = try RecordRules.sequence(ofToken: request.syncToken)
        let limit = try RecordRules.resultsLimit(request.resultsLimit)
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return DatabaseChanges(zones: [], syncToken: RecordRules.syncToken(after), moreComing: false)
            }
            let rows = try tx.sql.rows(
                """
                SELECT name, sequence, deleted FROM record_zones WHERE container_id = ? AND sequence > ?
                ORDER BY sequence LIMIT \(limit + 1)
                """, containerID, after)
            let page = rows.prefix(limit)
            let zones = try page.map {
                ZoneInfo(
                    zoneID: ZoneID(zoneName: try $0.text("name")),
                    syncToken: RecordRules.syncToken(try $0.int("sequence")),
                    deleted: try $0.bool("deleted") ? true : nil)
            }
            let end = try page.last.map { try $0.int("sequence") } ?? after
            return DatabaseChanges(zones: zones, syncToken: RecordRules.syncToken(end), moreComing: rows.count > limit)
        }
    }
}

/// The answer of an atomic records/modify that failed: every operation rolled back, the
/// failing ones with their errors and the others with `ATOMIC_ERROR`.
struct AtomicFailure: Error {
    let results: [RecordResult]

    var answer: RecordResults {
        RecordResults(
            records: results.map { result in
                if result.serverErrorCode != nil { return result }
                return RecordResult(
                    recordName: result.record?.recordName ?? "", error: RecordErrorCode.atomicError,
                    reason: "not applied: another operation of this atomic request failed")
            })
    }
}

extension MetadataTransaction {
    /// One zones/modify operation.
    func apply(_ operation: ZoneOperation, account: Int64, container: Int64) throws -> ZoneResult {
        let zoneID = operation.zone.zoneID
        let name = zoneID.zoneName
        let existing = try sql.one(
            "SELECT id, deleted FROM record_zones WHERE container_id = ? AND name = ?", container, name)
        let live = try existing.map { try !$0.bool("deleted") } ?? false
        let sequence = try nextRecordSequence(container: container)
        switch operation.operationType {
        case .create:
            if !live {
                try sql.rows(
                    """
                    INSERT INTO record_zones (container_id, name, sequence, deleted) VALUES (?, ?, ?, ?)
                    ON CONFLICT (container_id, name) DO UPDATE SET sequence = excluded.sequence, deleted = excluded.deleted
                    """, container, name, sequence, false)
            }
            return ZoneResult(ZoneInfo(zoneID: zoneID, syncToken: RecordRules.syncToken(sequence)))
        case .delete:
            guard name != ZoneID.defaultZone.zoneName else {
                return ZoneResult(
                    zoneID: zoneID, error: RecordErrorCode.badRequest, reason: "_defaultZone cannot be deleted")
            }
            guard live, let id = try existing?.int("id") else {
                return ZoneResult(
                    zoneID: zoneID, error: RecordErrorCode.zoneNotFound, reason: "there is no zone \(name)")
            }
            for row in try sql.rows("SELECT fields FROM records WHERE zone_id = ? AND deleted = ?", id, false) {
                try chargeRecord(account: account, -Self.recordCost(try row.optionalText("fields")))
            }
            try sql.rows("DELETE FROM record_values WHERE zone_id = ?", id)
            try sql.rows("DELETE FROM record_locations WHERE zone_id = ?", id)
            try sql.rows("DELETE FROM records WHERE zone_id = ?", id)
            try sql.rows("UPDATE record_zones SET deleted = ?, sequence = ? WHERE id = ?", true, sequence, id)
            return ZoneResult(ZoneInfo(zoneID: zoneID, syncToken: nil, atomic: nil, deleted: true))
        }
    }

    /// One zone's changes after its token: records and tombstones in change order, a page.
    func changes(in asked: ZoneChangesQuery, container: Int64?) throws -> ZoneChanges {
        let after = try RecordRules.sequence(ofToken: asked.syncToken)
        let limit = try RecordRules.resultsLimit(asked.resultsLimit)
        let zoneName = try RecordRules.zoneName(asked.zoneID)
        guard let container, let zone = try recordZone(container: container, name: zoneName, create: false) else {
            guard zoneName == ZoneID.defaultZone.zoneName else {
                var missing = ZoneChanges(
                    zoneID: asked.zoneID, records: [], syncToken: RecordRules.syncToken(after), moreComing: false)
                missing.serverErrorCode = RecordErrorCode.zoneNotFound
                missing.reason = "there is no zone \(zoneName)"
                return missing
            }
            return ZoneChanges(
                zoneID: asked.zoneID, records: [], syncToken: RecordRules.syncToken(after), moreComing: false)
        }
        let rows = try sql.rows(
            "SELECT * FROM records WHERE zone_id = ? AND sequence > ? ORDER BY sequence LIMIT \(limit + 1)", zone, after
        )
        let page = rows.prefix(limit)
        let records = try page.map {
            RecordResult(record: RecordRules.keeping(asked.desiredKeys, of: try record(row: $0)))
        }
        let end = try page.last.map { try $0.int("sequence") } ?? after
        return ZoneChanges(
            zoneID: asked.zoneID, records: records, syncToken: RecordRules.syncToken(end),
            moreComing: rows.count > limit)
    }
}
