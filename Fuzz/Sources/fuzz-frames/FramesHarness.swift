import FuzzSupport
import XferCore
import XferProtocol

/// `ChunkFrameDecoder`, the `XFU1` body of an upload (read by the server) and of a download
/// (read by the client), and each chunk it yields decoded: raw, zstd (a lying length
/// refused), zstd against a reference chunk, or sealed (opened under a container key).
///
/// The chunks are the same however the body is split (whole, in three pieces, a byte at a
/// time): the same chunks or the same error code. A body that decodes is the encoding of its
/// chunks, byte for byte. A chunk that decodes has its declared length and hashes to its id.
enum FramesHarness {
    static let limits = ChunkFrameLimits(maximumChunkLength: 1 << 20)
    /// The chunk a `zstd-against` payload may name (the one the seeds are made against).
    static let reference: (id: ChunkID, plain: [UInt8]) = {
        let plain = Array(String(repeating: "a chunk of text that a later edit changes a little; ", count: 40).utf8)
        return (ChunkID.of(plain), plain)
    }()
    static let keys = EndToEndChunks(key: try! ContainerKey(bytes: Array(0..<32)))

    /// Feeds `pieces` to a fresh decoder and finishes it.
    static func decode(_ pieces: [ArraySlice<UInt8>]) -> Result<[EncodedChunk], XferError> {
        Fuzz.outcome("ChunkFrameDecoder") {
            var decoder = ChunkFrameDecoder(limits: limits)
            var chunks: [EncodedChunk] = []
            for piece in pieces { chunks += try decoder.feed(piece) }
            try decoder.finish()
            return chunks
        }
    }

    static func same(_ a: Result<[EncodedChunk], XferError>, _ b: Result<[EncodedChunk], XferError>) -> Bool {
        switch (a, b) {
        case (.success(let x), .success(let y)): x == y
        case (.failure(let x), .failure(let y)): x.code == y.code
        default: false
        }
    }

    static func run(_ bytes: [UInt8]) {
        let whole = decode([bytes[...]])
        let hash = Fuzz.hash(bytes)
        let first = bytes.isEmpty ? 0 : Int(hash % UInt64(bytes.count + 1))
        let second = first + (bytes.count == first ? 0 : Int((hash >> 32) % UInt64(bytes.count - first + 1)))
        let thirds = decode([bytes[..<first], bytes[first..<second], bytes[second...]])
        Fuzz.check(same(whole, thirds), "a body cut at \(first) and \(second) decodes otherwise than whole: \(whole) / \(thirds)")
        if bytes.count <= 2048 {
            let single = decode(bytes.indices.map { bytes[$0...$0] })
            Fuzz.check(same(whole, single), "a body fed a byte at a time decodes otherwise than whole")
        }
        guard case .success(let chunks) = whole else { return }
        Fuzz.check(ChunkFrames.encode(chunks) == bytes, "a body that decodes is not the encoding of its chunks")
        for chunk in chunks {
            let given = chunk.reference == reference.id ? reference : nil
            guard case .success(let plain) = Fuzz.outcome("EncodedChunk.decoded", { try chunk.decoded(maximumLength: limits.maximumChunkLength, reference: given) }) else { continue }
            Fuzz.check(plain.count == chunk.length, "a \(chunk.encoding) chunk decodes to \(plain.count) bytes, not the \(chunk.length) it declares")
            if chunk.encoding == .sealed {
                if case .success(let opened) = Fuzz.outcome("EndToEndChunks.open", { try keys.open(chunk, maximumLength: limits.maximumChunkLength) }) {
                    Fuzz.check(opened.withUnsafeBytes { keys.id(of: $0) } == chunk.id, "a sealed chunk opens to bytes of another id")
                }
            } else {
                Fuzz.check(ChunkID.of(plain) == chunk.id, "a \(chunk.encoding) chunk decodes to bytes that do not hash to its id")
            }
            if chunk.encoding == .raw { Fuzz.check(plain == chunk.payload, "a raw chunk decodes to other bytes than its payload") }
        }
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        func chunk(_ plain: [UInt8]) throws -> EncodedChunk { try plain.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(plain), policy: .default) } }
        let text = Array(String(repeating: "the chunk of a file is named by its hash ", count: 60).utf8)
        let zstd = try chunk(text)
        let raw = try chunk((0..<200).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 13) })
        let empty = EncodedChunk(id: ChunkID.of([UInt8]()), length: 0, encoding: .raw, payload: [])
        var edited = reference.plain
        edited.replaceSubrange(100..<110, with: Array("EDITED!!!!".utf8))
        let against = try edited.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(edited), policy: .default, against: reference) }
        let sealed = try text.withUnsafeBytes { try keys.seal($0) }
        let lying = EncodedChunk(id: zstd.id, length: 1 << 20, encoding: .zstd, payload: zstd.payload)
        return [
            ("empty-body", ChunkFrames.encode([])),
            ("zstd", ChunkFrames.encode([zstd])),
            ("raw", ChunkFrames.encode([raw])),
            ("empty-chunk", ChunkFrames.encode([empty])),
            ("against", ChunkFrames.encode([against])),
            ("sealed", ChunkFrames.encode([sealed])),
            ("lying-length", ChunkFrames.encode([lying])),
            ("mixed", ChunkFrames.encode([raw, zstd, against, empty, sealed])),
            ("many", ChunkFrames.encode(Array(repeating: empty, count: 40) + [raw])),
        ]
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(FramesHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    FramesHarness.run(Fuzz.bytes(data, size))
    return 0
}
