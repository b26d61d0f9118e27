import AppBundle
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import Sandbox

/// `create`: verify, compile, build the sandbox, and leave the app process waiting at the
/// start gate; the launcher's pid goes to `--pid-file`. Returns once the sandbox is built (or
/// has failed: then nothing of the container is left).
extension OCIRuntime {
    func create(id: String) throws -> Int32 {
        let created = try createContainer(id: id)
        for fd in [created.ready, created.status] { close(fd) }
        return 0
    }

    /// `run`: create, start, wait for the launcher (our child), delete; the app's exit code.
    func runToEnd(id: String) throws -> Int32 {
        let created = try createContainer(id: id)
        for fd in [created.ready, created.status] { close(fd) }
        // `start` and `delete --force` with what create made at hand: no record to read
        // back, no cgroup layout to detect again.
        try state.locked(id) { try openGate(created.record) }
        let raw = SandboxLaunch.wait(created.pid)
        try state.locked(id) {
            guard access(state.directory(id), F_OK) == 0 else { return }
            try remove(created.record, cgroup: created.cgroup)
        }
        return raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
    }

    /// What `create` leaves open for `run`: the launcher, and the ready and status pipes.
    struct Created {
        var pid: pid_t
        var ready: Int32
        var status: Int32
        var record: ContainerRecord
        var cgroup: any InstanceCgroup
    }

    private func createContainer(id: String) throws -> Created {
        let given = line.options["bundle"] ?? FileManager.default.currentDirectoryPath
        guard let resolved = realpath(given, nil) else {
            throw AppdError.system("cannot find the bundle \(given)")
        }
        let bundle = String(cString: resolved)
        free(resolved)
        let spec = try OCISpec.read(OCISpec.self, at: "\(bundle)/config.json")
        // Opened once and checked (RootFilesystem); the launcher gets this fd, kept open until
        // the sandbox is built.
        let root = try RootFilesystem.open(spec, bundle: bundle, stateRoot: state.path)
        defer { root.close() }
        try state.makeRoot()
        let directory = state.directory(id)
        guard mkdir(directory, 0o700) == 0 else {
            if errno == EEXIST { throw AppdError(.exists, "container with id exists: \(id)") }
            throw AppdError.system("cannot create \(directory)")
        }
        var cgroup: (any InstanceCgroup)?
        var userRange: UInt32?
        do {
            return try state.locked(id) {
                try build(
                    id: id, spec: spec, bundle: bundle, root: root, cgroup: &cgroup,
                    userRange: &userRange)
            }
        } catch {
            if let userRange { PlainIDRange.free(userRange) }
            if let cgroup {
                try? cgroup.kill()
                try? cgroup.remove()
            }
            try? removeState(id)
            throw error
        }
    }

    /// `create` in its phases, in runc's order: the profile, the network, the pins, the
    /// cgroup, the launcher (its start gate and pipes), the checks made while it builds, what
    /// comes once it is built (oom score, systemd scope, hooks), the record. What it opens is
    /// closed here; what it makes (`cgroup`, `userRange`) the caller removes on failure.
    private func build(
        id: String, spec: OCISpec, bundle: String, root: HostPaths.Opened,
        cgroup made: inout (any InstanceCgroup)?, userRange: inout UInt32?
    ) throws -> Created {
        let config = try configuration()
        let plain = line.plain || Self.isPlain(spec.annotations ?? [:])
        let terminal = spec.process?.terminal ?? false
        var prepared = try prepare(
            id: id, spec: spec, bundle: bundle, root: root, config: config, plain: plain,
            terminal: terminal, userRange: &userRange)
        // What the launcher was given by fd (binds, the data volume, the pod's files): open
        // until it is built.
        defer { for opened in prepared.held { opened.close() } }
        var profile = prepared.profile
        let network = try joinNetwork(spec: spec, plain: plain, config: config, profile: &profile)
        defer { if network.fd >= 0 { close(network.fd) } }
        var joined = SharedNamespaces(mount: -1, root: -1, net: network.fd, uts: -1)
        defer { for fd in [joined.uts, joined.ipc, joined.pid] where fd >= 0 { close(fd) } }
        if plain { try joinPod(spec: spec, config: config, into: &joined) }

        // What the profile names by fd (the root, binds, the data volume): pinned in a private
        // mount namespace the launcher inherits (MountPins), until the sandbox is built.
        var pins: MountPins?
        defer { pins?.leave() }
        let pinned = ([root] + prepared.held).filter { opened in
            profile.imageRoot?.source == opened.source
                || profile.mounts.contains { $0.source?.hasPrefix(opened.source) == true }
        }
        if !pinned.isEmpty || prepared.overlay != nil {
            pins = try MountPins.enter(
                directory: "\(state.directory(id))/pins", pinning: pinned, profile: &profile,
                overlay: prepared.overlay)
        }

        let (cgroup, place, settings) = try makeCgroup(
            id: id, spec: spec, plain: plain, limits: profile.cgroupLimits, made: &made)
        // Compiled here, not in the launch: `exec` gets the same program (seccomp.bpf).
        let bpf = profile.seccomp.required ? try SeccompCompiler.bpf(for: profile.seccomp) : []

        let gate = try StartGate(fifo: state.fifoPath(id))
        defer { close(gate.fifo) }
        let started = try startLauncher(
            profile: profile, config: config, settings: settings, cgroup: cgroup,
            namespaces: joined, bpf: bpf, gate: gate, terminal: terminal)
        let encodedProfile: [UInt8]
        do {
            encodedProfile = try whileBuilding(
                profile: profile, image: &prepared.image, config: config)
        } catch {
            try? cgroup.kill()
            _ = SandboxLaunch.wait(started.pid)
            close(gate.ready[0])
            close(gate.status[0])
            throw error
        }
        guard Self.awaitReady(gate.ready[0]) else {
            let text = SandboxLaunch.readAll(gate.status[0])
            close(gate.ready[0])
            close(gate.status[0])
            _ = SandboxLaunch.wait(started.pid)
            let reason =
                SandboxLaunch.parseStatus(text).map { "\($0)" }
                ?? "the launcher ended without a status"
            throw AppdError(.unsupported, "the sandbox could not be built: \(reason)")
        }
        // Built: the pins are the launcher's now; hooks and systemd see the host's mounts.
        pins?.leave()
        try afterBuilt(
            id: id, spec: spec, bundle: bundle, pid: started.pid, cgroup: cgroup,
            limits: profile.cgroupLimits, config: config)

        var record = ContainerRecord(
            id: id, bundle: bundle, rootfs: root.path, pid: started.pid,
            pidStart: Process.startTime(started.pid) ?? 0, created: timestamp(),
            annotations: spec.annotations ?? [:], cgroupParent: place.parent,
            cgroupApp: place.app, cgroupInstance: place.instance, plain: plain,
            bundleID: prepared.bundleID, uid: profile.uid, gid: profile.gid,
            dataContainer: prepared.dataContainer, dataInVolume: prepared.dataInVolume,
            memoryMax: profile.cgroupLimits.memoryMax, pidsMax: profile.cgroupLimits.pidsMax,
            networkNamespace: network.path, userNamespaceHost: userRange)
        if let hooks = spec.hooks, hooks.poststart != nil || hooks.poststop != nil {
            record.hooks = OCISpec.Hooks(poststart: hooks.poststart, poststop: hooks.poststop)
        }
        try state.save(record)
        try OCIFiles.writeAtomically("\(state.directory(id))/seccomp.bpf", bpf)
        try OCIFiles.writeAtomically("\(state.directory(id))/profile.json", encodedProfile)
        if let pidFile = line.options["pid-file"] {
            try OCIFiles.writePidFile(pidFile, started.pid)
        }
        return Created(
            pid: started.pid, ready: gate.ready[0], status: gate.status[0], record: record,
            cgroup: cgroup)
    }

    /// The sandbox's profile: the config checked (and its hooks against appd.conf), the pod's
    /// resolv.conf, hosts, hostname file and hostname checked before anything is made and
    /// bound in place of the sandbox's own; a plain container's profile or an app image's
    /// (verified), with the config's environment and its limits under appd.conf's ceiling.
    private func prepare(
        id: String, spec: OCISpec, bundle: String, root: HostPaths.Opened,
        config: AppdConfiguration, plain: Bool, terminal: Bool, userRange: inout UInt32?
    ) throws -> PreparedSandbox {
        try OCIConfigCheck.check(spec, plainBundle: plain ? bundle : nil)
        try OCIHooks.check(spec.hooks, allowed: config.oci.hooks)
        let podFiles = try PodFiles.files(in: spec, stateRoot: state.path)
        var prepared: PreparedSandbox
        do {
            let podHostname = try PodFiles.hostname(in: spec, files: podFiles)
            if plain {
                let hostID = try PlainIDRange.allocate(owner: state.directory(id))
                userRange = hostID
                prepared = try PlainContainer.profile(
                    spec: spec, bundle: bundle, root: root, stateDirectory: state.directory(id),
                    stateRoot: state.path, config: config, console: terminal, hostID: hostID,
                    podFiles: podFiles, log: log)
                if let podHostname { prepared.profile.hostname = podHostname }
            } else {
                guard let bundlePath = try AppImage.find(in: root.path) else {
                    throw AppdError(
                        .invalidBundle, "the image holds no Name.app at its root (\(root.path))",
                        hint:
                            "build it with appd image Name.app; run other images with --plain or the annotation org.appd.plain=true"
                    )
                }
                prepared = try appProfile(
                    id: id, spec: spec, bundlePath: bundlePath, config: config, console: terminal)
                PodFiles.apply(podFiles, hostname: podHostname, to: &prepared.profile)
                AppTmp.link(in: &prepared.profile, dataContainer: AppPaths.data)
            }
        } catch {
            for file in podFiles { file.opened.close() }
            throw error
        }
        prepared.held += podFiles.map(\.opened)
        do {
            prepared.profile.environment += Self.extraEnvironment(
                spec.process?.env ?? [], reserved: Set(prepared.profile.environment.map(\.name)))
            prepared.profile.cgroupLimits = try Self.limits(
                prepared.profile.cgroupLimits, by: spec.linux?.resources, ceiling: config.oci)
        } catch {
            for opened in prepared.held { opened.close() }
            throw error
        }
        return prepared
    }

    /// The network namespace the sandbox joins, opened, and its path (the record's).
    private struct JoinedNetwork {
        var fd: Int32 = -1
        var path: String?
    }

    /// The network: a pod's namespace given by path is joined when the app may use the
    /// network; otherwise (and for an app without a network entitlement always) the sandbox
    /// gets a namespace of its own with only a loopback. A plain container is the engine's own
    /// kind: it joins its pod's network, its TCP is not the app rules' business, and the pod's
    /// namespace must not be one an app's uid made.
    private func joinNetwork(
        spec: OCISpec, plain: Bool, config: AppdConfiguration, profile: inout SandboxProfile
    ) throws -> JoinedNetwork {
        if plain {
            profile.landlock.restrictedTCP = []
            profile.landlock.ports = []
        }
        guard plain || !profile.namespaces.contains(.net) else { return JoinedNetwork() }
        if !profile.namespaces.contains(.net) { profile.namespaces.append(.net) }
        guard let path = spec.namespace("network")?.path else {
            profile.loopback = true
            return JoinedNetwork()
        }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw AppdError.system("cannot open the network namespace \(path)") }
        if plain {
            do {
                try PodNetwork.refuseAppNamespace(
                    fd: fd, path: path, appUIDs: [config.uidRange, NodeUIDs.range])
            } catch {
                close(fd)
                throw error
            }
        }
        return JoinedNetwork(fd: fd, path: path)
    }

    /// A plain container's pod: the pid, ipc and uts namespaces config.json gives by path
    /// (OCIConfigCheck.checkJoinable checked each), opened into `joined`; never an app's own.
    private func joinPod(
        spec: OCISpec, config: AppdConfiguration, into joined: inout SharedNamespaces
    )
        throws
    {
        let namespaces = spec.linux?.namespaces ?? []
        for type in ["uts", "ipc", "pid"] {
            guard let index = namespaces.firstIndex(where: { $0.type == type }),
                let given = namespaces[index].path
            else { continue }
            let path = OCIConfigCheck.podNamespacePath(given, type)
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else {
                throw AppdError.system("cannot open the \(type) namespace \(path)")
            }
            switch type {
            case "uts": joined.uts = fd
            case "ipc": joined.ipc = fd
            default: joined.pid = fd
            }
            try OCIConfigCheck.checkType(fd: fd, path, type)
            try OCIConfigCheck.checkJoinable(
                fd: fd, path, type, field: "linux.namespaces[\(index)].path")
            try PodNetwork.refuseAppNamespace(
                fd: fd, path: path, appUIDs: [config.uidRange, NodeUIDs.range], type: type)
        }
    }

    /// The start gate and the two pipes: `ready` from the app process, the launcher's status
    /// line (its error when the sandbox cannot be built).
    private struct StartGate {
        /// Read-write: the app process's read then waits for `start`'s byte, never for a writer.
        let fifo: Int32
        var ready: [Int32] = [-1, -1]
        var status: [Int32] = [-1, -1]

        init(fifo path: String) throws {
            guard mkfifo(path, 0o600) == 0, chmod(path, 0o622) == 0 else {
                throw AppdError.system("cannot make the start gate \(path)")
            }
            fifo = open(path, O_RDWR | O_CLOEXEC)
            guard fifo >= 0 else { throw AppdError.system("cannot open \(path)") }
            guard appd_pipe_cloexec(&ready) == 0 else {
                close(fifo)
                throw AppdError.system("pipe")
            }
            guard appd_pipe_cloexec(&status) == 0 else {
                close(fifo)
                close(ready[0])
                close(ready[1])
                throw AppdError.system("pipe")
            }
        }

        /// Both ends of both pipes (the fifo is the caller's to close).
        func closePipes() { for fd in ready + status { close(fd) } }
    }

    /// The container's cgroup where the config's `cgroupsPath` puts it (in a systemd slice,
    /// when systemd runs), never inside another container's, marked as this container's;
    /// `made` holds it from the moment it exists.
    private func makeCgroup(
        id: String, spec: OCISpec, plain: Bool, limits: CgroupLimits,
        made: inout (any InstanceCgroup)?
    ) throws -> (
        cgroup: any InstanceCgroup, place: (parent: String, app: String, instance: String),
        settings: CgroupSettings
    ) {
        let cgroupsPath = spec.linux?.cgroupsPath ?? ""
        if Self.systemdScope(cgroupsPath, systemd: line.systemdCgroup) != nil {
            try SystemdScope.requireSystemd(forPath: cgroupsPath)
        }
        let place = try Self.cgroupPlace(cgroupsPath, id: id, systemd: line.systemdCgroup)
        let settings = ContainerRecord.cgroupSettings(parent: place.parent)
        try ContainerCgroup.refuseNesting(
            parent: place.parent, app: place.app, instance: place.instance)
        let cgroup = try Cgroups.driver(settings: settings).create(
            instance: place.instance, app: place.app, limits: limits)
        made = cgroup
        ContainerCgroup.mark(cgroup, id: id)
        PodNetwork.mark(cgroup, plain: plain)
        return (cgroup, place, settings)
    }

    /// Starts the launcher in `cgroup` with the engine's pipes, or with a terminal whose master
    /// goes to the engine's console socket; the app process will wait at the start gate. The
    /// write ends of the gate's pipes are the launcher's from then on (closed here); on failure
    /// every end is.
    private func startLauncher(
        profile: SandboxProfile, config: AppdConfiguration, settings: CgroupSettings,
        cgroup: any InstanceCgroup, namespaces: SharedNamespaces, bpf: [UInt8], gate: StartGate,
        terminal: Bool
    ) throws -> SandboxLaunch.Started {
        var console: Console?
        var consoleSocket = ""
        let started: SandboxLaunch.Started
        do {
            if terminal {
                guard let socket = line.options["console-socket"] else {
                    throw AppdError(
                        .badRequest, "process.terminal is true but no --console-socket was given")
                }
                consoleSocket = socket
                console = try Console.open()
            }
            var launched = profile
            if let console, let map = profile.userNamespace {
                try Console.bind(console, at: "/dev/console", owner: map, in: &launched)
            }
            var launch = try SandboxLaunch(
                profile: launched, launcher: config.sandbox.launcher, cgroups: settings,
                output: console.map { .terminal($0.terminal) } ?? .inherited(keepStdin: true))
            if [namespaces.net, namespaces.uts, namespaces.ipc, namespaces.pid].contains(where: {
                $0 >= 0
            }) {
                launch.namespaces = namespaces
            }
            launch.bpf = bpf
            launch.startGate = (gate.ready[1], gate.fifo)
            launch.initSignals = true
            started = try launch.start(in: cgroup, statusFD: gate.status[1], newSession: true)
        } catch {
            gate.closePipes()
            if let console {
                close(console.master)
                close(console.terminal)
            }
            throw error
        }
        close(gate.ready[1])
        close(gate.status[1])
        if let console {
            close(console.terminal)
            do { try console.send(to: consoleSocket) } catch {
                // The caller kills the cgroup; its read ends are not its to close yet.
                close(gate.ready[0])
                close(gate.status[0])
                throw error
            }
        }
        return started
    }

    /// While the launcher builds the sandbox on another CPU: the profile `exec` reads back,
    /// without its seccomp rules (`exec` gets the compiled program, seccomp.bpf, and the rules
    /// were half of JSONEncoder's time: perf, bench-oci), and the app's files against its
    /// signature (the app process waits at the start gate, which only `start` opens, and
    /// `start` finds no container before this create returned).
    private func whileBuilding(
        profile: SandboxProfile, image: inout AppImage?, config: AppdConfiguration
    ) throws -> [UInt8] {
        var stored = profile
        stored.seccomp.rules = []
        let encoded = Array(try JSONEncoder().encode(stored))
        try image?.checkContents(limits: config.bundleLimits)
        return encoded
    }

    /// Once the sandbox is built: the config's oom score on every process so far, the systemd
    /// scope, then runc's hooks (prestart, then createRuntime, with the app process at the
    /// gate). A failure fails `create` (and removes what it made).
    private func afterBuilt(
        id: String, spec: OCISpec, bundle: String, pid: pid_t, cgroup: any InstanceCgroup,
        limits: CgroupLimits, config: AppdConfiguration
    ) throws {
        if let adjust = spec.process?.oomScoreAdj {
            // PID 1 and the app process were forked before, and inherit nothing written now.
            let processes = (try? cgroup.processes()) ?? [pid]
            for process in processes.isEmpty ? [pid] : processes {
                applyOOMScore(adjust, to: process)
            }
        }
        let cgroupsPath = spec.linux?.cgroupsPath ?? ""
        if let scope = Self.systemdScope(cgroupsPath, systemd: line.systemdCgroup) {
            try SystemdScope.start(unit: scope.unit, slice: scope.slice, pid: pid, limits: limits)
        }
        guard let hooks = spec.hooks else { return }
        let hookState = OCIHooks.state(
            id: id, status: ContainerStatus.created.rawValue, pid: pid, bundle: bundle,
            annotations: spec.annotations ?? [:])
        for (phase, list) in [("prestart", hooks.prestart), ("createRuntime", hooks.createRuntime)]
        {
            try OCIHooks.run(
                list ?? [], phase: phase, state: hookState, allowed: config.oci.hooks, log: log,
                warnOnly: false)
        }
    }

    /// Waits for the app process's `ready`; false when the pipe closed without it (the
    /// launch failed: every writer is gone). Bounded by the launch itself.
    static func awaitReady(_ fd: Int32) -> Bool {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16)
        while bytes.count < 6 {
            let count = retryingInterrupts { Glibc.read(fd, &buffer, buffer.count) }
            guard count > 0 else { return false }
            bytes += buffer[..<count]
        }
        return bytes.starts(with: Array("ready\n".utf8))
    }

    /// CRI asks -998 for a pod's pause container; root without CAP_SYS_RESOURCE cannot lower
    /// the score: said in the log, and the container runs (issue 28).
    func applyOOMScore(_ value: Int, to pid: pid_t) {
        let path = "/proc/\(pid)/oom_score_adj"
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        let written =
            fd >= 0
            && (try? Array("\(value)\n".utf8).withUnsafeBytes { writeAll(fd, $0) }.get()) != nil
        let code = errno
        if fd >= 0 { close(fd) }
        if !written {
            log.warning(
                "cannot set oom_score_adj to \(value): \(errnoText(code)); the container runs with its inherited score"
            )
        }
    }

    /// The profile of an appd image: the bundle verified, its uid on this node, its data
    /// container, and the same compile as a daemon launch.
    private func appProfile(
        id: String, spec: OCISpec, bundlePath: String, config: AppdConfiguration, console: Bool
    ) throws -> PreparedSandbox {
        let image = try AppImage.verify(
            at: bundlePath, args: spec.process?.args ?? [], config: config)
        let bundleID = image.bundle.info.identifier.rawValue
        let uid = try NodeUIDs(directory: NodeUIDs.defaultDirectory).uid(for: bundleID)
        let data = try DataPlace.make(
            spec: spec, stateDirectory: state.directory(id), stateRoot: state.path, uid: uid,
            gid: uid)
        do {
            var subject = SandboxSubject(
                bundle: image.bundle, dataContainer: data.path, uid: uid, gid: uid)
            AppPaths.show(&subject)
            let (settings, override) = config.sandboxInputs(for: bundleID)
            var profile = try SandboxPolicy.compile(
                subject, settings: settings, override: override, kernel: .detect(),
                arguments: image.arguments, console: console)
            if let opened = data.opened {
                // The volume's data container is mounted from the fd it was made or found by.
                for index in profile.mounts.indices
                where profile.mounts[index].kind == .rwBind
                    && profile.mounts[index].source == data.path
                {
                    profile.mounts[index].source = opened.source
                }
            }
            return PreparedSandbox(
                profile: profile, bundleID: bundleID, dataContainer: data.path,
                dataInVolume: data.inVolume, image: image, held: data.opened.map { [$0] } ?? [])
        } catch {
            data.opened?.close()
            throw error
        }
    }

    /// appd.conf: `--config`, else `APPD_CONFIG`, else /etc/appd/appd.conf (its defaults
    /// when absent).
    func configuration() throws -> AppdConfiguration {
        if let path = line.config {
            return try AppdConfiguration.load(path: path, explicit: true)
        }
        if let path = ProcessInfo.processInfo.environment["APPD_CONFIG"], !path.isEmpty {
            return try AppdConfiguration.load(path: path, explicit: true)
        }
        return try AppdConfiguration.load(path: AppdConfiguration.defaultPath, explicit: false)
    }

    /// The opt-in to run an image without a .app, and the pod sandbox ("pause") containers
    /// the engines mark, which run plain under the strict default profile.
    static func isPlain(_ annotations: [String: String]) -> Bool {
        annotations["org.appd.plain"] == "true"
            || annotations["io.kubernetes.cri.container-type"] == "sandbox"
            || annotations["io.kubernetes.cri-o.ContainerType"] == "sandbox"
            || annotations["io.kubernetes.docker.type"] == "podsandbox"
    }

    /// The config's environment the sandbox has no variable of its own for; never the
    /// dynamic loader's (`LD_*`).
    static func extraEnvironment(_ env: [String], reserved own: Set<String>)
        -> [SandboxProfile.EnvironmentVariable]
    {
        var seen = Set<String>()
        var extra: [SandboxProfile.EnvironmentVariable] = []
        for entry in env.prefix(1024) {
            guard let equals = entry.firstIndex(of: "=") else { continue }
            let name = String(entry[..<equals])
            guard !name.isEmpty, !own.contains(name), !name.hasPrefix("LD_"),
                seen.insert(name).inserted
            else { continue }
            extra.append(.init(name: name, value: String(entry[entry.index(after: equals)...])))
        }
        return extra
    }

    /// The slice and scope unit of a `slice:prefix:name` cgroupsPath (`--systemd-cgroup`), nil
    /// for a cgroupfs path: the unit systemd is asked for (SystemdScope).
    static func systemdScope(_ path: String, systemd: Bool) -> (slice: String, unit: String)? {
        guard systemd || (path.split(separator: ":").count == 3 && !path.hasPrefix("/")) else {
            return nil
        }
        let parts = path.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else { return nil }
        let unit = "\(parts[1].isEmpty ? "" : parts[1] + "-")\(parts[2]).scope"
        return (parts[0].isEmpty ? "system.slice" : parts[0], unit)
    }

    /// The engine's `cgroupsPath` as `Cgroups` places an instance: `parent/app/instance`.
    /// `slice:prefix:name` (`--systemd-cgroup`) is the path systemd would give that scope. A
    /// one-component path (`/cgrouptest`) is the container's cgroup itself, as runc places it:
    /// no app level, the hierarchy's root the parent.
    static func cgroupPlace(_ path: String, id: String, systemd: Bool) throws -> (
        parent: String, app: String, instance: String
    ) {
        var path = path
        if let scope = systemdScope(path, systemd: systemd) {
            var slice = ""
            if scope.slice != "-.slice" {
                var prefix = ""
                for component in scope.slice.dropLast(".slice".count).split(separator: "-") {
                    prefix += prefix.isEmpty ? String(component) : "-\(component)"
                    slice += "/\(prefix).slice"
                }
            }
            path = "\(slice)/\(scope.unit)"
        }
        if path.isEmpty { path = "/appd-oci/\(id)" }
        let components = path.split(separator: "/").map(String.init)
        guard let only = components.first else { return ("/", "appd-oci", id) }
        guard components.count >= 2 else { return ("/", "", only) }
        let parent = "/" + components.dropLast(2).joined(separator: "/")
        return (parent, components[components.count - 2], components[components.count - 1])
    }
}

/// A compiled profile and what the record keeps of it.
struct PreparedSandbox {
    var profile: SandboxProfile
    var bundleID: String?
    var dataContainer: String?
    var dataInVolume: Bool
    /// An app image whose files are still to be checked against its signature (while the
    /// launcher builds the sandbox).
    var image: AppImage? = nil
    /// Host folders and files opened once and given to the launcher by fd (HostPaths).
    var held: [HostPaths.Opened] = []
    /// A plain container's overlay root and its range's first id (its layers are in `held`).
    var overlay: (root: OverlayRoot, hostID: UInt32)? = nil
}

/// Where the data container lives: in a volume mounted at `/appd/data` (the one data
/// container found there, else a new one at a random UUID name, kept when the container is
/// deleted), else in the container's state folder (gone with it).
///
/// The volume is a folder the engine made (a podman or docker volume, a Kubernetes volume), never
/// a system folder or appd's own state (HostPaths), and a directory owned by root (or the user
/// appd-oci runs as; or `nobody` when config.json runs the image as `nobody`, the User `appd
/// image` writes: podman chowns a new named volume to the image's user, and Debian's `nobody`
/// owns no file of its own). It is opened once; the data container is found or made through that fd
/// and opened by it, and that fd is what the launcher mounts: whoever can write the volume
/// cannot swap a folder in between.
enum DataPlace {
    static func make(
        spec: OCISpec, stateDirectory: String, stateRoot: String, uid: UInt32, gid: UInt32
    ) throws -> (path: String, inVolume: Bool, opened: HostPaths.Opened?) {
        let volume = (spec.mounts ?? []).first {
            OCIConfigCheck.normalized($0.destination) == OCIConfigCheck.dataVolume && $0.isBind
        }
        if let source = volume?.source {
            let what = "the volume at \(OCIConfigCheck.dataVolume)"
            let folder = try HostPaths.open(source, what: what, stateRoot: stateRoot, system: true)
            defer { folder.close() }
            let raw = openat(folder.fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard raw >= 0 else { throw AppdError.system("cannot open \(what) \(folder.path)") }
            let parent = FileDescriptor(raw: raw, path: folder.path)
            var info = stat()
            var owners: [uid_t] = [0, geteuid()]
            if spec.process?.user?.uid == AppImageCheck.imageUser {
                owners.append(AppImageCheck.imageUser)
            }
            guard fstat(raw, &info) == 0, owners.contains(info.st_uid) else {
                throw AppdError(
                    .permissionDenied,
                    "\(what) \(folder.path) is owned by uid \(info.st_uid): a volume is a folder the engine made (owned by root)"
                )
            }
            let existing = try parent.entries().filter { UUID(uuidString: $0) != nil }.sorted()
            guard existing.count <= 1 else {
                throw AppdError(
                    .conflict,
                    "\(what) (\(folder.path)) holds \(existing.count) data containers; it holds one app's"
                )
            }
            let name: String
            if let found = existing.first {
                var info = stat()
                guard fstatat(parent.raw, found, &info, AT_SYMLINK_NOFOLLOW) == 0,
                    info.st_mode & S_IFMT == S_IFDIR
                else {
                    throw AppdError(.conflict, "\(folder.path)/\(found) is not a directory")
                }
                guard info.st_uid == uid else {
                    throw AppdError(
                        .permissionDenied,
                        "the data container in \(folder.path) belongs to uid \(info.st_uid), not this app's \(uid)",
                        hint: "one volume holds one app's data")
                }
                name = found
            } else {
                name = UUID().uuidString
                try DataContainer.create(in: parent, name: name, uid: uid, gid: gid)
            }
            let fd = openat(parent.raw, name, appd_o_path() | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard fd >= 0 else { throw AppdError.system("cannot open \(parent.child(name))") }
            let container = HostPaths.Opened(fd: fd, path: parent.child(name))
            // The same folder, owned by the app: checked on the fd the launcher gets.
            guard fstat(fd, &info) == 0, info.st_uid == uid else {
                container.close()
                throw AppdError(
                    .conflict, "the data container \(container.path) changed while it was made")
            }
            return (container.path, true, container)
        }
        let parent = try FileDescriptor.directory(stateDirectory)
        let name = UUID().uuidString
        try DataContainer.create(in: parent, name: name, uid: uid, gid: gid)
        return ("\(stateDirectory)/\(name)", false, nil)
    }
}
