import AppBundle
import AppdBase
import AppdConfig
import Glibc

/// The entitlement half of the policy: each requested key is decided once, here, and every
/// other part of the profile reads the decision.
struct Grants {
    enum Network: String { case none, client, server }

    let app: SandboxSubject
    let settings: SandboxSettings
    let hostRoot: String

    var network = Network.none
    var writableExecutableMemory = false
    var debugger = false
    var groupContainers: [SandboxSubject.GroupContainer] = []
    var devices: [String] = []
    var deviceGroups: [UInt32] = []
    var readOnlyPaths: [String] = []
    var readWritePaths: [String] = []
    var decisions: [EntitlementDecision] = []

    init(app: SandboxSubject, settings: SandboxSettings, hostRoot: String) {
        self.app = app
        self.settings = settings
        self.hostRoot = hostRoot
    }

    mutating func decide() throws {
        let entitlements = app.entitlements
        if settings.requireAppSandboxEntitlement
            && !entitlements.bool(EntitlementCatalog.appSandbox)
        {
            throw AppdError(
                .permissionDenied,
                "\(app.bundleID) does not have \(EntitlementCatalog.appSandbox) = true",
                hint:
                    "add it to the app's Entitlements.plist; appd sandboxes every app either way, "
                    + "and an admin can drop the requirement with RequireAppSandboxEntitlement=no in [Sandbox]"
            )
        }
        for key in entitlements.values.keys.sorted() {
            decisions.append(decide(key))
        }
    }

    private mutating func decide(_ key: String) -> EntitlementDecision {
        let entitlements = app.entitlements
        func granted(_ effect: String) -> EntitlementDecision {
            EntitlementDecision(key: key, outcome: .granted, effect: effect)
        }
        let off = EntitlementDecision(key: key, outcome: .notRequested, effect: "false: no change")
        switch EntitlementCatalog.meaning(of: key) {
        case .unknown:
            return EntitlementDecision(
                key: key, outcome: .unknown,
                effect: "appd does not know this key; it changes nothing")
        case .noLinuxEffect(let what):
            return EntitlementDecision(
                key: key, outcome: .noLinuxEffect,
                effect: "\(what): no Linux effect; recorded only")
        case .linux:
            break
        }
        switch key {
        case EntitlementCatalog.appSandbox:
            return entitlements.bool(key)
                ? granted("sandboxed (every app is)")
                : EntitlementDecision(
                    key: key, outcome: .notRequested,
                    effect: "false, allowed by RequireAppSandboxEntitlement=no; sandboxed anyway")
        case EntitlementCatalog.networkClient:
            guard entitlements.bool(key) else { return off }
            if network == .none { network = .client }
            return granted(
                "host network; outgoing connections; no bind to a TCP or UDP port, no listen; "
                    + "the host's loopback only on LoopbackPorts=")
        case EntitlementCatalog.networkServer:
            guard entitlements.bool(key) else { return off }
            network = .server
            return granted(
                "host network; may bind and listen; the host's loopback only on LoopbackPorts=")
        case EntitlementCatalog.allowJIT, EntitlementCatalog.allowUnsignedExecutableMemory:
            guard entitlements.bool(key) else { return off }
            writableExecutableMemory = true
            return granted("writable+executable mappings allowed")
        case EntitlementCatalog.debugger, EntitlementCatalog.getTaskAllow:
            guard entitlements.bool(key) else { return off }
            debugger = true
            return granted("ptrace allowed, on its own processes inside the sandbox")
        case EntitlementCatalog.camera:
            return device(key, in: "/dev", prefix: "video", group: "video")
        case EntitlementCatalog.audioInput:
            return device(key, in: "/dev/snd", prefix: "", group: "audio")
        case EntitlementCatalog.usb:
            return device(key, in: "/dev/bus", prefix: "usb", group: "plugdev")
        case EntitlementCatalog.applicationGroups:
            let requested = entitlements.strings(key)
            groupContainers = app.groupContainers.filter { requested.contains($0.groupID) }
            let missing = requested.filter { id in !groupContainers.contains { $0.groupID == id } }
            if !missing.isEmpty {
                return EntitlementDecision(
                    key: key, outcome: .refused,
                    effect: "no container for \(missing.joined(separator: ", "))")
            }
            return granted("shared containers read-write: " + requested.joined(separator: ", "))
        case EntitlementCatalog.readOnlyPaths, EntitlementCatalog.readWritePaths:
            let writable = key == EntitlementCatalog.readWritePaths
            let allowed = writable ? settings.allowedReadWritePaths : settings.allowedReadOnlyPaths
            var given: [String] = []
            var refused: [String] = []
            for path in entitlements.strings(key) {
                let clean = Self.normalized(path)
                // The real path must be the requested one: a symlink under an allowed
                // directory must not lead the bind mount somewhere else.
                if let clean, allowed.contains(where: { Self.path(clean, isBeneath: $0) }),
                    resolved(clean) == hostRoot + clean
                {
                    given.append(clean)
                } else {
                    refused.append(path)
                }
            }
            if writable { readWritePaths = given } else { readOnlyPaths = given }
            let verb = writable ? "read-write" : "read-only"
            let setting = writable ? "AllowedReadWritePaths" : "AllowedReadOnlyPaths"
            if refused.isEmpty { return granted("\(verb): " + given.joined(separator: ", ")) }
            return EntitlementDecision(
                key: key, outcome: .refused,
                effect: (given.isEmpty ? "" : "\(verb): \(given.joined(separator: ", ")); ")
                    + "not granted (missing, or not under [Sandbox] \(setting)): "
                    + refused.joined(separator: ", "))
        default:
            return EntitlementDecision(key: key, outcome: .unknown, effect: "no effect defined")
        }
    }

    /// Grants every entry of `directory` whose name starts with `prefix` (`/dev/video0`,
    /// every node of `/dev/snd`, the `/dev/bus/usb` tree), and the host group that owns them.
    private mutating func device(_ key: String, in directory: String, prefix: String, group: String)
        -> EntitlementDecision
    {
        guard app.entitlements.bool(key) else {
            return EntitlementDecision(key: key, outcome: .notRequested, effect: "false: no change")
        }
        let found = entries(of: directory).filter { $0.hasPrefix(prefix) }.map {
            "\(directory)/\($0)"
        }
        devices += found
        if !found.isEmpty, let gid = hostGroup(group) { deviceGroups.append(gid) }
        return EntitlementDecision(
            key: key, outcome: .granted,
            effect: found.isEmpty
                ? "no \(directory)/\(prefix)* device on this host" : found.joined(separator: ", "))
    }

    private func entries(of directory: String) -> [String] {
        guard let dir = opendir(hostRoot + directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = directoryEntryString(entry)
            if name != ".", name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    private func hostGroup(_ name: String) -> UInt32? {
        guard let group = getgrnam(name) else { return nil }
        return group.pointee.gr_gid
    }

    private func resolved(_ path: String) -> String? {
        guard let real = realpath(hostRoot + path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// An absolute path without `.`, `..` or empty components (trailing slash dropped); nil
    /// for anything else, so a request cannot climb out of an allowed directory.
    static func normalized(_ path: String) -> String? {
        guard path.hasPrefix("/") else { return nil }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.contains(where: { $0 == "." || $0 == ".." }), !path.contains("//") else {
            return nil
        }
        return "/" + parts.joined(separator: "/")
    }

    static func path(_ path: String, isBeneath directory: String) -> Bool {
        guard let directory = normalized(directory) else { return false }
        return directory == "/" || path == directory || path.hasPrefix(directory + "/")
    }
}
