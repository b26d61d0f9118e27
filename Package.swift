// swift-tools-version:6.1
// appd: the iOS application model on Linux. Copyright 2025-2026 appd developers.
// Licensed under the Apache License, Version 2.0 (LICENSE at the repository's root).
//
import PackageDescription

// Concrete generic types (`[String]`, `Set<String>`, `[String: PlistValue]`, ...) get their
// metadata through accessors that call swift_getGenericMetadata with the arguments, not by
// demangling their mangled name at run time (swift_getTypeByMangledName, then a scan of every
// protocol conformance in the binary for each requirement). Short-lived processes pay each such
// lookup on every start: appd-exec on every launch (issue 15, docs/launch-path.md), appd-oci on
// every engine call (a tenth of its create in perf before its libraries had it, issue 28). So
// every module those two link is built with it.
let concreteMetadataAccessors: SwiftSetting = .unsafeFlags([
    "-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors",
])

// Module boundaries follow docs/architecture.md: data flows one way,
// bundle -> validated AppBundle -> installed App (registry) -> ...
let package = Package(
    name: "appd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "appd", targets: ["appd"]),
        .executable(name: "appd-exec", targets: ["appd-exec"]),
        .executable(name: "appd-oci", targets: ["appd-oci"]),
        .executable(name: "appctl", targets: ["appctl"]),
        .library(name: "AppBundle", targets: ["AppBundle"]),
        .library(name: "Sandbox", targets: ["Sandbox"]),
        .library(name: "AppRuntime", targets: ["AppRuntime"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        // GET /v1/metrics: the Prometheus text exposition (offline set: 2.4.1).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // .ipa installs (the client reads the zip; pinned: IPAArchive reads three of its internals).
        .package(url: "https://github.com/weichsel/ZIPFoundation", exact: "0.9.20"),
    ],
    targets: [
        // C shims for syscalls Swift's Glibc module does not export.
        .target(name: "CLinux"),
        // libseccomp, which compiles the seccomp deny list into BPF (in the daemon, not the
        // launcher).
        .systemLibrary(
            name: "CSeccomp", pkgConfig: "libseccomp", providers: [.apt(["libseccomp-dev"])]),
        // libsystemd for the daemon's side of systemd: sd_notify, sd_listen_fds,
        // sd_watchdog_enabled, sd_journal_sendv. Without systemd (no $NOTIFY_SOCKET, no journal)
        // each call does nothing; libsystemd0 is on every Debian host.
        .systemLibrary(
            name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // What every module may import: the one error type and its codes (shared with the API,
        // each with its HTTP status), errno names from glibc, the EINTR retry, the UTC calendar.
        // No Foundation: the static launcher links it too.
        .target(
            name: "AppdBase", dependencies: ["CLinux"], swiftSettings: [concreteMetadataAccessors]),
        // Reads and validates a bundle, and its code signature (CodeResources, Ed25519). Pure: it
        // reads, never writes (signing returns the bytes to write; the caller writes them).
        .target(
            name: "AppBundle",
            dependencies: [
                "AppdBase", "PrintableText", .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: [concreteMetadataAccessors]),
        // The one rule for printing text someone else chose (Printable): control and bidi
        // characters shown as \u{..}. Standard library only, so appctl and the daemon share it.
        .target(name: "PrintableText", swiftSettings: [concreteMetadataAccessors]),
        // The launcher protocol, spelled once for its two sides (docs/launcher-protocol.md): the
        // profile's records and field encoding, appd-exec's options, its status line, and the
        // output relay's time-index layout. Standard library only: the static appd-exec links
        // it, built with appd-exec's flag (below) so that it adds no run-time type lookups.
        .target(
            name: "LauncherProtocol",
            swiftSettings: [concreteMetadataAccessors]
        ),
        // The lifecycle channel's vocabulary (docs/lifecycle.md): message types, field names,
        // the states an app sees, the limits. Standard library only: AppRuntime (what apps
        // link) and the Supervisor both import it, and neither gets the other.
        .target(name: "LifecycleProtocol"),
        // Wire types of the daemon's API (Codable), shared by server and clients.
        .target(
            name: "AppdAPI", dependencies: ["AppdBase"], swiftSettings: [concreteMetadataAccessors]),
        // The daemon's client: blocking HTTP/1.1 over the Unix socket, plain POSIX sockets (no
        // event loop to start: appctl answers in milliseconds).
        .target(name: "AppdClient", dependencies: ["AppdBase", "AppdAPI"]),
        // What appd and appctl print the same way: apps, errors, JSON, tables, and the global
        // options either side of the subcommand.
        .target(name: "AppdCLI", dependencies: ["AppdAPI", "AppdBase", "PrintableText"]),
        // A bundle folder as a tar stream: written by the client with the caller's permissions,
        // extracted by the daemon without ever following a symlink (docs/bundle-archive.md).
        // An .ipa (zip) is turned into that same stream on the client's side (ZIPFoundation), so
        // the daemon's extractor stays the one reader of hostile archives it trusts. The same
        // stream under `Name.app/` is the layer of `appd image`'s image (ImageArchive).
        .target(
            name: "BundleArchive",
            dependencies: [
                "AppdBase",
                "AppBundle", "CGunzip", "PrintableText",
                // openat2 beneath the data container for a backup's walk (BackupWriter).
                "CLinux",
                .product(name: "ZIPFoundation", package: "ZIPFoundation"),
                // The digests of `appd image`'s docker-archive (ImageArchive).
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // zlib's inflate for gzip'd tars (the client's side of `appd install`).
        .target(name: "CGunzip", linkerSettings: [.linkedLibrary("z")]),
        // The state root: registry, uid allocation, installer, uninstall, doctor; and its types
        // as the API shows them (AppdAPI), for the daemon and appd's in-process commands alike.
        .target(
            name: "AppContainers",
            dependencies: [
                "AppdBase",
                "AppBundle", "AppdAPI", "AppdConfig", "CLinux", "Sandbox",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: [concreteMetadataAccessors]
        ),
        // appd.conf: one declared table of keys (ConfigKey.all) and the settings it fills, for
        // the daemon, appd's commands and appd-oci alike. No GRDB, no NIO: a reader of the
        // file links only this and the bundle reader.
        .target(
            name: "AppdConfig", dependencies: ["AppdBase", "AppBundle"],
            swiftSettings: [concreteMetadataAccessors]),
        // SandboxProfile, the policy that compiles granted entitlements into one, and the host
        // it runs on (Host/: kernel features, cgroups).
        .target(
            name: "Sandbox",
            dependencies: [
                "AppdBase", "AppBundle", "AppdConfig", "CLinux", "CSeccomp", "LauncherProtocol",
            ],
            swiftSettings: [concreteMetadataAccessors]),
        // Running instances: spawn through appd-exec, cgroups, exit status.
        .target(
            name: "Supervisor",
            dependencies: [
                "AppdBase",
                "AppBundle", "AppdAPI", "CLinux", "LauncherProtocol", "LifecycleProtocol",
                "PrintableText",
                "Sandbox", "AppContainers", "AppdConfig",
            ]),
        // The daemon's API: HTTP/1.1 + JSON on a Unix socket (SwiftNIO), callers known by
        // SO_PEERCRED, installs from a tar stream, the service appd serve runs.
        .target(
            name: "AppdServer",
            dependencies: [
                "AppdBase",
                "AppBundle", "AppContainers", "AppdAPI", "AppdConfig", "BundleArchive", "CLinux",
                "CSystemd", "Supervisor",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
        .executableTarget(
            name: "appd",
            dependencies: [
                "AppdBase",
                "AppBundle", "AppContainers", "AppdServer", "Sandbox", "Supervisor", "AppdAPI",
                "AppdClient", "AppdCLI", "AppdConfig",
                "BundleArchive", "CLinux", "PrintableText",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The daemon's command-line client, in the spirit of `xcrun simctl`. Release builds are
        // linked fully statically (as scripts/package ships it): loading the Swift runtime as
        // shared libraries, then libstdc++/libm/libgcc_s, was most of appctl's start-up
        // (scripts/bench-launch prints it). Its closure uses FoundationEssentials, not Foundation
        // (no ICU: 27 MB, not 77). The one NSS use, user and group names in the socket's
        // permission hint, loads the host's libnss_files as appd-exec's static glibc would
        // (same Debian glibc as the .deb's build; a lookup that fails prints the number).
        // Debug builds stay dynamic: the test bundles link this module with the shared runtime.
        .executableTarget(
            name: "appctl",
            dependencies: [
                "AppdAPI", "AppdBase", "AppdClient", "AppdCLI", "PrintableText",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: [.unsafeFlags(["-static-stdlib"], .when(configuration: .release))],
            linkerSettings: [.unsafeFlags(["-static-executable"], .when(configuration: .release))]
        ),
        // The sandbox launcher: single-threaded, no Foundation. Linked fully statically: loading
        // libswiftCore.so costs ~1.5-2 ms on every launch (measured here), and
        // -static-stdlib still leaves libstdc++/libm/libgcc_s to the dynamic loader (another
        // ~0.6 ms); a static glibc is fine here since the launcher uses no NSS.
        // Concrete generic types (`[String]`, `[UInt8]`, `[MountRecord]`, ...) get their metadata
        // through accessors that call swift_getGenericMetadata with the arguments, not by
        // demangling their mangled name at run time (swift_getTypeByMangledName): the launcher is
        // a new process on every launch, so each such lookup was paid on every launch (12 in the
        // launcher, 2 in the output relay; issue 15, docs/launch-path.md).
        .executableTarget(
            name: "appd-exec",
            dependencies: ["CLinux", "LauncherProtocol"],
            swiftSettings: [concreteMetadataAccessors],
            linkerSettings: [.unsafeFlags(["-static-executable"])]
        ),
        // The OCI runtime (issue 28, docs/oci-runtime.md): a second front door to the same
        // sandbox. Daemonless: containerd's shim, conmon and docker call it per operation; it
        // verifies the image's bundle as install does and launches it with SandboxLaunch.
        //
        // Release builds are linked fully statically, as appctl is: the engines start it three
        // times per container (create, start, delete), and loading the Swift runtime and then
        // libstdc++, sqlite and libseccomp as shared libraries was most of each start
        // (`appd-oci --version` 8.8 ms dynamic, 3.2 ms with the runtime static; bench-oci).
        .executableTarget(
            name: "appd-oci",
            dependencies: [
                "AppdAPI", "AppdBase", "AppBundle", "AppdConfig", "CLinux",
                "LauncherProtocol", "PrintableText", "Sandbox",
            ],
            swiftSettings: [
                .unsafeFlags(["-static-stdlib"], .when(configuration: .release)),
                concreteMetadataAccessors,
            ],
            linkerSettings: [.unsafeFlags(["-static-executable"], .when(configuration: .release))]
        ),
        // What apps link (docs/lifecycle.md): the lifecycle channel, the app delegate, containers,
        // preferences, localized resources. Foundation only: never the daemon's modules (the
        // lifecycle vocabulary it shares with the daemon is a module of its own, standard
        // library only).
        .target(name: "AppRuntime", dependencies: ["LifecycleProtocol"]),
        // The sample app; scripts/build-sample assembles it into Hello.app.
        .executableTarget(
            name: "Hello",
            path: "Examples/Hello",
            exclude: ["Info.plist", "Entitlements.plist", "greeting.txt", "README.md"]
        ),
        // The AppRuntime samples (scripts/build-sample Notes|Player): a document app that saves in
        // Documents when backgrounded and restores on relaunch, and a background-audio-style app
        // that keeps ticking in the background.
        .executableTarget(
            name: "Notes",
            dependencies: ["AppRuntime"],
            path: "Examples/Notes",
            exclude: ["Info.plist", "Entitlements.plist", "README.md", "en.lproj", "de.lproj"]
        ),
        .executableTarget(
            name: "Player",
            dependencies: ["AppRuntime"],
            path: "Examples/Player",
            exclude: ["Info.plist", "Entitlements.plist", "README.md"]
        ),
        // A hostile app in C for the sandbox tests: tries what an app must not do and prints
        // what happened (Examples/Probe/main.c).
        .executableTarget(name: "Probe", path: "Examples/Probe"),
        // The HTTP client of scripts/bench-api and bench-scale: plain blocking sockets, a thread
        // per connection, so that on a small machine the load measures the daemon, not itself.
        .executableTarget(
            name: "appd-bench",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            path: "Benchmarks/appd-bench"
        ),
        // What every test target shares: built-executable lookup, the root gate, the seeded
        // generator, kernel files, a posix_spawn that hands a child only the fds placed for it,
        // and the real `appd serve` process the daemon suites start.
        .target(name: "TestSupport", dependencies: ["CLinux"], path: "Tests/TestSupport"),
        .testTarget(
            name: "AppdOCITests",
            dependencies: [
                "appd-oci", "AppdBase", "AppContainers", "AppdConfig", "CLinux", "Sandbox",
                "TestSupport",
            ]
        ),
        .testTarget(name: "AppdBaseTests", dependencies: ["AppdBase"]),
        // The key table without a daemon or root: every key parsed, override-edited and
        // documented; bad values and unknown keys refused by name.
        .testTarget(
            name: "AppdConfigTests", dependencies: ["AppdConfig", "AppdBase", "AppBundle"]),
        .testTarget(
            name: "AppBundleTests",
            dependencies: ["AppdBase", "AppBundle", "PrintableText", "TestSupport"]),
        // AppRuntime without a daemon: a fake one on a socketpair, scratch containers and bundles;
        // the Notes and Player samples run as processes (built next to the test bundle).
        .testTarget(
            name: "AppRuntimeTests", dependencies: ["AppRuntime", "Notes", "Player", "TestSupport"]),
        .testTarget(
            name: "BundleArchiveTests",
            dependencies: ["AppdBase", "BundleArchive", "AppBundle", "TestSupport"]),
        .testTarget(
            name: "SandboxHostTests",
            dependencies: [
                "AppdBase", "AppdConfig", "Sandbox", "AppBundle", "CLinux", "TestSupport",
            ]),
        // The client against a canned in-test server, appctl's argument parsing, and the built appd
        // against that server.
        .testTarget(
            name: "AppdClientTests",
            dependencies: [
                "AppdBase", "AppdClient", "AppdAPI", "AppdCLI", "AppdConfig", "appctl", "appd",
                "TestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]),
        .testTarget(
            name: "AppContainersTests",
            dependencies: [
                "AppdBase", "AppContainers", "AppdConfig", "AppBundle", "Sandbox", "appd",
                "TestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // Installs the probe and the sample as apps and launches them through the built
        // appd-exec (found next to the test bundle, like Probe and Hello).
        .testTarget(
            name: "SandboxTests",
            dependencies: [
                "AppdBase", "AppBundle", "AppContainers", "AppdConfig", "Sandbox", "Supervisor",
                "TestSupport",
            ]),
        // Each launcher contract round-tripped between the daemon's side and the shared parser,
        // without root; and a profile the daemon writes, accepted by the built appd-exec.
        .testTarget(
            name: "LauncherProtocolTests",
            dependencies: [
                "LauncherProtocol", "AppdConfig", "Sandbox", "Supervisor", "AppBundle",
                "TestSupport",
            ]),
        // The lifecycle vocabulary round-tripped between AppRuntime's and the Supervisor's ends
        // of the channel, without root.
        .testTarget(
            name: "LifecycleProtocolTests",
            dependencies: ["LifecycleProtocol", "AppRuntime", "Supervisor"]),
        // Runs the built appd-exec binary (not linked in: it is found next to the test bundle).
        .testTarget(name: "LauncherTests", dependencies: ["TestSupport"]),
        // The real daemon (the built appd serve) on a private state root: supervision, restarts,
        // permissions, the command-line tools against it. AppBundle only to sign a bundle as a
        // signer's own tool would (TerminalInjectionTests), where `appd sign` refuses it.
        .testTarget(
            name: "DaemonTests",
            dependencies: [
                "AppBundle", "AppdAPI", "AppdBase", "AppdClient", "CLinux", "TestSupport",
            ]),
        .testTarget(
            name: "AppdServerTests",
            dependencies: [
                "AppdServer", "AppContainers", "AppdBase", "AppdConfig",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // The Supervisor without a daemon and without root: its parts (the lifecycle message
        // parser, fuzzed), and the actor itself on fakes of the app catalog, the spawner and the
        // cgroups (launch, lifecycle, jetsam, services, re-adoption).
        .testTarget(
            name: "SupervisorTests",
            dependencies: [
                "Supervisor", "AppContainers", "AppdAPI", "AppdBase", "AppdConfig", "CLinux",
                "Sandbox", "TestSupport",
            ]),
        // Starts the built appd (found next to the test bundle) on a private state root and
        // attacks its socket: malformed HTTP, hostile bodies, slow and vanishing clients, load.
        .testTarget(name: "DaemonRobustnessTests", dependencies: ["TestSupport"]),
    ]
)
