/// Manifests as deltas against a base version (docs/FORMAT.md, "Manifest delta v1").
///
/// A 1 GiB file has about 16,000 chunks, so its flat manifest is half a megabyte: more than a
/// small edit costs. A delta names its base by digest and describes each file's chunk list
/// as runs copied from the same path's list in the base plus the chunks that are new, so an
/// edit costs bytes on the order of the edit. Entry metadata (path, mode, mtime) is sent in
/// full; it is small.
extension Manifest {
    static let deltaMagic: [UInt8] = Array("XFD".utf8)
    /// The delta encoding version.
    public static let deltaFormatVersion: UInt8 = 1

    private enum DeltaOp: UInt8 {
        case copy = 0
        case add = 1
    }

    /// Encodes this manifest as a delta against `base`.
    /// - Parameter base: The version the receiver already has, or `nil` (every chunk is listed).
    /// - Returns: Bytes that ``init(applying:to:)`` turns back into this manifest given the same base.
    public func delta(against base: Manifest?) -> [UInt8] {
        var out = ByteWriter()
        // Without a base every chunk is listed: about the size of the whole encoding.
        if base == nil { out.buffer.reserveCapacity(estimatedEncodedSize + 64) }
        writeDelta(against: base, into: &out, drainingPast: .max) { _ in }
        return out.buffer
    }

    /// Writes ``delta(against:)``'s bytes into `out`, handing them to `drain` (which empties
    /// `out`) whenever more than `limit` have gathered, after an entry; what is left at the
    /// end stays in `out`.
    private func writeDelta(
        against base: Manifest?, into out: inout ByteWriter, drainingPast limit: Int,
        _ drain: (inout ByteWriter) throws -> Void
    ) rethrows {
        out.bytes(Self.deltaMagic)
        out.byte(Self.deltaFormatVersion)
        out.bytes(base?.digest.bytes ?? [UInt8](repeating: 0, count: ChunkID.byteCount))
        out.byte(kind.rawValue)
        out.chunker(chunker)
        out.varint(UInt64(entries.count))
        // Both entry lists are in bytewise path order: the base's entry of a path, if any, is
        // found by walking the two together (no map of the base's paths).
        let baseEntries = base?.entries ?? Entries()
        var cursor = 0
        for index in entries.indices {
            out.entryHeader(entries, index)
            if entries.kind(at: index) == .file {
                let path = entries.pathBytes(at: index)
                while cursor < baseEntries.count && baseEntries.pathBytes(at: cursor).lexicographicallyPrecedes(path) {
                    cursor += 1
                }
                if cursor < baseEntries.count, baseEntries.kind(at: cursor) == .file,
                    baseEntries.pathBytes(at: cursor).elementsEqual(path)
                {
                    out.varint(UInt64(cursor + 1))
                    Self.writeOps(entries.chunks(at: index), against: baseEntries.chunks(at: cursor), to: &out)
                } else {
                    out.varint(0)
                    Self.writeOps(entries.chunks(at: index), against: Chunks.none, to: &out)
                }
            }
            if out.buffer.count > limit { try drain(&out) }
        }
    }

    static let compressedDeltaMagic: [UInt8] = Array("XFDZ".utf8)

    /// Whether `delta` is in the compressed form of ``compressedDelta(against:)``.
    public static func isCompressedDelta(_ delta: some Collection<UInt8>) -> Bool {
        delta.starts(with: compressedDeltaMagic)
    }

    /// Whether `bytes` are a delta (plain or compressed) rather than a canonical encoding.
    public static func isDelta(_ bytes: some Collection<UInt8>) -> Bool {
        bytes.starts(with: deltaMagic) || isCompressedDelta(bytes)
    }

    /// The most a compressed delta of `compressed` bytes may inflate to: 64 times plus 64 KiB,
    /// within ``maximumEncodedSize``, so a small request cannot make the receiver reserve much.
    /// Deltas of real trees compress 3–10 times; one that would compress more goes plain.
    static func inflationLimit(compressed: Int) -> Int {
        min(maximumEncodedSize, compressed * 64 + (64 << 10))
    }

    /// Encodes this manifest as a delta against `base`, compressed for the wire when that is
    /// smaller: `XFDZ` then one zstd frame of ``delta(against:)``'s bytes. Entry headers (paths,
    /// modes, times) are sent in full, and a tree's paths share most of their bytes, so a
    /// package's delta shrinks several times. ``init(applying:to:)`` reads both forms.
    /// - Parameter base: The version the receiver already has, or `nil`.
    /// - Returns: The compressed delta, or the plain one if compressing saves nothing.
    public func compressedDelta(against base: Manifest?) -> SpillArray<UInt8> {
        // Made twice, a piece at a time, never held whole: once to learn its size (the frame
        // declares it), once into the compressor (a tree of 200,000 files held 28 MB more
        // with the plain delta and zstd's output both whole).
        let piece = 256 << 10
        var out = ByteWriter()
        var size = 0
        writeDelta(against: base, into: &out, drainingPast: piece) {
            size += $0.buffer.count
            $0.buffer.removeAll(keepingCapacity: true)
        }
        size += out.buffer.count
        guard size > 128 else { return SpillArray(delta(against: base)) }
        let compressed = try? Zstd.frame(level: 3, pledgedSize: size, prefix: Self.compressedDeltaMagic) { write in
            var out = ByteWriter()
            out.buffer.reserveCapacity(piece + (64 << 10))
            try writeDelta(against: base, into: &out, drainingPast: piece) { out in
                try out.buffer.withUnsafeBytes { try write($0) }
                out.buffer.removeAll(keepingCapacity: true)
            }
            try out.buffer.withUnsafeBytes { try write($0) }
        }
        guard let compressed, compressed.count < size,
            size <= Self.inflationLimit(compressed: compressed.count - Self.compressedDeltaMagic.count)
        else { return SpillArray(delta(against: base)) }
        return compressed
    }

    /// Rebuilds a manifest from a delta and the base it was made against.
    /// - Parameters:
    ///   - delta: Bytes from ``delta(against:)``.
    ///   - base: The base version; must be the one the delta names (`nil` for a delta without base).
    /// - Throws: `invalid_manifest` for a malformed delta, a base other than the one it names,
    ///   a copy outside the base's chunk list, or a result that is not a valid manifest.
    public init(applying delta: [UInt8], to base: Manifest?) throws {
        self = try delta.withUnsafeBufferPointer { try Self.applying($0, to: base) }
    }

    /// The same, of a delta held in a ``SpillArray`` (a tree's, read from a device's state).
    public init(applying delta: SpillArray<UInt8>, to base: Manifest?) throws {
        self = try delta.withUnsafeBufferPointer { try Self.applying($0, to: base) }
    }

    private static func applying(_ delta: UnsafeBufferPointer<UInt8>, to base: Manifest?) throws -> Manifest {
        guard delta.count <= Self.maximumEncodedSize else {
            throw XferError(
                .tooLarge, "manifest delta is \(delta.count) bytes, over the limit of \(Self.maximumEncodedSize)")
        }
        if delta.starts(with: Self.compressedDeltaMagic) {
            // Inflated only up to the same limit, and only once: the inner bytes must be a plain delta.
            let plain: SpillArray<UInt8>
            do {
                let frame = UnsafeRawBufferPointer(
                    UnsafeBufferPointer(rebasing: delta[Self.compressedDeltaMagic.count...]))  // read in place
                plain = try Zstd.decompressFrame(frame, maximumLength: Self.inflationLimit(compressed: frame.count))
            } catch let error as XferError where error.code != .tooLarge {
                throw XferError(.invalidManifest, "the compressed manifest delta does not decompress: \(error.message)")
            }
            guard !plain.starts(with: Self.compressedDeltaMagic) else {
                throw XferError(.invalidManifest, "a compressed manifest delta holds another compressed one")
            }
            return try plain.withUnsafeBufferPointer { try applying($0, to: base) }
        }
        var input = ByteReader(delta)
        guard try input.bytes(3) == Self.deltaMagic else {
            throw XferError(.invalidManifest, "not an xfer manifest delta (bad magic)")
        }
        let version = try input.byte()
        guard version == Self.deltaFormatVersion else {
            throw XferError(
                .invalidManifest,
                "manifest delta version \(version) is not supported (this build reads \(Self.deltaFormatVersion))")
        }
        let named = try input.bytes(ChunkID.byteCount)
        let expected = base?.digest.bytes ?? [UInt8](repeating: 0, count: ChunkID.byteCount)
        guard named == expected else {
            throw XferError(
                .invalidManifest,
                "the delta was made against base \(ChunkID(bytes: named)!) but the base given is \(base.map { $0.digest.hex } ?? "none")"
            )
        }
        guard let kind = Kind(rawValue: try input.byte()) else {
            throw XferError(.invalidManifest, "unknown manifest kind")
        }
        let chunker = try input.chunker()
        let count = try input.int(limit: input.remaining / 4)
        try Self.checkTotals(entries: count, references: 0, bytes: 0)
        let baseEntries = base?.entries ?? Entries()
        // Room for exactly what the delta makes, counted first as for a decoding.
        let room = Self.room(of: input, entries: count, against: baseEntries)
        var builder = Builder(kind: kind, chunker: chunker, entries: count, nameBytes: room.names, chunks: room.chunks)
        // Totals over the whole result, checked before each copy or add is made: a few bytes
        // of delta can name millions of references, so nothing is built past the limits.
        var totals = (references: 0, bytes: Int64(0))
        for _ in 0..<count {
            if try input.entryHeader(into: &builder) == .file {
                let reference = try input.int(limit: baseEntries.count)
                let source = reference == 0 ? Chunks.none : baseEntries.chunks(at: reference - 1)
                try Self.readOps(
                    from: &input, against: source, into: &builder, maximumLength: chunker.maximumSize,
                    entries: count, totals: &totals)
            }
        }
        guard input.remaining == 0 else {
            throw XferError(.invalidManifest, "manifest delta has \(input.remaining) bytes after its last entry")
        }
        return try builder.finish()
    }

    /// Greedy matching: every new chunk that starts a run found in `base` is copied as the
    /// longest such run from its first occurrence; everything else is added.
    private static func writeOps(_ chunks: Chunks, against base: Chunks, to out: inout ByteWriter) {
        // Offsets into `base` (its indices start where its entry's chunks start).
        let origin = base.startIndex
        // A short base (a small file's one chunk) is searched; a longer one indexed by each id's
        // first 64 bits, sorted (16 bytes a chunk, where a map took about 100: an end-to-end
        // carrier's base lists a tree's worth), and an id found by bisection.
        let indexed = base.count > 8
        var index: [(prefix: UInt64, offset: Int)] = []
        if indexed {
            index.reserveCapacity(base.count)
            for offset in 0..<base.count { index.append((base[origin + offset].id.prefix, offset)) }
            index.sort { ($0.prefix, $0.offset) < ($1.prefix, $1.offset) }
        }
        func first(_ id: ChunkID) -> Int? {
            guard indexed else { return base.firstIndex(where: { $0.id == id }).map { $0 - origin } }
            let prefix = id.prefix
            // The lowest offset of the id among those sharing its prefix (in offset order).
            var low = index.partitioningIndex { $0.prefix < prefix }
            while low < index.count && index[low].prefix == prefix {
                if base[origin + index[low].offset].id == id { return index[low].offset }
                low += 1
            }
            return nil
        }
        var ops = ByteWriter()
        // Against nothing every chunk is an add (a length and an id): room for them all at once
        // (an end-to-end carrier lists a tree's worth in one entry).
        if base.isEmpty { ops.buffer.reserveCapacity(chunks.count * (ChunkID.byteCount + 3) + 16) }
        var opCount = 0
        var pendingAdds: [ChunkReference] = []
        func flushAdds() {
            guard !pendingAdds.isEmpty else { return }
            ops.byte(DeltaOp.add.rawValue)
            ops.varint(UInt64(pendingAdds.count))
            for chunk in pendingAdds { ops.chunk(chunk) }
            pendingAdds.removeAll(keepingCapacity: true)
            opCount += 1
        }
        let count = chunks.count
        let chunkOrigin = chunks.startIndex
        var i = 0
        while i < count {
            let chunk = chunks[chunkOrigin + i]
            if let start = first(chunk.id), base[origin + start] == chunk {
                var run = 1
                while i + run < count, start + run < base.count,
                    base[origin + start + run] == chunks[chunkOrigin + i + run]
                { run += 1 }
                flushAdds()
                ops.byte(DeltaOp.copy.rawValue)
                ops.varint(UInt64(start))
                ops.varint(UInt64(run))
                opCount += 1
                i += run
            } else {
                pendingAdds.append(chunk)
                i += 1
            }
        }
        flushAdds()
        out.varint(UInt64(opCount))
        out.bytes(ops.buffer)
    }

    private static func readOps(
        from input: inout ByteReader, against base: Chunks, into builder: inout Builder, maximumLength: Int,
        entries: Int, totals: inout (references: Int, bytes: Int64)
    ) throws {
        // Every op takes at least 3 bytes.
        let opCount = try input.int(limit: input.remaining / 3)
        let origin = base.startIndex
        for _ in 0..<opCount {
            switch DeltaOp(rawValue: try input.byte()) {
            case .copy:
                let start = try input.int(limit: base.count)
                let run = try input.int(limit: base.count - start)
                guard run > 0 else { throw XferError(.invalidManifest, "manifest delta copies an empty run") }
                totals.references += run
                try checkTotals(entries: entries, references: totals.references, bytes: totals.bytes)
                for offset in start..<(start + run) { totals.bytes += Int64(base[origin + offset].length) }
                try checkTotals(entries: entries, references: totals.references, bytes: totals.bytes)
                for offset in start..<(start + run) { builder.appendChunk(base[origin + offset]) }
            case .add:
                let added = try input.int(limit: input.remaining / 33)
                guard added > 0 else { throw XferError(.invalidManifest, "manifest delta adds no chunks") }
                totals.references += added
                try checkTotals(entries: entries, references: totals.references, bytes: totals.bytes)
                for _ in 0..<added {
                    let chunk = try input.chunk(maximumLength: maximumLength)
                    totals.bytes += Int64(chunk.length)
                    builder.appendChunk(chunk)
                }
                try checkTotals(entries: entries, references: totals.references, bytes: totals.bytes)
            case nil:
                throw XferError(.invalidManifest, "manifest delta has an unknown operation")
            }
        }
    }
}
