// xfer-perf: measures the chunking core against this machine's own ceilings, in one run.
//
//   xfer-perf FILE [--sha-ceiling BYTES_PER_S] [--level N] [--repeat N] [--json]
//
// FILE should be ~1 GiB of real data in the page cache (tools/bench/perf.sh makes one). Every rate
// is the best of --repeat runs, since these machines are noisy; ratios compare rates taken
// in this same run.
import Dispatch
import Foundation
import XferCore

struct Arguments {
    var file = ""
    var shaCeiling: Double? = nil
    var level: Int32 = 1  // what a push uses (CompressionPolicy.default)
    var repeats = 3
    var json = false
    var options = ChunkPipeline.Options()

    init() {
        var args = CommandLine.arguments.dropFirst()
        while let arg = args.popFirst() {
            switch arg {
            case "--sha-ceiling": shaCeiling = Double(args.popFirst() ?? "")
            case "--level": level = Int32(args.popFirst() ?? "") ?? 1
            case "--repeat": repeats = max(1, Int(args.popFirst() ?? "") ?? 3)
            case "--json": json = true
            case "--buffer": options.bufferSize = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--read": options.readSize = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--in-flight": options.maximumBytesInFlight = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--batch": options.batchSize = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--workers": options.workers = Int(args.popFirst() ?? "") ?? options.workers
            case "-h", "--help":
                print("usage: xfer-perf FILE [--sha-ceiling BYTES_PER_S] [--level N] [--repeat N] [--json] [--buffer SIZE] [--read SIZE] [--in-flight SIZE] [--batch SIZE] [--workers N]")
                exit(0)
            default: file = arg
            }
        }
        if file.isEmpty {
            FileHandle.standardError.write(Data("xfer-perf: give a data file (tools/bench/perf.sh makes one)\n".utf8))
            exit(2)
        }
    }
}

/// Runs `body` `repeats` times and returns the best rate in bytes per second.
func bestRate(bytes: Int, repeats: Int, _ body: () throws -> Void) rethrows -> Double {
    var best = 0.0
    for _ in 0..<repeats {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        best = max(best, Double(bytes) / seconds)
    }
    return best
}

func log(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }

let arguments = Arguments()
guard let data = FileManager.default.contents(atPath: arguments.file) else {
    log("xfer-perf: cannot read \(arguments.file)")
    exit(1)
}
let bytes = [UInt8](data)
let config = ChunkerConfiguration.default
log("xfer-perf: \(ByteCount(Int64(bytes.count))) from \(arguments.file), chunks \(config)")

// 1. The chunker alone, one core, from memory.
var lengths: [Int] = []
let chunkerRate = bytes.withUnsafeBytes { raw in
    bestRate(bytes: bytes.count, repeats: arguments.repeats) {
        lengths = Chunker.chunkLengths(of: raw, configuration: config)
    }
}
log("chunker alone: \(chunkerRate / 1e9) GB/s, \(lengths.count) chunks")

// 1b. The keyed chunker of an end-to-end encrypted container (its own Gear table), against
// the plain one in this same run: the cut points move, the cost must not.
let keyed = ContainerKey.generate().chunking
var keyedLengths: [Int] = []
let keyedChunkerRate = bytes.withUnsafeBytes { raw in
    bestRate(bytes: bytes.count, repeats: arguments.repeats) {
        keyedLengths = Chunker.chunkLengths(of: raw, configuration: config, gear: keyed.gear)
    }
}
log("keyed chunker alone: \(keyedChunkerRate / 1e9) GB/s, \(keyedLengths.count) chunks")

// 1c. Chunk ids over the same chunks: SHA-256, and the keyed HMAC-SHA-256 of such a container.
func idRate(_ lengths: [Int], _ id: (UnsafeRawBufferPointer) -> ChunkID) -> Double {
    bytes.withUnsafeBytes { raw in
        bestRate(bytes: bytes.count, repeats: arguments.repeats) {
            var offset = 0
            for length in lengths {
                _ = id(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]))
                offset += length
            }
        }
    }
}
let plainIDRate = idRate(keyedLengths) { ChunkID.of($0) }
let keyedIDRate = idRate(keyedLengths) { keyed.id(of: $0) }
log("chunk ids one core: sha256 \(plainIDRate / 1e9) GB/s, keyed hmac-sha256 \(keyedIDRate / 1e9) GB/s")
// The ids as the pipeline makes them: a batch of chunks (about 512 KiB) at a time, two hashed at
// once where the processor has the SHA extensions (SHA256Lanes).
let lanesIDRate = bytes.withUnsafeBytes { raw in
    bestRate(bytes: bytes.count, repeats: arguments.repeats) {
        var offset = 0
        var batch: [UnsafeRawBufferPointer] = []
        for length in keyedLengths {
            batch.append(UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)]))
            offset += length
            if batch.reduce(0, { $0 + $1.count }) >= 512 << 10 {
                _ = SHA256Lanes.ids(of: batch)
                batch.removeAll(keepingCapacity: true)
            }
        }
        _ = SHA256Lanes.ids(of: batch)
    }
}
log("chunk ids one core, a batch at a time (interleaved: \(SHA256Lanes.interleaved)): \(lanesIDRate / 1e9) GB/s")

// 2. SHA-256 ceiling on one core, in-process over the same 64 KiB blocks openssl speed uses.
let shaInProcess = bytes.withUnsafeBytes { raw in
    bestRate(bytes: bytes.count, repeats: arguments.repeats) {
        var hasher = SHA256Hasher()
        var offset = 0
        while offset < raw.count {
            let end = min(raw.count, offset + 65536)
            hasher.update(UnsafeRawBufferPointer(rebasing: raw[offset..<end]))
            _ = hasher.finalize()
            offset = end
        }
    }
}
let shaCeiling = arguments.shaCeiling ?? shaInProcess
log("sha256 one core: \(shaInProcess / 1e9) GB/s in-process, ceiling used \(shaCeiling / 1e9) GB/s")

// 3. The pipeline, hash only, both cores, from the file (page cache).
var hashOptions = arguments.options
hashOptions.chunker = config
let hashRate = try bestRate(bytes: bytes.count, repeats: arguments.repeats) {
    try ChunkPipeline(options: hashOptions).run([.file(arguments.file)]) { _ in }
}
log("pipeline chunk+sha256: \(hashRate / 1e9) GB/s")

// 4. zstd ceiling: one core compressing the same chunks at the same level.
let policy = CompressionPolicy(level: arguments.level)
let zstdRate = try bytes.withUnsafeBytes { raw in
    try bestRate(bytes: bytes.count, repeats: max(1, arguments.repeats - 1)) {
        var offset = 0
        for length in lengths {
            let chunk = UnsafeRawBufferPointer(rebasing: raw[offset..<(offset + length)])
            _ = try Zstd.encode(chunk, id: ChunkID.of([UInt8]()), policy: policy)
            offset += length
        }
    }
}
log("zstd level \(arguments.level) one core: \(zstdRate / 1e9) GB/s")

// 5. The pipeline, hash and compress, both cores.
var compressOptions = hashOptions
compressOptions.compression = policy
let compressRate = try bestRate(bytes: bytes.count, repeats: max(1, arguments.repeats - 1)) {
    try ChunkPipeline(options: compressOptions).run([.file(arguments.file)]) { _ in }
}
log("pipeline chunk+sha256+zstd: \(compressRate / 1e9) GB/s")

struct Row: Codable {
    var name: String
    var value: Double
    var ceiling: Double?
    var ratio: Double?
    var target: Double
    var pass: Bool
}
let rows = [
    Row(name: "chunker alone, one core (GB/s)", value: chunkerRate / 1e9, ceiling: nil, ratio: nil,
        target: 2.5, pass: chunkerRate / 1e9 >= 2.5),
    Row(name: "keyed chunker / chunker, one core", value: keyedChunkerRate / 1e9, ceiling: chunkerRate / 1e9,
        ratio: keyedChunkerRate / chunkerRate, target: 0.95, pass: keyedChunkerRate / chunkerRate >= 0.95),
    Row(name: "keyed ids (HMAC-SHA-256) / ids (SHA-256), one core", value: keyedIDRate / 1e9, ceiling: plainIDRate / 1e9,
        ratio: keyedIDRate / plainIDRate, target: 0.95, pass: keyedIDRate / plainIDRate >= 0.95),
    // Two cores' ceiling: each byte's single-core CPU time over every stage it passes, halved.
    Row(name: "chunk+sha256, both cores / two-core ceiling (cut + sha256)", value: hashRate / 1e9,
        ceiling: 2 / (1 / chunkerRate + 1 / lanesIDRate) / 1e9,
        ratio: hashRate * (1 / chunkerRate + 1 / lanesIDRate) / 2, target: 1 / 1.2,
        pass: hashRate * (1 / chunkerRate + 1 / lanesIDRate) / 2 >= 1 / 1.2),
    Row(name: "chunk+sha256+zstd-\(arguments.level), both cores / two-core ceiling (cut + sha256 + zstd)",
        value: compressRate / 1e9, ceiling: 2 / (1 / chunkerRate + 1 / lanesIDRate + 1 / zstdRate) / 1e9,
        ratio: compressRate * (1 / chunkerRate + 1 / lanesIDRate + 1 / zstdRate) / 2, target: 1 / 1.2,
        pass: compressRate * (1 / chunkerRate + 1 / lanesIDRate + 1 / zstdRate) / 2 >= 1 / 1.2),
]
if arguments.json {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    print(String(decoding: try encoder.encode(rows), as: UTF8.self))
} else {
    for row in rows {
        let measured = String(format: "%.2f GB/s", row.value)
        let against = row.ratio.map { String(format: "ratio %.2f (ceiling %.2f GB/s)", $0, row.ceiling!) } ?? ""
        let target = row.ratio == nil ? String(format: "target >= %.2f GB/s", row.target) : String(format: "target >= %.2f", row.target)
        print("\(row.pass ? "PASS" : "MISS")  \(row.name): \(measured) \(against)  [\(target)]")
    }
}
