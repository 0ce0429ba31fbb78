// swift-tools-version: 6.1
// Benchmarks live in their own package so that package-benchmark stays out of the main
// build and its tests. `tools/bench/perf.sh` runs xfer-perf; `swift package benchmark` runs the
// microbenchmarks.
import PackageDescription

let package = Package(
    name: "xfer-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: "xfer"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "xfer-perf",
            dependencies: [.product(name: "XferCore", package: "xfer")],
            path: "Sources/xfer-perf"
        ),
        .executableTarget(
            name: "xfer-s3-perf",
            dependencies: [
                .product(name: "XferCore", package: "xfer"),
                .product(name: "XferServer", package: "xfer"),
            ],
            path: "Sources/xfer-s3-perf"
        ),
        .executableTarget(
            name: "XferCoreBenchmarks",
            dependencies: [
                .product(name: "XferCore", package: "xfer"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/XferCoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
