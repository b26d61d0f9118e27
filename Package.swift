// swift-tools-version:6.1
import PackageDescription

// Module boundaries follow ../shared/DESIGN.md: data flows one way,
// bundle -> validated AppBundle -> installed App (registry) -> ...
let package = Package(
    name: "appd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "appd", targets: ["appd"]),
        .library(name: "AppBundle", targets: ["AppBundle"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // C shims for syscalls Swift's Glibc module does not export.
        .target(name: "CLinux"),
        // Reads and validates a bundle. Pure: it reads, never writes.
        .target(name: "AppBundle"),
        // The state root: registry, uid allocation, installer, uninstall, doctor.
        .target(
            name: "AppContainers",
            dependencies: ["AppBundle", "CLinux", .product(name: "GRDB", package: "GRDB.swift")]
        ),
        // Sandbox profiles and the host they run on (Host/: kernel features, cgroups).
        .target(name: "Sandbox", dependencies: ["AppBundle", "CLinux"]),
        .executableTarget(
            name: "appd",
            dependencies: [
                "AppBundle", "AppContainers",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The sample app; scripts/build-sample assembles it into Hello.app.
        .executableTarget(
            name: "Hello",
            path: "Examples/Hello",
            exclude: ["Info.plist", "Entitlements.plist", "greeting.txt", "README.md"]
        ),
        .testTarget(name: "AppBundleTests", dependencies: ["AppBundle"]),
        .testTarget(name: "SandboxHostTests", dependencies: ["Sandbox", "AppBundle"]),
        .testTarget(name: "AppContainersTests", dependencies: ["AppContainers", "AppBundle", "appd"]),
    ]
)
