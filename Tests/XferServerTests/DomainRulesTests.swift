import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// The metadata rules every backend shares (written once, in Storage/MetadataStore.swift), on
/// their own, without a database. The conformance suite (XferClientTests on SQLite and on
/// PostgreSQL, tools/suites/backend-tests.sh) checks each backend applies them.
@Suite struct DomainRulesTests {
    @Test func aStaleBaseIsAConflictAndTheLaterEditStaysCurrent() {
        let a = Data([1])
        let b = Data([2])
        // Based on the current version, or the very same content: it replaces it.
        #expect(
            CommitRules.outcome(current: 3, currentDigest: a, currentMtime: 100, base: 3, digest: b, mtime: 50)
                == .replaces)
        #expect(
            CommitRules.outcome(current: 3, currentDigest: a, currentMtime: 100, base: 1, digest: a, mtime: 50)
                == .replaces)
        // A stale base (or none): the later edit stays current, a tie going to the newcomer.
        #expect(
            CommitRules.outcome(current: 3, currentDigest: a, currentMtime: 100, base: 2, digest: b, mtime: 200)
                == .winsConflict)
        #expect(
            CommitRules.outcome(current: 3, currentDigest: a, currentMtime: 100, base: nil, digest: b, mtime: 100)
                == .winsConflict)
        #expect(
            CommitRules.outcome(current: 3, currentDigest: a, currentMtime: 100, base: 2, digest: b, mtime: 99)
                == .keptAsConflict)
    }

    @Test func theLastKeyValueWriterWinsWithinTheLimits() throws {
        var policy = StorePolicy()
        policy.keyValueMaximumKeys = 2
        policy.keyValueMaximumBytes = 100
        let container = ContainerName.default
        let stored = KeyValueEntry(key: "k", value: .string("old"), timestampNs: 10, device: "b", sequence: 4)
        func write(_ value: JSONValue?, at time: Int64, device: String = "a") -> KeyValueWrite {
            KeyValueWrite(key: "k", value: value, timestampNs: time, device: device)
        }
        // Older, or as old from a lesser device: the stored entry wins and nothing changes.
        #expect(
            try KeyValueRules.decide(
                write(.string("new"), at: 9), key: "k", text: "\"new\"", existing: stored,
                usage: (0, 0), policy: policy, container: container) == stored)
        #expect(
            try KeyValueRules.decide(
                write(.string("new"), at: 10, device: "a"), key: "k", text: "\"new\"", existing: stored,
                usage: (0, 0), policy: policy, container: container) == stored)
        // Later: it applies.
        #expect(
            try KeyValueRules.decide(
                write(.string("new"), at: 11), key: "k", text: "\"new\"", existing: stored,
                usage: (0, 0), policy: policy, container: container) == nil)
        // Past the container's limits, or deleting what holds nothing: refused.
        #expect {
            try KeyValueRules.decide(
                write(.string("new"), at: 11), key: "k", text: "\"new\"", existing: nil,
                usage: (2, 10), policy: policy, container: container)
        } throws: {
            ($0 as? XferError)?.code == .quotaExceeded
        }
        #expect {
            try KeyValueRules.decide(
                write(nil, at: 11), key: "k", text: nil, existing: nil,
                usage: (0, 0), policy: policy, container: container)
        } throws: {
            ($0 as? XferError)?.code == .notFound
        }
    }

    @Test func anUnknownStoredValueIsAnErrorNotAGuess() throws {
        #expect(try Stored.state("current") == .current)
        #expect(try Stored.kind("directory") == .directory)
        #expect { try Stored.state("archived") } throws: { ($0 as? XferError)?.code == .internal }
        #expect { try Stored.kind("socket") } throws: { ($0 as? XferError)?.code == .internal }
    }

    @Test func everyErrorCodeHasItsStatus() {
        #expect(XferError.Code.storageFull.status.code == 507)
        #expect(XferError.Code.quotaExceeded.status.code == 507)
        #expect(XferError.Code.conflict.status == .conflict)
        #expect(XferError.Code.named("made_up").status == .internalServerError)
        #expect(XferError(.notFound, "gone").status == .notFound)
    }

    @Test func theQuotaChargesWhatFitsAndRefusesTheRest() throws {
        #expect(try QuotaRules.charge(adding: 40, used: 60, quota: 100) == 100, "exactly full fits")
        #expect(try QuotaRules.charge(adding: 0, used: 100, quota: 100) == 100, "holding nothing new costs nothing")
        #expect { try QuotaRules.charge(adding: 41, used: 60, quota: 100) } throws: {
            ($0 as? XferError)?.code == .quotaExceeded
        }
        #expect { try QuotaRules.charge(adding: 10, used: 60, quota: 100, pending: 31) } throws: {
            ($0 as? XferError)?.message.contains("being uploaded") == true
        }
        #expect { try QuotaRules.charge(adding: -1, used: 0, quota: 100) } throws: {
            ($0 as? XferError)?.code == .quotaExceeded
        }
    }

    @Test func aDeletionMarkRefusesUploadsThatMayHaveStoredTheDeletedCopy() {
        #expect(DeletionRules.refuses(finishedAt: nil, uploadStartedAt: 5), "still deleting")
        #expect(DeletionRules.refuses(finishedAt: 10, uploadStartedAt: 5), "began before the deletion finished")
        #expect(DeletionRules.refuses(finishedAt: 10, uploadStartedAt: 10), "at the same instant: refused, to be safe")
        #expect(!DeletionRules.refuses(finishedAt: 10, uploadStartedAt: 11), "began after: its copy is whole")
        #expect(DeletionRules.forgetBefore(now: 10_000_000_000_000, grace: 0) == 10_000_000_000_000 - 3_600_000_000_000)
        #expect(
            DeletionRules.forgetBefore(now: 10_000_000_000_000, grace: 7200) == 10_000_000_000_000 - 7_200_000_000_000)
    }
}
