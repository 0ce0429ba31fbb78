/// The canonical binary encoding of a manifest (docs/FORMAT.md, "Manifest v1").
extension Manifest {
    static let magic: [UInt8] = Array("XFM".utf8)
    /// Largest encoded manifest (or delta) either side accepts: 128 MiB.
    public static let maximumEncodedSize = 128 << 20
    /// Most entries a package may have, in total.
    public static let maximumEntries = 1 << 20
    /// Most chunk references a manifest may hold, over all its files together, repeats
    /// included: 2^21 (128 GiB at the default 64 KiB average chunk). With the encoded size,
    /// this bounds the memory any manifest (or a delta applied to a base) can take: about
    /// 40 bytes a reference, 80 MiB at most.
    public static let maximumChunkReferences = 1 << 21
    /// Most content bytes a manifest may declare, over all its files: 4 TiB.
    public static let maximumTotalBytes: Int64 = 1 << 42

    /// Throws `too_large` if a running count passes a limit: checked while decoding, before
    /// anything more is allocated.
    static func checkTotals(entries: Int, references: Int, bytes: Int64) throws {
        guard entries <= maximumEntries else {
            throw XferError(.tooLarge, "manifest has over \(maximumEntries) entries, the most a document may have")
        }
        guard references <= maximumChunkReferences else {
            throw XferError(
                .tooLarge,
                "manifest has over \(maximumChunkReferences) chunk references in all, the most a document may have")
        }
        guard bytes <= maximumTotalBytes else {
            throw XferError(
                .tooLarge, "manifest declares over \(maximumTotalBytes) bytes in all, the most a document may hold")
        }
    }

    /// The canonical bytes: equal manifests always encode to equal bytes.
    /// - Returns: The encoding.
    public func encoded() -> [UInt8] {
        var out = ByteWriter()
        out.buffer.reserveCapacity(estimatedEncodedSize)
        writeEncoding(into: &out, drainingPast: .max) { _ in }
        return out.buffer
    }

    /// The SHA-256 of ``encoded()``, hashed a piece at a time (a tree's encoding is tens of
    /// megabytes, never held whole here).
    var encodingDigest: ChunkID {
        let piece = 256 << 10
        var hasher = SHA256Hasher()
        var out = ByteWriter()
        out.buffer.reserveCapacity(min(estimatedEncodedSize, piece + (64 << 10)))
        writeEncoding(into: &out, drainingPast: piece) { out in
            out.buffer.withUnsafeBytes { hasher.update($0) }
            out.buffer.removeAll(keepingCapacity: true)
        }
        out.buffer.withUnsafeBytes { hasher.update($0) }
        return hasher.finalize()
    }

    /// Writes the canonical bytes into `out`, handing it to `drain` whenever it holds more than `limit`.
    private func writeEncoding(into out: inout ByteWriter, drainingPast limit: Int, _ drain: (inout ByteWriter) -> Void)
    {
        out.bytes(Self.magic)
        out.byte(Self.formatVersion)
        out.byte(kind.rawValue)
        out.chunker(chunker)
        out.varint(UInt64(entries.count))
        for index in entries.indices {
            out.entryHeader(entries, index)
            if entries.kind(at: index) == .file {
                let chunks = entries.chunks(at: index)
                out.varint(UInt64(chunks.count))
                for chunk in chunks { out.chunk(chunk) }
            }
            if out.buffer.count > limit { drain(&out) }
        }
    }

    /// About the size of ``encoded()`` (each varint at its usual width), so the encoding of a
    /// manifest of many entries is written into one buffer instead of doubling into several.
    var estimatedEncodedSize: Int {
        var size = 32 + entries.names.totalBytes + 19 * entries.count + 36 * entries.ids.count
        for index in entries.indices where entries.kind(at: index) != .directory {
            size += entries.kind(at: index) == .file ? 3 : entries.symlinkTarget(at: index)?.utf8.count ?? 0
        }
        return size
    }

    /// Decodes and validates canonical bytes.
    /// - Parameter bytes: An encoded manifest.
    /// - Throws: `XferError` `invalid_manifest` (or `invalid_path`) for anything but a
    ///   canonical, valid v1 manifest: bad magic or version, truncation, trailing bytes,
    ///   non-minimal varints, counts larger than the input could hold, invalid UTF-8, unsorted
    ///   or escaping paths, out-of-range values.
    public init(decoding bytes: [UInt8]) throws {
        self = try bytes.withUnsafeBufferPointer { try Self.decoding($0) }
    }

    private static func decoding(_ bytes: UnsafeBufferPointer<UInt8>) throws -> Manifest {
        guard bytes.count <= Self.maximumEncodedSize else {
            throw XferError(.tooLarge, "manifest is \(bytes.count) bytes, over the limit of \(Self.maximumEncodedSize)")
        }
        var input = ByteReader(bytes)
        guard try input.bytes(3) == Self.magic else {
            throw XferError(.invalidManifest, "not an xfer manifest (bad magic)")
        }
        let version = try input.byte()
        guard version == Self.formatVersion else {
            throw XferError(
                .invalidManifest,
                "manifest format version \(version) is not supported (this build reads \(Self.formatVersion))")
        }
        guard let kind = Kind(rawValue: try input.byte()) else {
            throw XferError(.invalidManifest, "unknown manifest kind")
        }
        let chunker = try input.chunker()
        // Every entry takes at least 4 bytes (path length, kind, mode, mtime).
        let count = try input.int(limit: input.remaining / 4)
        try Self.checkTotals(entries: count, references: 0, bytes: 0)
        // Room for exactly the names and chunks the entries hold (a quick pass over them first),
        // so that no buffer grows by copying or is left half empty.
        let room = Self.room(of: input, entries: count, against: nil)
        var builder = Builder(kind: kind, chunker: chunker, entries: count, nameBytes: room.names, chunks: room.chunks)
        var references = 0
        var bytes: Int64 = 0
        for _ in 0..<count {
            if try input.entryHeader(into: &builder) == .file {
                // Every chunk takes at least 33 bytes (length, id).
                let chunkCount = try input.int(limit: input.remaining / 33)
                references += chunkCount
                try Self.checkTotals(entries: count, references: references, bytes: bytes)
                for _ in 0..<chunkCount {
                    let chunk = try input.chunk(maximumLength: chunker.maximumSize)
                    bytes += Int64(chunk.length)
                    builder.appendChunk(chunk)
                }
                try Self.checkTotals(entries: count, references: references, bytes: bytes)
            }
        }
        guard input.remaining == 0 else {
            throw XferError(.invalidManifest, "manifest has \(input.remaining) bytes after its last entry")
        }
        // Sorting is part of the canonical form: the stored order must already be sorted.
        return try builder.finish()
    }
}

extension Manifest {
    /// How many name bytes and chunk references the `count` entries at `input` hold (a plain
    /// encoding's, or a delta's when `base` is given: its copies counted by their runs), read
    /// without keeping anything. Input that does not parse gives what was counted up to there:
    /// the decoding that follows refuses it.
    static func room(of input: ByteReader, entries count: Int, against base: Entries?) -> (names: Int, chunks: Int) {
        var input = input
        var names = 0
        var chunks = 0
        do {
            for _ in 0..<count {
                let pathLength = try input.int(limit: input.remaining)
                try input.skip(pathLength)
                names += pathLength
                let kind = try input.byte()
                _ = try input.varint()  // mode
                _ = try input.varint()  // mtime
                if kind == EntryKind.symlink.rawValue { try input.skip(try input.int(limit: input.remaining)) }
                guard kind == EntryKind.file.rawValue else { continue }
                if let base {
                    let reference = try input.int(limit: base.count)
                    let source = reference == 0 ? 0 : base.chunks(at: reference - 1).count
                    for _ in 0..<(try input.int(limit: input.remaining / 3)) {
                        if try input.byte() == 0 {  // copy: start, run
                            _ = try input.varint()
                            chunks += min(try input.int(limit: source), maximumChunkReferences)
                        } else {  // add: count, then each chunk
                            let added = try input.int(limit: input.remaining / 33)
                            chunks += added
                            for _ in 0..<added {
                                _ = try input.varint()
                                try input.skip(ChunkID.byteCount)
                            }
                        }
                    }
                } else {
                    let added = try input.int(limit: input.remaining / 33)
                    chunks += added
                    for _ in 0..<added {
                        _ = try input.varint()
                        try input.skip(ChunkID.byteCount)
                    }
                }
                if chunks > maximumChunkReferences { break }
            }
        } catch {}
        return (names, min(chunks, maximumChunkReferences))
    }
}

extension ByteWriter {
    /// Chunk limits: min, average, max as varints, then the normalization level.
    package mutating func chunker(_ chunker: ChunkerConfiguration) {
        varint(UInt64(chunker.minimumSize))
        varint(UInt64(chunker.averageSize))
        varint(UInt64(chunker.maximumSize))
        byte(UInt8(chunker.normalizationLevel))
    }

    /// What every entry starts with: path, kind, mode, zigzag mtime; a symlink's target.
    package mutating func entryHeader(_ entry: Manifest.Entry) {
        entryHeader(
            path: entry.path.utf8, kind: entry.kind, mode: entry.mode, mtime: entry.mtimeNanoseconds,
            symlinkTarget: entry.symlinkTarget)
    }

    /// ``entryHeader(_:)`` of packed entry `index`.
    package mutating func entryHeader(_ entries: Manifest.Entries, _ index: Int) {
        entryHeader(
            path: entries.pathBytes(at: index), kind: entries.kind(at: index), mode: entries.mode(at: index),
            mtime: entries.mtimeNanoseconds(at: index), symlinkTarget: entries.symlinkTarget(at: index))
    }

    private mutating func entryHeader(
        path: some Collection<UInt8>, kind: EntryKind, mode: UInt32, mtime: Int64, symlinkTarget: String?
    ) {
        varint(UInt64(path.count))
        buffer.append(contentsOf: path)
        byte(kind.rawValue)
        varint(UInt64(mode))
        varint(UInt64(bitPattern: (mtime << 1) ^ (mtime >> 63)))
        if kind == .symlink { string(symlinkTarget ?? "") }
    }

    /// One chunk reference: plain length, then the 32-byte id.
    package mutating func chunk(_ chunk: Manifest.ChunkReference) {
        varint(UInt64(chunk.length))
        chunk.id.withUnsafeBytes { buffer.append(contentsOf: $0) }
    }
}

extension ByteReader {
    /// Reads what ``ByteWriter/chunker(_:)`` wrote.
    package mutating func chunker() throws -> ChunkerConfiguration {
        do {
            let minimum = try int(limit: ChunkerConfiguration.maximumAllowedSize)
            let average = try int(limit: ChunkerConfiguration.maximumAllowedSize)
            let maximum = try int(limit: ChunkerConfiguration.maximumAllowedSize)
            return try ChunkerConfiguration(
                minimumSize: minimum, averageSize: average, maximumSize: maximum,
                normalizationLevel: Int(try byte()))
        } catch let error as XferError where error.code == .invalidConfiguration {
            throw XferError(.invalidManifest, "manifest chunk limits are invalid: \(error.message)")
        }
    }

    /// Reads what ``ByteWriter/entryHeader(_:)`` wrote into `builder` (chunks left to add).
    /// - Returns: The entry's kind.
    package mutating func entryHeader(into builder: inout Manifest.Builder) throws -> EntryKind {
        let path = try utf8(limit: DocumentPathRules.maximumPathBytes)
        guard let kind = EntryKind(rawValue: try byte()) else {
            throw XferError(.invalidManifest, "entry \"\(String(decoding: path, as: UTF8.self))\" has an unknown kind")
        }
        let mode = UInt32(try int(limit: 0o7777))
        let zigzag = try varint()
        let mtime = Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)
        let target = kind == .symlink ? try string(limit: DocumentPathRules.maximumPathBytes) : nil
        builder.append(path: path, kind: kind, mode: mode, mtimeNanoseconds: mtime, symlinkTarget: target)
        return kind
    }

    /// Reads what ``ByteWriter/chunk(_:)`` wrote.
    package mutating func chunk(maximumLength: Int) throws -> Manifest.ChunkReference {
        let length = try int(limit: maximumLength)
        return Manifest.ChunkReference(id: ChunkID(bytes: try bytes(ChunkID.byteCount))!, length: length)
    }
}

/// Appends the primitives of xfer's binary formats.
package struct ByteWriter {
    package var buffer: [UInt8] = []

    package init() {}

    package mutating func byte(_ value: UInt8) { buffer.append(value) }
    package mutating func bytes(_ values: [UInt8]) { buffer.append(contentsOf: values) }

    /// Unsigned LEB128: seven bits a byte, low first, high bit set on all but the last.
    package mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            buffer.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        buffer.append(UInt8(v))
    }

    /// A varint byte length, then the UTF-8 bytes.
    package mutating func string(_ value: String) {
        varint(UInt64(value.utf8.count))
        buffer.append(contentsOf: value.utf8)
    }
}

/// Reads the primitives of xfer's binary formats, refusing truncated or non-canonical input.
package struct ByteReader {
    private let data: UnsafeBufferPointer<UInt8>
    private var position = 0

    /// Reads `data`, which must outlive the reader (a `withUnsafeBufferPointer` scope).
    package init(_ data: UnsafeBufferPointer<UInt8>) { self.data = data }

    package var remaining: Int { data.count - position }

    package mutating func byte() throws -> UInt8 {
        guard position < data.count else { throw truncated() }
        defer { position += 1 }
        return data[position]
    }

    package mutating func skip(_ count: Int) throws {
        guard count >= 0, count <= remaining else { throw truncated() }
        position += count
    }

    package mutating func bytes(_ count: Int) throws -> [UInt8] {
        guard count <= remaining else { throw truncated() }
        defer { position += count }
        return Array(data[position..<(position + count)])
    }

    /// A minimal LEB128 varint of at most 64 bits.
    package mutating func varint() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            if shift == 63 && b > 1 { throw XferError(.invalidManifest, "varint overflows 64 bits") }
            value |= UInt64(b & 0x7F) << shift
            if b & 0x80 == 0 {
                if b == 0 && shift > 0 { throw XferError(.invalidManifest, "varint is not minimally encoded") }
                return value
            }
            shift += 7
        }
    }

    /// A varint that must be at most `limit`.
    package mutating func int(limit: Int) throws -> Int {
        let value = try varint()
        guard value <= UInt64(max(0, limit)) else {
            throw XferError(.invalidManifest, "value \(value) is over its limit of \(limit)")
        }
        return Int(value)
    }

    /// A varint length (at most `limit`) and that many bytes of valid UTF-8, read in place.
    package mutating func utf8(limit: Int) throws -> Slice<UnsafeBufferPointer<UInt8>> {
        let count = try int(limit: min(limit, remaining))
        guard count <= remaining else { throw truncated() }
        let raw = data[position..<(position + count)]
        position += count
        guard UTF8Scalars.isValid(raw) else { throw XferError(.invalidManifest, "text is not valid UTF-8") }
        return raw
    }

    /// A varint length (at most `limit`) and that many bytes of valid UTF-8.
    package mutating func string(limit: Int) throws -> String {
        let count = try int(limit: min(limit, remaining))
        let raw = try bytes(count)
        guard let text = String(validating: raw, as: UTF8.self) else {
            throw XferError(.invalidManifest, "text is not valid UTF-8")
        }
        return text
    }

    private func truncated() -> XferError {
        XferError(.invalidManifest, "manifest is truncated at byte \(position)")
    }
}
