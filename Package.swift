// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "xfer",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "XferCore", targets: ["XferCore"]),
        .library(name: "XferProtocol", targets: ["XferProtocol"]),
        .executable(name: "xfer", targets: ["xfer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // C libraries from the system (Debian: libzstd-dev, libssl-dev), found through pkg-config.
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .target(
            name: "XferCore",
            dependencies: ["CZstd", "CCrypto"]
        ),
        .target(
            name: "XferProtocol",
            dependencies: ["XferCore"]
        ),
        .executableTarget(
            name: "xfer",
            dependencies: [
                "XferCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "XferCoreTests",
            dependencies: ["XferCore"]
        ),
        .testTarget(
            name: "XferProtocolTests",
            dependencies: ["XferProtocol"]
        ),
        .testTarget(
            name: "XferCLITests",
            dependencies: ["XferCore", "xfer"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
