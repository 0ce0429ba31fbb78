/// The canonical binary encoding of a manifest (docs/FORMAT.md, "Manifest v1").
extension Manifest {
    static let magic: [UInt8] = Array("XFM".utf8)
    /// Largest encoded manifest the decoder accepts: 256 MiB.
    public static let maximumEncodedSize = 256 << 20

    /// The canonical bytes: equal manifests always encode to equal bytes.
    /// - Returns: The encoding.
    public func encoded() -> [UInt8] {
        var out = ByteWriter()
        out.bytes(Self.magic)
        out.byte(Self.formatVersion)
        out.byte(kind.rawValue)
        out.varint(UInt64(chunker.minimumSize))
        out.varint(UInt64(chunker.averageSize))
        out.varint(UInt64(chunker.maximumSize))
        out.byte(UInt8(chunker.normalizationLevel))
        out.varint(UInt64(entries.count))
        for entry in entries {
            out.string(entry.path)
            out.byte(entry.kind.rawValue)
            out.varint(UInt64(entry.mode))
            out.varint(UInt64(bitPattern: (entry.mtimeNanoseconds << 1) ^ (entry.mtimeNanoseconds >> 63)))
            switch entry.kind {
            case .file:
                out.varint(UInt64(entry.chunks.count))
                for chunk in entry.chunks {
                    out.varint(UInt64(chunk.length))
                    out.bytes(chunk.id.bytes)
                }
            case .symlink:
                out.string(entry.symlinkTarget ?? "")
            case .directory:
                break
            }
        }
        return out.buffer
    }

    /// Decodes and validates canonical bytes.
    /// - Parameter bytes: An encoded manifest.
    /// - Throws: `XferError` `invalid_manifest` (or `invalid_path`) for anything but a
    ///   canonical, valid v1 manifest: bad magic or version, truncation, trailing bytes,
    ///   non-minimal varints, counts larger than the input could hold, invalid UTF-8, unsorted
    ///   or escaping paths, out-of-range values.
    public init(decoding bytes: [UInt8]) throws {
        guard bytes.count <= Self.maximumEncodedSize else {
            throw XferError(.tooLarge, "manifest is \(bytes.count) bytes, over the limit of \(Self.maximumEncodedSize)")
        }
        var input = ByteReader(bytes)
        guard try input.bytes(3) == Self.magic else { throw XferError(.invalidManifest, "not an xfer manifest (bad magic)") }
        let version = try input.byte()
        guard version == Self.formatVersion else {
            throw XferError(.invalidManifest, "manifest format version \(version) is not supported (this build reads \(Self.formatVersion))")
        }
        guard let kind = Kind(rawValue: try input.byte()) else { throw XferError(.invalidManifest, "unknown manifest kind") }
        let chunker: ChunkerConfiguration
        do {
            let minimum = try input.int(limit: ChunkerConfiguration.maximumAllowedSize)
            let average = try input.int(limit: ChunkerConfiguration.maximumAllowedSize)
            let maximum = try input.int(limit: ChunkerConfiguration.maximumAllowedSize)
            chunker = try ChunkerConfiguration(minimumSize: minimum, averageSize: average, maximumSize: maximum,
                                               normalizationLevel: Int(try input.byte()))
        } catch let error as XferError where error.code == .invalidConfiguration {
            throw XferError(.invalidManifest, "manifest chunk limits are invalid: \(error.message)")
        }
        // Every entry takes at least 4 bytes (path length, kind, mode, mtime).
        let count = try input.int(limit: input.remaining / 4)
        var entries: [Entry] = []
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let path = try input.string(limit: DocumentPathRules.maximumPathBytes)
            guard let entryKind = EntryKind(rawValue: try input.byte()) else {
                throw XferError(.invalidManifest, "entry \"\(path)\" has an unknown kind")
            }
            let mode = UInt32(try input.int(limit: 0o7777))
            let zigzag = try input.varint()
            let mtime = Int64(bitPattern: zigzag >> 1) ^ -Int64(bitPattern: zigzag & 1)
            var entry = Entry(path: path, kind: entryKind, mode: mode, mtimeNanoseconds: mtime)
            switch entryKind {
            case .file:
                // Every chunk takes at least 33 bytes (length, id).
                let chunkCount = try input.int(limit: input.remaining / 33)
                entry.chunks.reserveCapacity(chunkCount)
                for _ in 0..<chunkCount {
                    let length = try input.int(limit: chunker.maximumSize)
                    let id = ChunkID(bytes: try input.bytes(ChunkID.byteCount))!
                    entry.chunks.append(ChunkReference(id: id, length: length))
                }
            case .symlink:
                entry.symlinkTarget = try input.string(limit: DocumentPathRules.maximumPathBytes)
            case .directory:
                break
            }
            entries.append(entry)
        }
        guard input.remaining == 0 else {
            throw XferError(.invalidManifest, "manifest has \(input.remaining) bytes after its last entry")
        }
        self.kind = kind
        self.chunker = chunker
        self.entries = entries
        // Sorting is part of the canonical form: the stored order must already be sorted.
        try validate()
    }
}

/// Appends the primitives of xfer's binary formats.
struct ByteWriter {
    var buffer: [UInt8] = []

    mutating func byte(_ value: UInt8) { buffer.append(value) }
    mutating func bytes(_ values: [UInt8]) { buffer.append(contentsOf: values) }

    /// Unsigned LEB128: seven bits a byte, low first, high bit set on all but the last.
    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            buffer.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        buffer.append(UInt8(v))
    }

    /// A varint byte length, then the UTF-8 bytes.
    mutating func string(_ value: String) {
        varint(UInt64(value.utf8.count))
        buffer.append(contentsOf: value.utf8)
    }
}

/// Reads the primitives of xfer's binary formats, refusing truncated or non-canonical input.
struct ByteReader {
    private let data: [UInt8]
    private var position = 0

    init(_ data: [UInt8]) { self.data = data }

    var remaining: Int { data.count - position }

    mutating func byte() throws -> UInt8 {
        guard position < data.count else { throw truncated() }
        defer { position += 1 }
        return data[position]
    }

    mutating func bytes(_ count: Int) throws -> [UInt8] {
        guard count <= remaining else { throw truncated() }
        defer { position += count }
        return Array(data[position..<(position + count)])
    }

    /// A minimal LEB128 varint of at most 64 bits.
    mutating func varint() throws -> UInt64 {
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
    mutating func int(limit: Int) throws -> Int {
        let value = try varint()
        guard value <= UInt64(max(0, limit)) else {
            throw XferError(.invalidManifest, "value \(value) is over its limit of \(limit)")
        }
        return Int(value)
    }

    /// A varint length (at most `limit`) and that many bytes of valid UTF-8.
    mutating func string(limit: Int) throws -> String {
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
