import Foundation
import XferCore
import XferProtocol

// The values the metadata store's protocols take and give: where chunks are, what an account
// owns and uses, stored manifests and versions, pages of documents and changes.

/// Where a packed chunk is stored: bytes `offset ..< offset + length` of pack object `pack`.
public struct ChunkLocation: Sendable, Hashable {
    /// The chunk.
    public var id: ChunkID
    /// The pack's name.
    public var pack: String
    /// Where its entry starts in the pack.
    public var offset: Int64
    /// Its entry's length.
    public var length: Int
    /// When it was recorded (store clock, Unix ns; 0 until recorded).
    public var recordedAt: Int64

    /// Describes a location.
    public init(id: ChunkID, pack: String, offset: Int64, length: Int, recordedAt: Int64 = 0) {
        self.id = id
        self.pack = pack
        self.offset = offset
        self.length = length
        self.recordedAt = recordedAt
    }

    /// Byte strings bounding the ids that start with `shard` (`low <= id < high`, as SQL
    /// compares blobs).
    public static func shardBounds(_ shard: UInt8) -> (low: [UInt8], high: [UInt8]) {
        ([shard], shard < .max ? [shard + 1] : [UInt8](repeating: .max, count: ChunkID.byteCount + 1))
    }
}

/// A chunk an account now holds: id and plain length.
public struct OwnedChunk: Sendable, Hashable {
    /// The chunk id.
    public var id: ChunkID
    /// Its plain length (what the quota counts).
    public var length: Int
    /// Whether it is sealed end to end (``ChunkEncoding/sealed``): its id does not fix its
    /// length, so one stored at another length is refused (``SQLMetadataStore/addChunks``).
    public var sealed: Bool

    /// Creates a record.
    public init(id: ChunkID, length: Int, sealed: Bool = false) {
        self.id = id
        self.length = length
        self.sealed = sealed
    }
}

/// One document of ``MetadataStore/commitDirect(account:container:_:)``: its announcement and
/// its manifest, checked against its digest.
public struct DirectCommitItem: Sendable {
    /// The announcement.
    public var announce: AnnounceRequest
    /// The manifest.
    public var manifest: Manifest
    /// Its canonical encoding.
    public var encoded: [UInt8]
    /// The version it must become (``DirectCommit/version``), or `nil` for the next one.
    public var version: Int64?

    /// Creates an item.
    public init(announce: AnnounceRequest, manifest: Manifest, encoded: [UInt8], version: Int64? = nil) {
        self.announce = announce
        self.manifest = manifest
        self.encoded = encoded
        self.version = version
    }
}

/// Where a version is in ``MetadataStore/storedManifests(after:limit:)``'s order.
public struct StoredVersionKey: Sendable, Hashable {
    /// The document's row.
    public var document: Int64
    /// The version number.
    public var version: Int64
}

/// A committed version's manifest, as stored.
public struct StoredManifest: Sendable {
    /// Where it is in the listing's order.
    public var key: StoredVersionKey
    /// The account's row.
    public var account: Int64
    /// The container's name.
    public var container: String
    /// The document's path.
    public var path: String
    /// The version's state.
    public var state: String
    /// The encoded manifest.
    public var encoded: [UInt8]
    /// The SHA-256 recorded at commit.
    public var digest: [UInt8]?
}

/// Where a record is in ``MetadataStore/chunkRecords(after:limit:)``'s order.
public struct ChunkRecordKey: Sendable, Hashable {
    /// The account's row.
    public var account: Int64
    /// The chunk.
    public var id: ChunkID
}

/// That an account holds a chunk, and how many committed versions reference it.
public struct ChunkRecordRow: Sendable, Hashable {
    /// The account's row.
    public var account: Int64
    /// The chunk.
    public var id: ChunkID
    /// Its plain length.
    public var length: Int64
    /// Committed versions (of this account) that reference it.
    public var refs: Int64
    /// Where it is in the listing's order.
    public var key: ChunkRecordKey { ChunkRecordKey(account: account, id: id) }
}

/// An account's recorded use against what it holds.
public struct AccountUsage: Sendable, Hashable {
    /// The account's row.
    public var id: Int64
    /// Its name.
    public var name: String
    /// The use recorded (what the quota compares).
    public var used: Int64
    /// The plain bytes of the chunks it holds.
    public var held: Int64
    /// What its version records cost, as recorded.
    public var versionBytes: Int64
    /// What the versions it keeps cost, counted from them.
    public var versionBytesKept: Int64
}

extension DocumentList {
    /// A page from up to `limit + 1` rows read in path order: the extra row only says that more follow.
    static func page(_ rows: [DocumentInfo], cursor: Int64, limit: Int) -> DocumentList {
        let more = rows.count > limit
        let documents = more ? Array(rows.prefix(limit)) : rows
        return DocumentList(
            documents: documents, cursor: cursor, more: more, next: more ? documents.last?.path.value : nil)
    }
}

extension ChangeList {
    /// One page of the feed from up to `limit + 1` changes of each kind after `after`, in
    /// sequence order. Every change has its own number, so a page may end anywhere: at the
    /// `limit`-th change when there are more, else at the container's `head`.
    static func page(documents: [DocumentInfo], keys: [KeyValueEntry], after: Int64, head: Int64, limit: Int)
        -> ChangeList
    {
        let sequences = (documents.map(\.sequence) + keys.map(\.sequence)).sorted()
        let more = sequences.count > limit
        let cursor = more ? sequences[limit - 1] : max(after, head)
        return ChangeList(
            changes: documents.filter { $0.sequence <= cursor }, keys: keys.filter { $0.sequence <= cursor },
            cursor: cursor, more: more, head: head)
    }
}

/// One document's answer in ``MetadataStore/manifests(account:container:_:budget:)``.
public enum ManifestRead: Sendable {
    case manifest(info: DocumentInfo, manifest: [UInt8])
    case failed(XferError)
    /// Not sent: the answer's budget was spent.
    case overBudget
}
