import Foundation
import Testing
import XferCore
import XferProtocol

/// Seeded random-mutation fuzzing of every decoder that reads bytes from the network or disk:
/// manifests and manifest deltas, upload frames, compressed chunks and the JSON messages.
///
/// Each input is a valid one with 1–8 mutations (bit flips, random or boundary bytes,
/// insertions, deletions, duplicated runs, truncation). A decoder must return a value or throw
/// an ``XferError``: anything else, or a trap, fails the run. The run is reproducible from
/// `XFER_FUZZ_SEED`; `XFER_FUZZ_ITERATIONS` sets inputs per decoder (50,000 by default;
/// `tools/suites/fuzz.sh` runs 200,000 for each of the five, a million in all).
@Suite struct FuzzTests {
    static let iterations = Int(ProcessInfo.processInfo.environment["XFER_FUZZ_ITERATIONS"] ?? "") ?? 50_000
    static let seed = UInt64(ProcessInfo.processInfo.environment["XFER_FUZZ_SEED"] ?? "") ?? 0x5eed

    /// Mutates a copy of `input`.
    static func mutate(_ input: [UInt8], _ rng: inout SplitMix64) -> [UInt8] {
        var bytes = input
        let interesting: [UInt8] = [0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe, 0x40, 0x3f]
        for _ in 0..<(1 + Int(rng.next() % 8)) {
            let position = bytes.isEmpty ? 0 : Int(rng.next() % UInt64(bytes.count))
            switch rng.next() % 7 {
            case 0 where !bytes.isEmpty: bytes[position] ^= 1 << UInt8(rng.next() % 8)
            case 1 where !bytes.isEmpty: bytes[position] = UInt8(truncatingIfNeeded: rng.next())
            case 2 where !bytes.isEmpty: bytes[position] = interesting[Int(rng.next() % UInt64(interesting.count))]
            case 3:
                bytes.insert(
                    contentsOf: (0..<(1 + rng.next() % 16)).map { _ in UInt8(truncatingIfNeeded: rng.next()) },
                    at: position)
            case 4 where !bytes.isEmpty:
                bytes.removeSubrange(position..<min(bytes.count, position + 1 + Int(rng.next() % 32)))
            case 5 where !bytes.isEmpty:
                let end = min(bytes.count, position + 1 + Int(rng.next() % 64))
                bytes.insert(contentsOf: Array(bytes[position..<end]), at: Int(rng.next() % UInt64(bytes.count)))
            default: bytes = Array(bytes.prefix(position))
            }
        }
        return bytes
    }

    /// Runs `decode` on `iterations` mutations of the seeds; counts accepted and rejected inputs.
    static func fuzz(_ name: String, seeds: [[UInt8]], salt: UInt64, _ decode: ([UInt8]) throws -> Void) -> (
        accepted: Int, rejected: Int
    ) {
        var rng = SplitMix64(seed: seed ^ salt)
        var counts = (accepted: 0, rejected: 0)
        for index in 0..<iterations {
            let input = mutate(seeds[index % seeds.count], &rng)
            do {
                try decode(input)
                counts.accepted += 1
            } catch let error as XferError {
                #expect(!error.message.isEmpty)
                counts.rejected += 1
            } catch {
                Issue.record(
                    "\(name): input \(index) (seed \(seed)) threw \(type(of: error)), not an XferError: \(error)")
                return counts
            }
        }
        // The mutations must reach the decoder's error paths, not just its happy path.
        #expect(counts.rejected > 0, "\(name): no input was rejected")
        return counts
    }

    static func sampleManifests() throws -> [Manifest] {
        let ids = (0..<4).map { ChunkID.of([UInt8($0)]) }
        let package = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                .init(path: "a", kind: .directory, mode: 0o755, mtimeNanoseconds: -5),
                .init(path: "a/link", kind: .symlink, mode: 0o777, mtimeNanoseconds: 0, symlinkTarget: "../b.txt"),
                .init(
                    path: "a/x", kind: .file, mode: 0o600, mtimeNanoseconds: 1, chunks: [.init(id: ids[3], length: 9)]),
                .init(
                    path: "b.txt", kind: .file, mode: 0o644, mtimeNanoseconds: 1_700_000_000_123_456_789,
                    chunks: [.init(id: ids[0], length: 70000), .init(id: ids[1], length: 1)])
            ])
        let file = try Manifest(
            kind: .file, chunker: .default,
            entries: [
                .init(
                    path: "", kind: .file, mode: 0o644, mtimeNanoseconds: 2,
                    chunks: [.init(id: ids[2], length: 262144), .init(id: ids[0], length: 5)])
            ])
        return [package, file]
    }

    @Test func manifestsAndDeltas() throws {
        let manifests = try Self.sampleManifests()
        let plain = Self.fuzz("manifest", seeds: manifests.map { $0.encoded() }, salt: 1) {
            _ = try Manifest(decoding: $0)
        }
        let base = manifests[0]
        var edited = Array(base.entries)
        edited[3].chunks.append(.init(id: ChunkID.of([9]), length: 77))
        let target = try Manifest(kind: .package, chunker: .default, entries: edited)
        let deltas = Self.fuzz(
            "manifest delta", seeds: [target.delta(against: base), target.delta(against: nil)], salt: 2
        ) {
            _ = try Manifest(applying: $0, to: base)
        }
        #expect(plain.accepted + plain.rejected + deltas.accepted + deltas.rejected == 2 * Self.iterations)
    }

    @Test func uploadFrames() throws {
        let chunks = try (0..<4).map { index -> EncodedChunk in
            let bytes = [UInt8](repeating: UInt8(index), count: 1000 * index + 3)
            return try bytes.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(bytes), policy: .default) }
        }
        _ = Self.fuzz("upload frames", seeds: [ChunkFrames.encode(chunks), ChunkFrames.encode([chunks[1]])], salt: 3) {
            body in
            var decoder = ChunkFrameDecoder()
            // Fed in two pieces, as a network delivers it.
            let middle = body.count / 2
            for chunk in try decoder.feed(body[..<middle]) + decoder.feed(body[middle...]) {
                _ = try chunk.decoded()
            }
            try decoder.finish()
        }
    }

    @Test func compressedChunks() throws {
        let text = Array(String(repeating: "the chunk of a file is named by its hash ", count: 400).utf8)
        let encoded = try text.withUnsafeBytes { try Zstd.encode($0, id: ChunkID.of(text), policy: .default) }
        _ = Self.fuzz("zstd chunk", seeds: [encoded.payload], salt: 4) { payload in
            let chunk = EncodedChunk(id: encoded.id, length: encoded.length, encoding: .zstd, payload: payload)
            _ = try chunk.decoded(maximumLength: 1 << 20)
        }
        // A lying length (a decompression bomb's shape) is refused, not honoured.
        let bomb = EncodedChunk(id: encoded.id, length: 1 << 30, encoding: .zstd, payload: encoded.payload)
        #expect(throws: XferError.self) { _ = try bomb.decoded(maximumLength: 1 << 20) }
    }

    @Test func jsonMessages() throws {
        let seeds: [[UInt8]] = [
            Array(
                #"{"path":"Documents/a.txt","kind":"file","size":12,"mtime_ns":1700000000000000000,"mode":420,"base_version":3,"device":"d"}"#
                    .utf8),
            Array(#"{"path":"p.pkg","version":4,"base_version":null,"manifest":"AAEC"}"#.utf8),
            Array(#"{"key":"k","value":{"a":[1,2.5,"x",null,true]},"timestamp_ns":5,"device":"d"}"#.utf8),
            Array(#"{"ids":["0000000000000000000000000000000000000000000000000000000000000000"]}"#.utf8),
            Array(#"{"path":"x","keep":2,"keep_all":true}"#.utf8)
        ]
        _ = Self.fuzz("json", seeds: seeds, salt: 5) { bytes in
            switch bytes.count % 5 {
            case 0: _ = try WireJSON.decode(AnnounceRequest.self, from: bytes)
            case 1: _ = try WireJSON.decode(CommitRequest.self, from: bytes)
            case 2: _ = try WireJSON.decode(KeyValueWrite.self, from: bytes)
            case 3: _ = try WireJSON.decode(ChunkIDList.self, from: bytes).parsed()
            default: _ = try WireJSON.decode(ResolveRequest.self, from: bytes)
            }
        }
    }
}
