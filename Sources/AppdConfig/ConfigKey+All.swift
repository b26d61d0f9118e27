import AppBundle
import AppdBase

/// Every key appd.conf has, section by section, in the order appd.conf(5) and
/// config/appd.conf document them. A key added here is parsed, listed in errors, editable by
/// `appd override` when `app` says so, and checked against the man page and the sample by
/// AppdConfigTests.
extension ConfigKey {
    public static let all: [ConfigKey] =
        bundle + users + sandbox + api + supervisor + lifecycle + storage + oci + signing
        + signer + handlers + app

    static let bundle: [ConfigKey] = [
        .key(.bundle, "MaxFiles", .count, \.bundleLimits.maxFiles, "entries a bundle may hold"),
        .key(
            .bundle, "MaxTotalBytes", .size(), \.bundleLimits.maxTotalBytes,
            "bytes of all its files"),
        .key(
            .bundle, "MaxDepth", .count, \.bundleLimits.maxDepth, "directory levels below its root"),
        .key(
            .bundle, "MaxPathLength", .count, \.bundleLimits.maxPathLength, "bytes of a path in it"),
        .key(
            .bundle, "MaxInfoPlistBytes", ConfigValue<Int64>.size().map { Int($0) },
            \.bundleLimits.maxInfoPlistBytes,
            "largest Info.plist"),
        .key(
            .bundle, "MaxEntitlementsBytes", ConfigValue<Int64>.size().map { Int($0) },
            \.bundleLimits.maxEntitlementsBytes, "largest Entitlements.plist"),
    ]

    static let users: [ConfigKey] = [
        .key(.users, "UIDRange", .idRange("UIDRange"), \.uidRange, "the uids handed to apps"),
        .key(
            .users, "GroupRange", .idRange("GroupRange"), \.groupRange,
            "the gids handed to application groups"),
        .key(
            .users, "MaxGroupsPerApp", .count, \.maxGroupsPerApp,
            "application groups one app may use"),
        .key(
            .users, "MaxGroupsPerSigner", .count, \.maxGroupsPerSigner,
            "groups bound to one signing key"),
    ]

    static let sandbox: [ConfigKey] = [
        .key(
            .sandbox, "SystemPaths", .absolutePaths, \.sandbox.systemPaths,
            "host directories every app sees read-only"),
        .key(.sandbox, "EtcFiles", .etcFiles, \.sandbox.etcFiles, "the parts of /etc apps see"),
        .key(
            .sandbox, "AllowedReadOnlyPaths", .absolutePaths, \.sandbox.allowedReadOnlyPaths,
            "where read-only temporary exceptions may reach"),
        .key(
            .sandbox, "AllowedReadWritePaths", .absolutePaths, \.sandbox.allowedReadWritePaths,
            "where read-write temporary exceptions may reach"),
        .key(
            .sandbox, "RequireAppSandboxEntitlement", .yesNo,
            \.sandbox.requireAppSandboxEntitlement,
            "whether com.apple.security.app-sandbox must be true"),
        .key(
            .sandbox, "MemoryMax", .size(atLeast: 16 << 20, "a size of at least 16M"),
            \.sandbox.memoryMax,
            app: true, "memory.max of each instance"),
        .key(
            .sandbox, "TasksMax", .integer(8...Int.max, "a number of at least 8"),
            \.sandbox.tasksMax,
            app: true, "pids.max of each instance"),
        .key(
            .sandbox, "OpenFilesMax", .openFiles,
            \.sandbox.openFilesMax, app: true, "RLIMIT_NOFILE of each app"),
        .key(.sandbox, "Path", .searchPath, \.sandbox.path, "PATH inside the sandbox"),
        .key(
            .sandbox, "WeakerModes", .weakerModes, \.sandbox.weakerModes,
            "layers a launch may go without"),
        .key(
            .sandbox, "Launcher", ConfigValue<String>.absolutePath(emptyAllowed: false).orEmpty(),
            \.sandbox.launcher,
            "the appd-exec to launch with"),
        .key(
            .sandbox, "DataQuota",
            ConfigValue<Int64>.size(atLeast: 1 << 20, "a size of at least 1M, or infinity").orEmpty(
                [
                    "infinity"
                ]),
            \.sandbox.dataQuota, app: true, "the most each data container may hold"),
        .key(
            .sandbox, "LoopbackPorts", .loopbackPorts, \.sandbox.loopbackPorts, app: true,
            "host loopback ports apps on the host's network may reach"),
    ]

    static let api: [ConfigKey] = [
        .key(.api, "Socket", .absolutePath(emptyAllowed: true), \.api.socket, "the socket's path"),
        .key(.api, "SocketMode", .octalMode, \.api.socketMode, "the socket's mode"),
        .key(.api, "SocketGroup", .text, \.api.socketGroup, "the socket's group"),
        .key(.api, "ReadAllowed", .accessList, \.api.readAllowed, "who may read"),
        .key(.api, "ControlAllowed", .accessList, \.api.controlAllowed, "who may launch and stop"),
        .key(
            .api, "AdminAllowed", .accessList, \.api.adminAllowed, "who may install and administer"),
        .key(.api, "MaxRequestBytes", .size(), \.api.maxRequestBytes, "largest JSON request body"),
        .key(.api, "MaxConnections", .count, \.api.maxConnections, "connections held at once"),
        .key(
            .api, "ReservedConnections", .integer(0...Int.max, "a whole number (0 or more)"),
            \.api.reservedConnections, "connections only the admin group may use"),
        .key(
            .api, "MaxConnectionsPerUser", .count, \.api.maxConnectionsPerUser,
            "connections one uid may hold"),
        .key(
            .api, "MaxStreamsPerUser", .count, \.api.maxStreamsPerUser,
            "event streams and follows one uid may hold"),
        .key(
            .api, "RequestTimeout", .wholeSeconds(1...86400), \.api.requestTimeout,
            "seconds a request may take to arrive"),
    ]

    static let supervisor: [ConfigKey] = [
        .key(
            .supervisor, "TerminateGracePeriod", .seconds(0...3600),
            \.supervisor.terminateGracePeriod,
            "seconds between SIGTERM and the kill"),
        .key(
            .supervisor, "LogMaxBytes", .size(), \.supervisor.logMaxBytes,
            "an instance's log size before rotation"),
        .key(
            .supervisor, "KeepExited", .count, \.supervisor.keepExited,
            "exited instances remembered"),
        .key(
            .supervisor, "CgroupParent", .text, \.supervisor.cgroupParent,
            "where instance cgroups go"),
        .key(
            .supervisor, "DenialLog", .yesNo, \.supervisor.denialLog,
            "whether the kernel's denials are logged"),
        .key(
            .supervisor, "MaxInstances", .count, \.supervisor.maxInstances, "live instances at once"
        ),
        .key(
            .supervisor, "MaxInstancesPerUser", .count, \.supervisor.maxInstancesPerUser,
            "live instances one uid may launch"),
        .key(
            .supervisor, "MaxInstancesPerApp", .count, \.supervisor.maxInstancesPerApp,
            "live instances of one app"),
    ]

    static let lifecycle: [ConfigKey] = [
        .key(
            .lifecycle, "ActivePolicy", .oneOf, \.lifecycle.activePolicy, "one active app, or all"),
        .key(
            .lifecycle, "BackgroundGracePeriod", .seconds(0...3600),
            \.lifecycle.backgroundGracePeriod,
            "seconds in the background before the freeze"),
        .key(
            .lifecycle, "BackgroundTaskTime", .seconds(0.1...86400), \.lifecycle.backgroundTaskTime,
            "seconds a background task gets"),
        .key(
            .lifecycle, "BackgroundTaskMaxTime", .seconds(0.1...86400),
            \.lifecycle.backgroundTaskMaxTime,
            "the most a background task may get"),
        .key(
            .lifecycle, "BackgroundTaskExpirationGrace", .seconds(0...600),
            \.lifecycle.backgroundTaskExpirationGrace,
            "seconds between the expiration warning and the action"),
        .key(
            .lifecycle, "ExpiredBackgroundTask", .oneOf, \.lifecycle.expiredTaskAction,
            "what ends an expired background task"),
        .key(
            .lifecycle, "MaxBackgroundTasks", .integer(1...1024, "a whole number (1-1024)"),
            \.lifecycle.maxBackgroundTasks, "background tasks one instance may hold"),
        .key(
            .lifecycle, "LaunchWatchdog", .seconds(0.1...3600), \.lifecycle.launchWatchdog,
            "seconds from hello to ready"),
        .key(
            .lifecycle, "AllowedBackgroundModes", .each(of: LifecycleSettings.knownBackgroundModes),
            \.lifecycle.allowedBackgroundModes, "UIBackgroundModes that keep an app running"),
        .key(
            .lifecycle, "MemoryBudget", ConfigValue<Int64>.size().orEmpty(also: " or empty"),
            \.lifecycle.memoryBudget,
            "memory all apps together may use"),
        .key(
            .lifecycle, "ActiveMemoryLimit", ConfigValue<Int64>.size().orEmpty(also: " or empty"),
            \.lifecycle.activeMemoryLimit, "the most the active app may use"),
        .key(
            .lifecycle, "MemoryPressureWarning", .percent, \.lifecycle.memoryPressureWarning,
            "PSI level of the memory warning"),
        .key(
            .lifecycle, "MemoryPressureCritical", .percent, \.lifecycle.memoryPressureCritical,
            "PSI level at which jetsam ends apps"),
        .key(
            .lifecycle, "SuspendedMemory",
            ConfigValue<Int64>.size(atLeast: 0).orEmpty(["off"], also: " or off"),
            \.lifecycle.suspendedMemory, "what a frozen app's memory is reclaimed down to"),
        .key(
            .lifecycle, "MemoryCheckInterval", .seconds(0.05...60), \.lifecycle.memoryCheckInterval,
            "seconds between memory checks"),
        .key(
            .lifecycle, "KeepAliveDelay", .seconds(0.05...3600), \.lifecycle.keepAliveDelay,
            "seconds before a KeepAlive restart"),
        .key(
            .lifecycle, "KeepAliveLimit", .integer(1...1000, "a whole number (1-1000)"),
            \.lifecycle.keepAliveLimit,
            "restarts in a row before appd gives up"),
        .key(
            .lifecycle, "KeepAliveStableTime", .seconds(0...86400), \.lifecycle.keepAliveStableTime,
            "a run this long ends the crash-loop count"),
        .key(
            .lifecycle, "FetchDeadline", .seconds(0.1...600), \.lifecycle.fetchDeadline,
            "seconds a woken app has to answer performFetch"),
        .key(
            .lifecycle, "MinimumFetchInterval", .seconds(0.1...31_536_000),
            \.lifecycle.minimumFetchInterval, "the shortest background fetch interval"),
    ]

    static let storage: [ConfigKey] = [
        .key(
            .storage, "ReclaimCachesBelow",
            ConfigValue<StorageSettings.Level>.freeSpaceLevel.map { Optional($0) },
            \.storage.reclaimCachesBelow, "free space below which Caches are emptied"),
        .key(
            .storage, "BackupMaxBytes", ConfigValue<Int64>.size().map { Optional($0) },
            \.storage.backupMaxBytes,
            "the most bytes a backup may hold"),
    ]

    static let oci: [ConfigKey] = [
        .key(.oci, "Hooks", .hooks, \.oci.hooks, "the hooks a container's config may name"),
        .key(
            .oci, "MemoryMax", ConfigValue<Int64>.size().orEmpty(), \.oci.memoryMax,
            "the node's ceiling on a container's memory"),
        .key(
            .oci, "TasksMax", ConfigValue<Int>.count.orEmpty(), \.oci.tasksMax,
            "the node's ceiling on a container's pids"),
    ]

    static let signing: [ConfigKey] = [
        .key(
            .signing, "AllowUnsigned", .yesNo, \.signing.allowUnsigned,
            "install bundles without a signature"),
        .key(
            .signing, "UnsignedEntitlements", .patterns, \.signing.unsignedEntitlements,
            "what an unsigned app may be granted"),
        .key(
            .signing, "UnsignedGroups", .patterns, \.signing.unsignedGroups,
            "groups an unsigned app may use"),
        .key(
            .signing, "UnsignedHostExecutables", .programPaths, \.signing.unsignedHostExecutables,
            "host programs an unsigned app may name"),
        .key(
            .signing, "UnsignedURLSchemes", .patterns, \.signing.unsignedURLSchemes,
            "URL schemes an unsigned app may claim"),
        .key(
            .signing, "UnsignedDocumentTypes", .patterns, \.signing.unsignedDocumentTypes,
            "document types an unsigned app may claim"),
        .key(
            .signing, "LaunchCheckMaxBytes", .size(atLeast: 0), \.signing.launchCheckMaxBytes,
            "bundles up to this size are hashed whole at launch"),
    ]

    static let signer: [ConfigKey] = [
        ConfigKey(
            section: .signer, name: "Key", summary: "the signer's public key, inline or a file",
            host: { (config, text, place) throws(ConfigProblem) in
                let directory = AppdConfiguration.directory(of: place.file)
                do {
                    let key = try SignerKey.load(text, relativeTo: directory)
                    config.signing.signers[config.signing.signers.count - 1].key = key
                } catch {
                    let message = (error as? AppdError)?.message ?? "\(error)"
                    throw .says("[\(place.section)] Key=: \(message)")
                }
            }, app: nil),
        .signer("BundleIDs", .patterns, \.bundleIDs, "bundle ids it may sign"),
        .signer("Entitlements", .patterns, \.entitlements, "entitlements it may grant"),
        .signer("Groups", .patterns, \.groups, "application groups its apps may use"),
        .signer(
            "HostExecutables", .programPaths, \.hostExecutables, "host programs its apps may name"),
        .signer("URLSchemes", .patterns, \.urlSchemes, "URL schemes its apps may claim"),
        .signer(
            "DocumentTypes", .patterns, \.documentTypes,
            "document types (MIME types, .ext) its apps may claim"),
    ]

    static let app: [ConfigKey] = [
        .app(
            "CPUWeight",
            ConfigValue<Int>.integer(
                1...10000, "a weight from 1 to 10000 (100 is the kernel's default)"
            )
            .map { Optional($0) },
            \.cpuWeight, written: { $0.map(String.init) }, "cpu.weight of its instances"),
        .app(
            "BackgroundModes",
            ConfigValue<[String]>.each(
                of: LifecycleSettings.knownBackgroundModes, emptyMeans: " (empty: none)"
            ).map { Optional($0) },
            \.backgroundModes, written: { $0?.joined(separator: " ") },
            "the only background modes it may use"),
        .app(
            "RevokeEntitlements", .patterns, \.revokedEntitlements,
            written: { $0.isEmpty ? nil : $0.joined(separator: " ") }, "entitlements it loses"),
        .app(
            "RunAtLoad", .yesNo, \.service.runAtLoad, written: { $0 ? "yes" : nil },
            "launched when appd starts"),
        .app(
            "KeepAlive", .keepAlive, \.service.keepAlive,
            written: { $0 == .no ? nil : $0.rawValue },
            "launched again when it ends"),
        .app(
            "Arguments",
            ConfigValue<ServiceSettings.Written<[String]>>.arguments.map { Optional($0) },
            \.service.argumentsSetting,
            written: { $0?.text }, "its arguments for appd's launches"),
        .app(
            "Environment",
            ConfigValue<ServiceSettings.Written<[ServiceSettings.Variable]>>.environment.map {
                Optional($0)
            },
            \.service.environmentSetting,
            written: { $0?.text }, "variables added to its environment"),
        .app(
            "StartInterval", ConfigValue<Double>.seconds(1...31_536_000).map { Optional($0) },
            \.service.startInterval, written: { $0.map(ConfigText.number) },
            "launched or woken every so many seconds"),
        .app(
            "StartCalendarInterval",
            ConfigValue<ServiceSettings.Written<CalendarInterval>>.calendarInterval.map {
                Optional($0)
            },
            \.service.startCalendarSetting, written: { $0?.text },
            "launched or woken at these times"),
        .app(
            "MinimumFetchInterval",
            ConfigValue<Double>.seconds(0.1...31_536_000).map { Optional($0) },
            \.minimumFetchInterval, written: { $0.map(ConfigText.number) },
            "its shortest background fetch interval"),
    ]
}
