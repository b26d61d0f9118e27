import AppdBase
import CLinux
import Foundation
import Glibc
import Sandbox

/// `exec`: another process in a running container, confined exactly as the container's own:
/// the profile `create` compiled (kept in the state folder), with the new process's arguments,
/// environment additions and working directory. The launcher enters the namespaces of the
/// container's PID 1 through a pidfd and joins its cgroup; it builds nothing.
extension OCIRuntime {
    func exec(id: String) throws -> Int32 {
        let record = try state.load(id)
        guard state.status(of: record) == .running else {
            throw AppdError(.conflict, "cannot exec in a container that is not running")
        }
        let process = try execProcess()
        guard let args = process.args, let first = args.first else {
            throw AppdError(.badRequest, "exec needs a command (--process FILE or ID CMD...)")
        }
        let data = try OCIFiles.read(
            "\(state.directory(id))/profile.json", limit: 16 << 20, what: "the container's profile")
        var profile = try JSONDecoder().decode(SandboxProfile.self, from: data)
        // The seccomp program create compiled (a container an older appd-oci made keeps the
        // rules in its profile instead, and they are compiled again).
        let program = "\(state.directory(id))/seccomp.bpf"
        var bpf: [UInt8]?
        if access(program, F_OK) == 0 {
            bpf = Array(
                try OCIFiles.read(program, limit: 1 << 20, what: "the container's seccomp program"))
        } else if profile.seccomp.required && profile.seccomp.rules.isEmpty {
            throw AppdError(
                .notFound, "the seccomp program of container \(id) is missing (\(program))")
        }
        guard let cgroup = try record.cgroup() else {
            throw AppdError(.notFound, "the cgroup of container \(id) is gone")
        }
        guard let initPID = record.initPID(among: try cgroup.processes()) else {
            throw AppdError(.conflict, "the container's PID 1 is gone")
        }
        profile.executable = try Self.executable(
            first, profile: profile, rootfs: record, initPID: initPID)
        profile.arguments = args
        profile.environment += Self.extraEnvironment(
            process.env ?? [], reserved: Set(profile.environment.map(\.name)))
        if let cwd = process.cwd, cwd.hasPrefix("/") { profile.workingDirectory = cwd }
        let terminal = process.terminal ?? line.flag("tty")
        profile.console = terminal

        let pidfd = appd_pidfd_open(initPID, 0)
        guard pidfd >= 0 else { throw AppdError.system("cannot open a pidfd of \(initPID)") }
        defer { close(pidfd) }

        let config = try configuration()
        var console: Console?
        if terminal {
            guard line.options["console-socket"] != nil else {
                throw AppdError(.badRequest, "a terminal needs --console-socket")
            }
            console = try Console.open()
        }
        var launch = try SandboxLaunch(
            profile: profile, launcher: config.sandbox.launcher, cgroups: record.cgroupSettings,
            output: console.map { .terminal($0.terminal) } ?? .inherited(keepStdin: true))
        launch.bpf = bpf
        launch.enter = pidfd
        var status: [Int32] = [-1, -1]
        guard appd_pipe_cloexec(&status) == 0 else { throw AppdError.system("pipe") }
        let started: SandboxLaunch.Started
        do {
            started = try launch.start(
                in: cgroup, statusFD: status[1], newSession: true, joining: true)
        } catch {
            close(status[0])
            close(status[1])
            if let console {
                close(console.master)
                close(console.terminal)
            }
            throw error
        }
        close(status[1])
        defer { close(status[0]) }
        if let console {
            close(console.terminal)
            try console.send(to: line.options["console-socket"] ?? "")
        }
        if let pidFile = line.options["pid-file"] {
            try OCIFiles.writePidFile(pidFile, started.pid)
        }
        if line.flag("detach") { return 0 }
        let raw = SandboxLaunch.wait(started.pid)
        let outcome = SandboxLaunch.status(line: SandboxLaunch.readAll(status[0]), waitStatus: raw)
        if case .failedToLaunch(let message) = outcome {
            throw AppdError(.unsupported, "exec failed: \(message)")
        }
        return outcome.shellCode
    }

    /// The process: `--process FILE` (process.json), else the operands after the id with
    /// `--env`, `--cwd` and `--tty`.
    private func execProcess() throws -> OCISpec.Process {
        if let file = line.options["process"] {
            return try OCISpec.read(OCISpec.Process.self, at: file)
        }
        return OCISpec.Process(
            terminal: line.flag("tty"), user: nil, args: Array(line.operands.dropFirst()),
            env: line.options["env"].map { $0.split(separator: "\n").map(String.init) },
            cwd: line.options["cwd"], capabilities: nil, noNewPrivileges: true, oomScoreAdj: nil)
    }

    /// An absolute path as given; a bare name looked up in the sandbox's PATH, on the host
    /// folders the sandbox shows at the same paths, or for a plain container in its root as
    /// its PID 1 sees it (`/proc/PID/root`: the overlay's upper layer and its volumes
    /// included, which the engine's rootfs folder does not show).
    static func executable(
        _ name: String, profile: SandboxProfile, rootfs record: ContainerRecord, initPID: pid_t
    ) throws -> String {
        if name.hasPrefix("/") {
            // An app image's paths are the image's: `/Name.app/Name` is the bundle, which the
            // sandbox shows there (AppPaths); a container created before it did shows it
            // where it lies on the host (inside the root filesystem).
            let top = name.split(separator: "/").first.map(String.init) ?? ""
            if !record.plain, top.hasSuffix(".app"),
                !profile.mounts.contains(where: { $0.destination == "/\(top)" }),
                access("\(record.rootfs)\(name)", F_OK) == 0
            {
                return "\(record.rootfs)\(name)"
            }
            return name
        }
        let path = profile.environment.last { $0.name == "PATH" }?.value ?? "/usr/bin:/bin"
        if record.plain {
            // The container's tree is its own: each candidate is opened with the container's
            // root as the root (RESOLVE_IN_ROOT), so its links resolve as they would inside.
            let root = open("/proc/\(initPID)/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            guard root >= 0 else {
                throw AppdError.system("cannot open the root of the container's PID 1")
            }
            defer { close(root) }
            for directory in path.split(separator: ":") where directory.hasPrefix("/") {
                if isExecutable("\(directory)/\(name)", in: root) { return "\(directory)/\(name)" }
            }
        } else {
            for directory in path.split(separator: ":") where directory.hasPrefix("/") {
                if access("\(directory)/\(name)", X_OK) == 0 { return "\(directory)/\(name)" }
            }
        }
        throw AppdError(.notFound, "\(name): not found in the container's PATH (\(path))")
    }

    /// Whether `path` is a regular file with an execute bit, opened beneath `root` as its root.
    private static func isExecutable(_ path: String, in root: Int32) -> Bool {
        let fd = appd_open_in_root(root, path)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var info = stat()
        return fstat(fd, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
            && info.st_mode & 0o111 != 0
    }
}
