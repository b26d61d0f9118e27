import AppdAPI
import AppdBase
import AppdConfig
import CLinux
import Foundation
import Glibc
import PrintableText
import Sandbox

/// One invocation: the command line parsed, the command run. Commands that change a
/// container hold its lock (`StateRoot.locked`).
struct OCIRuntime {
    var line: OCICommandLine
    var log: OCILog
    var state: StateRoot { StateRoot(path: line.root) }

    static let specVersion = "1.0.2"

    func run() throws -> Int32 {
        switch line.command {
        case "--version", "":
            if line.command.isEmpty && line.operands.isEmpty {
                print(Self.usage)
                return line.command.isEmpty ? 1 : 0
            }
            print("appd-oci version \(AppdVersion.current)\nspec: \(Self.specVersion)")
        case "--help": print(Self.usage)
        case "create": return try create(id: try line.id())
        case "run": return try runToEnd(id: try line.id())
        case "start": try start(id: try line.id())
        case "state": try printState(id: try line.id())
        case "kill": try kill(id: try line.id())
        case "delete": try delete(id: try line.id())
        case "pause": try pause(id: try line.id(), frozen: true)
        case "resume": try pause(id: try line.id(), frozen: false)
        case "update": try update(id: try line.id())
        case "ps": try listProcesses(id: try line.id())
        case "exec": return try exec(id: try line.id())
        case "features": printFeatures()
        case "list": try list()
        default: throw AppdError(.badRequest, "unknown command '\(line.command)'")
        }
        return 0
    }

    static let usage = """
        usage: appd-oci [--root DIR] [--log FILE] [--log-format text|json] [--systemd-cgroup]
                        [--plain] COMMAND [OPTIONS] ID
        commands: create --bundle DIR [--pid-file F] [--console-socket S], start, state, kill
                  [--all] ID [SIGNAL], delete [--force], exec --process F [--detach] [--pid-file F]
                  [--console-socket S], pause, resume, update --resources F, ps [--format json],
                  run --bundle DIR, list, features
        An OCI runtime that runs signed .app images in appd's sandbox (docs/oci-runtime.md).
        """

    // MARK: state

    func printState(id: String) throws {
        let record = try state.load(id)
        let status = state.status(of: record)
        let object: [String: Any] = [
            "ociVersion": Self.specVersion, "id": record.id, "status": status.rawValue,
            "pid": status == .stopped ? 0 : Int(record.pid), "bundle": record.bundle,
            "rootfs": record.rootfs, "created": record.created, "owner": "",
            "annotations": record.annotations,
        ]
        let data = try JSONSerialization.data(
            withJSONObject: object, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
    }

    func list() throws {
        let ids = ((try? FileManager.default.contentsOfDirectory(atPath: state.path)) ?? [])
            .sorted()
        var rows: [[String: Any]] = []
        for id in ids {
            guard let record = try? state.load(id) else { continue }
            rows.append([
                "id": id, "status": state.status(of: record).rawValue, "pid": Int(record.pid),
                "bundle": record.bundle, "created": record.created,
            ])
        }
        if line.flag("quiet") {
            for row in rows { print(row["id"] ?? "") }
        } else if line.options["format"] == "json" {
            let data = try JSONSerialization.data(
                withJSONObject: rows, options: [.sortedKeys, .withoutEscapingSlashes])
            print(String(decoding: data, as: UTF8.self))
        } else {
            // The bundle path is the engine's (and the image's name may be in it): shown with
            // its control and bidi characters as \u{..}, as every text appd prints.
            print("ID\tPID\tSTATUS\tBUNDLE\tCREATED")
            for row in rows {
                let fields = ["id", "pid", "status", "bundle", "created"].map { key in
                    Printable(row[key].map { "\($0)" } ?? "", limit: nil).description
                }
                print(fields.joined(separator: "\t"))
            }
        }
    }

    // MARK: start

    /// Opens the start gate: one byte into the FIFO the app process is reading; it passes and
    /// execs.
    func start(id: String) throws {
        try state.locked(id) {
            let record = try state.load(id)
            let status = state.status(of: record)
            guard status == .created else {
                throw AppdError(
                    .conflict,
                    status == .stopped
                        ? "cannot start a container that has stopped"
                        : "cannot start a container in state \(status.rawValue)")
            }
            try openGate(record)
        }
    }

    /// Lets the app process past its start gate (the container's lock held), then runs the
    /// poststart hooks. `run` calls it with the record it just made.
    func openGate(_ record: ContainerRecord) throws {
        let id = record.id
        let fifo = state.fifoPath(id)
        // Non-blocking: no reader (ENXIO) means the app process is gone.
        let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENXIO {
                throw AppdError(.conflict, "the container stopped before it started")
            }
            throw AppdError.system("cannot open the start gate \(fifo)")
        }
        defer { close(fd) }
        var byte: UInt8 = 0x30
        guard Glibc.write(fd, &byte, 1) == 1 else {
            throw AppdError.system("cannot open the start gate \(fifo)")
        }
        unlink(fifo)
        if let poststart = record.hooks?.poststart {
            try OCIHooks.run(
                poststart, phase: "poststart",
                state: OCIHooks.state(
                    id: id, status: ContainerStatus.running.rawValue, pid: record.pid,
                    bundle: record.bundle, annotations: record.annotations),
                allowed: storedHooksAllowed(), log: log, warnOnly: true)
        }
    }

    // MARK: kill

    func kill(id: String) throws {
        try state.locked(id) {
            let record = try state.load(id)
            let status = state.status(of: record)
            let signal = try Self.signal(line.operands.dropFirst().first ?? "SIGTERM")
            guard status != .stopped else { throw AppdError(.conflict, "container not running") }
            let cgroup = try record.cgroup()
            if line.flag("all") || status == .created {
                // Every process, the launcher too: before `start` the app process waits at the
                // gate with default dispositions, so the signal ends it there.
                for pid in (try? cgroup?.processes()) ?? [] { Glibc.kill(pid, signal) }
            } else if Self.forwarded.contains(signal) {
                // The launcher passes these to the app (PID 1's rule: only if it handles them);
                // SIGKILL ends the launcher, and with it the sandbox.
                Glibc.kill(record.pid, signal)
            } else {
                // The others (QUIT, STOP, CONT, WINCH, ...) go to the app itself.
                let processes = (try? cgroup?.processes()) ?? []
                let initPID = record.initPID(among: processes)
                let app = processes.first { pid in
                    initPID != nil && Process.stateAndParent(pid)?.parent == initPID
                }
                Glibc.kill(app ?? record.pid, signal)
            }
            // A frozen task handles no signal until it is thawed (cgroup v1).
            if status == .paused && signal == SIGKILL { try? cgroup?.thaw() }
        }
    }

    /// What the launcher forwards to the app (appd-exec's supervised set), and SIGKILL.
    static let forwarded: Set<Int32> = [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGKILL]

    /// `SIGTERM`, `TERM`, `term` or `15`.
    static func signal(_ text: String) throws -> Int32 {
        if let number = Int32(text), number > 0, number < 65 { return number }
        var name = text.uppercased()
        if !name.hasPrefix("SIG") { name = "SIG" + name }
        let names: [String: Int32] = [
            "SIGHUP": SIGHUP, "SIGINT": SIGINT, "SIGQUIT": SIGQUIT, "SIGKILL": SIGKILL,
            "SIGTERM": SIGTERM, "SIGUSR1": SIGUSR1, "SIGUSR2": SIGUSR2, "SIGSTOP": SIGSTOP,
            "SIGCONT": SIGCONT, "SIGPIPE": SIGPIPE, "SIGALRM": SIGALRM, "SIGWINCH": SIGWINCH,
            "SIGABRT": SIGABRT, "SIGTSTP": SIGTSTP,
        ]
        guard let signal = names[name] else {
            throw AppdError(.badRequest, "unknown signal '\(text)'")
        }
        return signal
    }

    // MARK: delete

    func delete(id: String) throws {
        try StateRoot.validate(id)
        guard access(state.directory(id), F_OK) == 0 else {
            if line.flag("force") { return }
            throw AppdError(.notFound, "container does not exist")
        }
        try state.locked(id) {
            guard let record = try? state.load(id) else {
                // A create that died half-way: nothing runs from it.
                try removeState(id)
                return
            }
            let status = state.status(of: record)
            guard status == .stopped || line.flag("force") else {
                throw AppdError(
                    .conflict,
                    "cannot delete container \(id) that is not stopped: \(status.rawValue)")
            }
            try remove(record, cgroup: try? record.cgroup())
        }
    }

    /// What `delete` removes, with the container's lock held: its processes and cgroup, its
    /// state folder, its id range; then its poststop hooks. `cgroup`: the record's, as `run`
    /// holds it from create or `delete` opens it.
    func remove(_ record: ContainerRecord, cgroup: (any InstanceCgroup)?) throws {
        let id = record.id
        // Its own processes only, within 2 s per hierarchy (ContainerCgroup).
        if let cgroup, !ContainerCgroup.killAndRemove(cgroup) {
            log.warning("the cgroup of \(id) could not be removed")
        }
        try removeState(id)
        if let range = record.userNamespaceHost { PlainIDRange.free(range) }
        if let poststop = record.hooks?.poststop {
            try OCIHooks.run(
                poststop, phase: "poststop",
                state: OCIHooks.state(
                    id: id, status: ContainerStatus.stopped.rawValue, pid: 0,
                    bundle: record.bundle, annotations: record.annotations),
                allowed: storedHooksAllowed(), log: log, warnOnly: true)
        }
    }

    /// What a stored poststart or poststop hook is checked against when it runs: appd.conf's
    /// `[OCI] Hooks=` as it is now (none when appd.conf cannot be read: said in the log).
    func storedHooksAllowed() -> [HookRule] {
        do {
            return try configuration().oci.hooks
        } catch {
            log.warning("no hook runs: appd.conf cannot be read: \(error)")
            return []
        }
    }

    /// The container's folder (its record, gate, profile and, unless it lives in a volume,
    /// the data container), removed without following a link the app planted.
    func removeState(_ id: String) throws {
        let root = try FileDescriptor.directory(state.path)
        try root.removeTree(id)
    }

    // MARK: pause, update, ps

    func pause(id: String, frozen: Bool) throws {
        try state.locked(id) {
            let record = try state.load(id)
            let status = state.status(of: record)
            guard status == (frozen ? .running : .paused) else {
                throw AppdError(
                    .conflict,
                    frozen
                        ? "container not running" : "container \(id) is not paused")
            }
            guard let cgroup = try record.cgroup() else {
                throw AppdError(.notFound, "the cgroup of container \(id) is gone")
            }
            if frozen { try cgroup.freeze() } else { try cgroup.thaw() }
        }
    }

    /// Sets the limits (`--resources FILE|-`, or runc's `--memory`, `--pids-limit`,
    /// `--cpu-shares`, `--cpu-quota`, `--cpu-period`, `--cpuset-cpus`, `--cpuset-mems`) as
    /// asked, raised or lowered: an in-place resize. Memory and pids within the node's
    /// `[OCI] MemoryMax=`/`TasksMax=` ceiling when appd.conf sets one (above it: refused, naming
    /// the key); the CPU limits have no ceiling.
    func update(id: String) throws {
        try state.locked(id) {
            let record = try state.load(id)
            guard state.status(of: record) != .stopped else {
                throw AppdError(.conflict, "container not running")
            }
            var resources = OCISpec.Resources()
            if let file = line.options["resources"] {
                let data = try OCIFiles.readInput(file, limit: 1 << 20, what: "the resources")
                resources = try JSONDecoder().decode(OCISpec.Resources.self, from: data)
            }
            if let memory = line.options["memory"].flatMap(Self.bytes) {
                resources.memory = .init(limit: memory)
            }
            if let pids = line.options["pids-limit"].flatMap({ Int64($0) }) {
                resources.pids = .init(limit: pids)
            }
            try applyCPUFlags(to: &resources)
            let limits = try Self.limits(
                CgroupLimits(memoryMax: record.memoryMax, pidsMax: record.pidsMax),
                by: resources, ceiling: configuration().oci)
            guard let cgroup = try record.cgroup() else {
                throw AppdError(.notFound, "the cgroup of container \(id) is gone")
            }
            try cgroup.setLimits(limits)
            // The record holds the limits in force: the next update and `state` read them.
            var updated = record
            updated.memoryMax = limits.memoryMax
            updated.pidsMax = limits.pidsMax
            try state.save(updated)
            // A scope systemd knows would get its start limits back at its next realization.
            // Decided by the unit, not by --systemd-cgroup: podman's `update` does not pass it.
            if SystemdScope.isTransientUnit(record.cgroupInstance) {
                try SystemdScope.setLimits(unit: record.cgroupInstance, limits)
            }
        }
    }

    /// `64m`, `1g`, `4096`: runc's --memory.
    static func bytes(_ text: String) -> Int64? {
        let units: [Character: Int64] = ["k": 1 << 10, "m": 1 << 20, "g": 1 << 30]
        if let last = text.lowercased().last, let unit = units[last],
            let number = Int64(text.dropLast())
        {
            return number.multipliedReportingOverflow(by: unit).overflow
                ? nil : number * unit
        }
        return Int64(text)
    }

    /// runc's `update` flags for the CPU: each a number (or a CPU list), else refused.
    func applyCPUFlags(to resources: inout OCISpec.Resources) throws {
        func number<T: FixedWidthInteger>(_ flag: String, _: T.Type) throws -> T? {
            guard let text = line.options[flag] else { return nil }
            guard let value = T(text) else {
                throw AppdError(.badRequest, "--\(flag) '\(text.prefix(32))' is not a number")
            }
            return value
        }
        var cpu = resources.cpu ?? OCISpec.CPU()
        if let shares = try number("cpu-shares", UInt64.self) { cpu.shares = shares }
        if let quota = try number("cpu-quota", Int64.self) { cpu.quota = quota }
        if let period = try number("cpu-period", UInt64.self) { cpu.period = period }
        if let cpus = line.options["cpuset-cpus"] { cpu.cpus = cpus }
        if let mems = line.options["cpuset-mems"] { cpu.mems = mems }
        resources.cpu = cpu
    }

    func listProcesses(id: String) throws {
        let record = try state.load(id)
        let pids = (try? record.cgroup()?.processes()) ?? []
        if line.options["format"] == "json" {
            print("[" + pids.map(String.init).joined(separator: ",") + "]")
        } else {
            print("PID")
            for pid in pids { print(pid) }
        }
    }

    func printFeatures() {
        let features: [String: Any] = [
            "ociVersionMin": "1.0.0", "ociVersionMax": Self.specVersion,
            "hooks": ["prestart", "createRuntime", "poststart", "poststop"],
            "mountOptions": ["ro", "rw", "bind", "rbind"],
            "linux": [
                "namespaces": ["cgroup", "ipc", "mount", "network", "pid", "uts"],
                "capabilities": [String](),
                "cgroup": ["v1": true, "v2": true, "systemd": true, "systemdUser": false],
                "seccomp": ["enabled": true],
                "apparmor": ["enabled": false], "selinux": ["enabled": false],
            ] as [String: Any],
            "annotations": [
                "org.appd.plain":
                    "true runs an image without a .app as a plain container under a strict default profile"
            ],
        ]
        if let data = try? JSONSerialization.data(
            withJSONObject: features,
            options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
        {
            print(String(decoding: data, as: UTF8.self))
        }
    }
}
