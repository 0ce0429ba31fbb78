// swift-tools-version: 6.1
// Coverage-guided fuzzing (libFuzzer) of every decoder a network peer can reach, in its own
// package so that the instrumented build stays out of the main one (docs/RELIABILITY.md,
// "Coverage-guided fuzzing"). One executable a decoder family, each exporting
// `LLVMFuzzerTestOneInput`; libFuzzer's own `main` drives it. Built and run by
// `tools/suites/fuzz-libfuzzer.sh`:
//
//     swift build --package-path Fuzz -c release --sanitize=fuzzer
//
// Only what the harnesses import is built (XferCore, XferProtocol, XferDav): no server or
// client dependency is compiled, though the main package's are resolved.
import PackageDescription

let harnesses = ["manifest", "delta", "frames", "davxml", "davif", "names", "json"]

let package = Package(
    name: "xfer-fuzz",
    dependencies: [
        .package(path: "xfer"),
    ],
    targets: [
        .target(
            name: "FuzzSupport",
            dependencies: [
                .product(name: "XferCore", package: "xfer"),
                .product(name: "XferProtocol", package: "xfer"),
            ]
        ),
    ] + harnesses.map { name in
        .executableTarget(
            name: "fuzz-\(name)",
            dependencies: [
                "FuzzSupport",
                .product(name: "XferCore", package: "xfer"),
                .product(name: "XferProtocol", package: "xfer"),
                .product(name: "XferDav", package: "xfer"),
            ]
        )
    },
    swiftLanguageModes: [.v6]
)
