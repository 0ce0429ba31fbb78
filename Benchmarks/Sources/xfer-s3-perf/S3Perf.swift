// xfer-s3-perf: what an object store costs per object against per byte, in one run, to choose
// between one object per chunk and packs of chunks (docs/PERFORMANCE.md, docs/SCALING.md).
//
//   xfer-s3-perf [--total SIZE] [--chunk SIZE] [--json]
//
// Needs XFER_S3_ENDPOINT and the AWS_* keys (tools/bench/bench-s3.sh starts a throwaway Ceph RGW and
// sets them). Writes TOTAL of incompressible data into a fresh bucket, as CHUNK-sized objects
// at several parallelisms and as packs of several sizes, then reads it back the same ways,
// plus ranged reads of single chunks out of packs (what a pull of a few edited chunks does).
// Each figure is the best of --repeat runs.
import Foundation
import XferCore
import XferServer

struct Arguments {
    var total = 256 << 20
    var chunk = 64 << 10
    var repeats = 2
    var json = false

    init() {
        var args = CommandLine.arguments.dropFirst()
        while let arg = args.popFirst() {
            switch arg {
            case "--total": total = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--chunk": chunk = Int(ByteCount(parsing: args.popFirst() ?? "")?.value ?? 0)
            case "--repeat": repeats = max(1, Int(args.popFirst() ?? "") ?? 2)
            case "--json": json = true
            case "-h", "--help":
                print("usage: xfer-s3-perf [--total SIZE] [--chunk SIZE] [--repeat N] [--json]   (XFER_S3_ENDPOINT, AWS_* set)")
                exit(0)
            default:
                FileHandle.standardError.write(Data("xfer-s3-perf: unknown argument \(arg)\n".utf8))
                exit(2)
            }
        }
        guard total > 0, chunk > 0, total >= chunk else {
            FileHandle.standardError.write(Data("xfer-s3-perf: --total and --chunk must be sizes, total ≥ chunk\n".utf8))
            exit(2)
        }
    }
}

struct Row: Codable {
    var operation: String
    var objectBytes: Int
    var parallel: Int
    var requests: Int
    var seconds: Double
    var mibPerSecond: Double
    var requestsPerSecond: Double
}

func best(_ repeats: Int, _ body: @Sendable () async throws -> Void) async throws -> Double {
    var fastest = Double.infinity
    for _ in 0..<repeats {
        let start = ContinuousClock.now
        try await body()
        let elapsed = (ContinuousClock.now - start).components
        fastest = min(fastest, Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18)
    }
    return fastest
}

@main
enum S3Perf {
    static func main() async throws {
        let arguments = Arguments()
        guard let endpoint = ProcessInfo.processInfo.environment["XFER_S3_ENDPOINT"] else {
            FileHandle.standardError.write(Data("xfer-s3-perf: set XFER_S3_ENDPOINT and AWS_* (tools/bench/bench-s3.sh does)\n".utf8))
            exit(2)
        }
        let bucket = "xfer-s3-perf-\(UInt32.random(in: 0...UInt32.max))"
        let client = S3Client(location: try S3Location(url: "s3://\(bucket)/p", endpoint: endpoint))
        try await client.createBucketIfNeeded()

        var generator = SystemRandomNumberGenerator()
        let data = (0..<arguments.total).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let chunkCount = arguments.total / arguments.chunk
        let chunkBytes = arguments.chunk
        var rows: [Row] = []

        func record(_ operation: String, objectBytes: Int, parallel: Int, requests: Int, seconds: Double) {
            let bytes = Double(chunkCount * chunkBytes)
            rows.append(Row(operation: operation, objectBytes: objectBytes, parallel: parallel, requests: requests, seconds: seconds,
                            mibPerSecond: bytes / seconds / 1_048_576, requestsPerSecond: Double(requests) / seconds))
        }

        let slice: @Sendable (Int, Int) -> [UInt8] = { index, size in
            Array(data[index * size..<min((index + 1) * size, chunkCount * chunkBytes)])
        }

        // One object per chunk.
        let chunkKeys = (0..<chunkCount).map { "p/chunks/\($0)" }
        for parallel in [16, 32, 64, 128] {
            let seconds = try await best(arguments.repeats) {
                try await concurrentForEach(Array(0..<chunkCount), width: parallel) { index in try await client.put(chunkKeys[index], slice(index, chunkBytes)) }
            }
            record("put", objectBytes: arguments.chunk, parallel: parallel, requests: chunkCount, seconds: seconds)
        }
        for parallel in [16, 32, 64, 128] {
            let seconds = try await best(arguments.repeats) {
                try await concurrentForEach(Array(0..<chunkCount), width: parallel) { index in
                    guard try await client.get(chunkKeys[index], limit: chunkBytes)?.count == chunkBytes else { throw XferError(.io, "short read") }
                }
            }
            record("get", objectBytes: arguments.chunk, parallel: parallel, requests: chunkCount, seconds: seconds)
        }

        // Packs: the same bytes in larger objects.
        for packBytes in [1 << 20, 4 << 20, 16 << 20] where packBytes > arguments.chunk {
            let perPack = packBytes / arguments.chunk
            let packs = (chunkCount + perPack - 1) / perPack
            let keys = (0..<packs).map { "p/packs/\(packBytes)/\($0)" }
            for parallel in [4, 8, 16] {
                let seconds = try await best(arguments.repeats) {
                    try await concurrentForEach(Array(0..<packs), width: parallel) { index in try await client.put(keys[index], slice(index, perPack * chunkBytes)) }
                }
                record("put", objectBytes: packBytes, parallel: parallel, requests: packs, seconds: seconds)
            }
            let seconds = try await best(arguments.repeats) {
                try await concurrentForEach(Array(0..<packs), width: 8) { index in
                    guard try await client.get(keys[index], limit: packBytes) != nil else { throw XferError(.io, "missing pack") }
                }
            }
            record("get", objectBytes: packBytes, parallel: 8, requests: packs, seconds: seconds)
            // Every chunk read alone out of its pack with a ranged GET.
            let ranged = try await best(arguments.repeats) {
                try await concurrentForEach(Array(0..<chunkCount), width: 32) { index in
                    let offset = Int64((index % perPack) * chunkBytes)
                    guard try await client.get(keys[index / perPack], range: offset..<offset + Int64(chunkBytes)) != nil else {
                        throw XferError(.io, "missing pack")
                    }
                }
            }
            record("get-range", objectBytes: arguments.chunk, parallel: 32, requests: chunkCount, seconds: ranged)
            try await concurrentForEach(keys, width: 16) { try await client.delete($0) }
        }
        try await concurrentForEach(chunkKeys, width: 64) { try await client.delete($0) }

        if arguments.json {
            let encoder = JSONEncoder()
            encoder.keyEncodingStrategy = .convertToSnakeCase
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(rows), as: UTF8.self))
        } else {
            print("\(arguments.total >> 20) MiB as \(chunkCount) chunks of \(arguments.chunk >> 10) KiB; best of \(arguments.repeats)")
            print("operation   object      parallel  requests   seconds     MiB/s   requests/s")
            for row in rows {
                let object = row.objectBytes >= 1 << 20 ? "\(row.objectBytes >> 20) MiB" : "\(row.objectBytes >> 10) KiB"
                print(String(format: "%-10@  %-10@  %8d  %8d  %8.3f  %8.1f  %10.0f", row.operation as NSString, object as NSString,
                             row.parallel, row.requests, row.seconds, row.mibPerSecond, row.requestsPerSecond))
            }
        }
    }
}
