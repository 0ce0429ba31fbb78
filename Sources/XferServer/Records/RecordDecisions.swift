import Foundation
import XferCore
import XferProtocol

/// What one records/modify operation does to the record stored under its name: the decision,
/// apart from the reads and writes that carry it out (``SQLMetadataStore/modifyRecords``).
enum RecordDecision: Equatable {
    /// Write the record with these type and fields (a new one when nothing is stored).
    case write(type: String, fields: [String: RecordField])
    /// Delete it.
    case delete
    /// Refuse the operation alone: a `serverErrorCode` and the reason, with the stored record
    /// for a conflict.
    case refuse(code: String, reason: String)

    /// The decision for `operation` when `stored` is what the zone holds under its name (`nil`:
    /// nothing, or a deleted record).
    /// - Throws: `bad_request` for fields that are not valid (the whole request is refused).
    static func decide(_ operation: RecordOperation, stored: Record?) throws -> RecordDecision {
        let record = operation.record
        let type = operation.operationType
        let fields = try RecordRules.typed(record.fields ?? [:])
        if type.checksTag, let stored, record.recordChangeTag != stored.recordChangeTag {
            return .refuse(
                code: RecordErrorCode.conflict,
                reason:
                    "record \(record.recordName) changed on the server (tag \(stored.recordChangeTag ?? "")); merge and retry"
            )
        }
        switch type {
        case .create:
            guard stored == nil else {
                return .refuse(code: RecordErrorCode.exists, reason: "record \(record.recordName) exists already")
            }
            return try written(record, fields)
        case .update, .forceUpdate:
            guard let stored else {
                guard type == .forceUpdate else { return notFound(record) }
                return try written(record, fields)
            }
            return .write(
                type: record.recordType ?? stored.recordType ?? "",
                fields: (stored.fields ?? [:]).merging(fields) { $1 })
        case .replace, .forceReplace:
            if stored == nil, type == .replace, record.recordChangeTag != nil { return notFound(record) }
            return try written(record, fields, type: stored?.recordType)
        case .delete, .forceDelete:
            return stored == nil ? notFound(record) : .delete
        }
    }

    private static func written(_ record: Record, _ fields: [String: RecordField], type: String? = nil) throws
        -> RecordDecision
    {
        guard let recordType = record.recordType ?? type else {
            throw XferError(.badRequest, "record \(record.recordName.prefix(64)) needs a recordType to be made")
        }
        try RecordRules.checkName(recordType, "record type")
        return .write(type: recordType, fields: fields)
    }

    private static func notFound(_ record: Record) -> RecordDecision {
        .refuse(code: RecordErrorCode.notFound, reason: "there is no record \(record.recordName)")
    }
}
