import Benchmark
import XferCore

// Microbenchmarks of the chunking core on seeded random data (1 MiB per iteration).
// Run with: cd Benchmarks && swift package benchmark
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.throughput, .wallClock, .mallocCountTotal], maxDuration: .seconds(2))

    var generator = SplitMix64(seed: 42)
    let megabyte = (0..<(1 << 17)).flatMap { _ in withUnsafeBytes(of: generator.next()) { Array($0) } }
    let text = Array(String(repeating: "xfer sends only the chunks that changed. ", count: 1 << 15).utf8.prefix(1 << 20))

    Benchmark("Chunker 1 MiB random") { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(megabyte.withUnsafeBytes { Chunker.chunkLengths(of: $0) })
        }
    }
    Benchmark("SHA-256 1 MiB in 64 KiB chunks") { benchmark in
        for _ in benchmark.scaledIterations {
            var hasher = SHA256Hasher()
            megabyte.withUnsafeBytes { raw in
                for offset in stride(from: 0, to: raw.count, by: 65536) {
                    hasher.update(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + 65536)]))
                    blackHole(hasher.finalize())
                }
            }
        }
    }
    Benchmark("SHA-256 1 MiB in 64 KiB chunks, a batch at a time (SHA256Lanes)") { benchmark in
        for _ in benchmark.scaledIterations {
            megabyte.withUnsafeBytes { raw in
                let chunks = stride(from: 0, to: raw.count, by: 65536).map {
                    UnsafeRawBufferPointer(rebasing: raw[$0..<($0 + 65536)])
                }
                blackHole(SHA256Lanes.ids(of: chunks))
            }
        }
    }
    Benchmark("zstd level 3, 64 KiB text chunk") { benchmark in
        let chunk = Array(text.prefix(65536))
        let id = ChunkID.of(chunk)
        for _ in benchmark.scaledIterations {
            blackHole(try chunk.withUnsafeBytes { try Zstd.encode($0, id: id) })
        }
    }
    // Sealing at rest (xfer serve --encryption-key): compare with
    // `openssl speed -evp aes-256-gcm -bytes 65536` on the same machine (docs/PERFORMANCE.md).
    let keys = try! SealingKeys([SealingKey.generate()])
    let context = Array("xfer chunk v1".utf8)
    Benchmark("AES-256-GCM seal 1 MiB in 64 KiB values") { benchmark in
        for _ in benchmark.scaledIterations {
            for offset in stride(from: 0, to: megabyte.count, by: 65536) {
                blackHole(keys.seal(megabyte[offset..<(offset + 65536)], context: context))
            }
        }
    }
    let sealed = stride(from: 0, to: megabyte.count, by: 65536).map { keys.seal(megabyte[$0..<($0 + 65536)], context: context) }
    Benchmark("AES-256-GCM open 1 MiB in 64 KiB values") { benchmark in
        for _ in benchmark.scaledIterations {
            for value in sealed { blackHole(try keys.open(value, context: context, what: "value")) }
        }
    }
    Benchmark("Pipeline 1 MiB random, hash only") { benchmark in
        let pipeline = ChunkPipeline()
        for _ in benchmark.scaledIterations {
            blackHole(try pipeline.records(for: [.bytes(name: "m", megabyte)]))
        }
    }
}
