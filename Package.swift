// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "xfer",
    // Linux only, stated here rather than implied: the file-system layer uses Linux calls
    // (openat2, renameat2, inotify, fdatasync, `st_mtim`) and nothing is built or tested on
    // Darwin. A port would guard those in XferCore/Syscall and the watcher first.
    products: [
        .library(name: "XferCore", targets: ["XferCore"]),
        .library(name: "XferProtocol", targets: ["XferProtocol"]),
        .library(name: "XferDav", targets: ["XferDav"]),
        .library(name: "XferServer", targets: ["XferServer"]),
        .library(name: "XferClient", targets: ["XferClient"]),
        .library(name: "XferMount", targets: ["XferMount"]),
        .executable(name: "xfer", targets: ["xfer"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        .package(url: "https://github.com/jpsim/Yams", "5.4.0"..<"7.0.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
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
        // libfuse 3 (Debian: fuse3, libfuse3-dev) for `xfer mount`.
        .systemLibrary(
            name: "CFuse3",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        .target(
            name: "XferCore",
            dependencies: ["CZstd", "CCrypto", "CXferShims"]
        ),
        .target(
            name: "XferProtocol",
            dependencies: ["XferCore"]
        ),
        // WebDAV's request parsing (the XML bodies, the If header): pure, so Fuzz/ builds it
        // instrumented without the server's dependencies.
        .target(
            name: "XferDav",
            dependencies: ["XferCore"]
        ),
        .target(
            name: "CXferShims",
            linkerSettings: [.linkedLibrary("sqlite3")]
        ),
        .target(
            name: "XferServer",
            dependencies: [
                "XferProtocol",
                "XferDav",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        .target(
            name: "XferClient",
            dependencies: [
                "XferProtocol",
                "CXferShims",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // `xfer mount`: a container as a FUSE file system, data fetched as it is read.
        .target(
            name: "XferMount",
            dependencies: ["CFuse3", "XferClient", "XferProtocol"]
        ),
        .executableTarget(
            name: "xfer",
            dependencies: [
                "XferCore",
                "XferMount",
                "XferProtocol",
                "XferServer",
                "XferClient",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // The example daemon of docs/LIBRARY.md; built with everything, run by XferCLITests.
        .executableTarget(
            name: "xfer-example-daemon",
            dependencies: ["XferClient", "XferProtocol"],
            path: "Examples/ExampleDaemon"
        ),
        // What more than one test target needs (a child process spawned without Foundation's
        // Process, which crashes a run now and then on Linux).
        .target(
            name: "XferTestSupport",
            path: "Tests/XferTestSupport"
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
            name: "XferServerTests",
            dependencies: [
                "XferServer",
                "XferDav",
                "XferClient",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "XferClientTests",
            dependencies: [
                "XferClient",
                "XferServer",
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                "XferTestSupport",
            ]
        ),
        .testTarget(
            name: "XferMountTests",
            dependencies: ["XferMount", "XferClient", "XferProtocol"]
        ),
        .testTarget(
            name: "XferCLITests",
            dependencies: ["XferCore", "xfer", "XferTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
