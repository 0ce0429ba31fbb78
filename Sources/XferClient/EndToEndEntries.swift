import XferCore
import XferProtocol

/// What a client of an end-to-end encrypted container seals on the way out and opens on the
/// way in, for every message that names a document or a key (docs/FORMAT.md, "End-to-end
/// documents"): the one place listings, versions, the change feed and key-value entries are
/// turned into plain names and back.
extension EndToEndKeys {
    /// A key-value entry as sealed: the plain key, its value, and the write's time and device
    /// (the last writer wins by them: sealed too, a server cannot replay an old value as new).
    struct SealedEntry: Codable {
        var key: String
        var value: JSONValue
        var timestampNs: Int64
        var device: String
    }

    /// `info` with its path opened.
    /// - Throws: `corrupt_chunk` if the name does not open under this key.
    public func opened(_ info: DocumentInfo) throws -> DocumentInfo {
        var info = info
        info.path = try DocumentPath(try names.open(path: info.path.value))
        return info
    }

    /// `write` as the server takes it: the key hashed, the key and value sealed together.
    public func sealed(_ write: KeyValueWrite) -> KeyValueWrite {
        var sealed = write
        sealed.key = serverKey(write.key)
        if let value = write.value {
            let entry = SealedEntry(key: write.key, value: value, timestampNs: write.timestampNs, device: write.device)
            sealed.value = SealedValues.wrap(seal(value: WireJSON.encode(entry), serverKey: sealed.key))
        }
        return sealed
    }

    /// An entry with its key and value opened. One with no value (a deletion) keeps the
    /// server's hashed key (``serverKey(_:)``) unless `key`, the key asked for, is given.
    /// - Throws: `corrupt_chunk` if the value is not sealed, does not open, or holds another key.
    public func opened(_ entry: KeyValueEntry, key: String? = nil) throws -> KeyValueEntry {
        var entry = entry
        guard let value = entry.value else {
            if let key { entry.key = key }
            return entry
        }
        guard let sealed = SealedValues.unwrap(value) else {
            throw XferError(
                .corruptChunk,
                "the value at \(entry.key.prefix(12))… is not sealed, as every value of an encrypted container is")
        }
        let inner = try WireJSON.decode(SealedEntry.self, from: try open(value: sealed, serverKey: entry.key))
        guard serverKey(inner.key) == entry.key, key == nil || key == inner.key else {
            throw XferError(.corruptChunk, "the value at \(entry.key.prefix(12))… holds another key's")
        }
        guard inner.timestampNs == entry.timestampNs, inner.device == entry.device else {
            throw XferError(
                .corruptChunk,
                "the value of \(inner.key) was written at another time or by another device than the server says")
        }
        entry.key = inner.key
        entry.value = inner.value
        return entry
    }

    /// A page of the change feed with every name and entry opened; one that does not open
    /// under this key (which no device holding it wrote) is left out.
    public func opened(_ list: ChangeList) -> ChangeList {
        var list = list
        list.changes = list.changes.compactMap { try? opened($0) }
        list.keys = list.keys.compactMap { try? opened($0) }
        return list
    }
}
