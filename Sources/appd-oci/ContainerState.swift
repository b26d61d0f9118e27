import AppdBase
import Foundation
import Glibc
import Sandbox

/// What appd-oci keeps of one container between its invocations: `ROOT/ID/state.json` (root
/// only), beside the start gate `exec.fifo` while the container is created and not started.
/// The runtime is daemonless: each command reads this, looks at the process and the cgroup,
/// and acts.
struct ContainerRecord: Codable {
    var id: String
    var bundle: String
    var rootfs: String
    /// The launcher: the pid the engine got in `--pid-file`, whose exit status is the
    /// container's; `pidStart` (field 22 of /proc/PID/stat) tells it from a reused pid.
    var pid: Int32
    var pidStart: UInt64
    var created: String
    var annotations: [String: String]
    /// The cgroup: `parent/app/instance` as `Cgroups` makes it (the engine's cgroupsPath);
    /// `cgroupApp` is empty for a one-component cgroupsPath (`parent/instance`).
    var cgroupParent: String
    var cgroupApp: String
    var cgroupInstance: String
    /// Whether it runs plain (no `.app`: `--plain` or `org.appd.plain=true`).
    var plain: Bool
    var bundleID: String?
    var uid: UInt32
    var gid: UInt32
    /// The data container, and whether it lives in a volume (kept at delete) or in the
    /// state directory (removed with the container).
    var dataContainer: String?
    var dataInVolume: Bool
    /// The memory and pids limits in force: those `create` applied, then each `update`'s.
    var memoryMax: Int64?
    var pidsMax: Int?
    /// The pod network namespace the container joined, if any (`exec` joins it too).
    var networkNamespace: String?
    /// A plain container's first host id (`PlainIDRange`): freed at delete.
    var userNamespaceHost: UInt32?
    /// The config's poststart and poststop hooks, run by `start` and `delete` (OCIHooks).
    var hooks: OCISpec.Hooks? = nil

    var cgroupSettings: CgroupSettings { Self.cgroupSettings(parent: cgroupParent) }

    /// How a container's cgroup is laid out under `parent` (the engine's cgroupsPath but its
    /// last two components): no instance leaves (the engine reads the cgroup the pid file's
    /// process is in), and the parent may be the hierarchy's root. One definition for `create`
    /// and for every later command.
    static func cgroupSettings(parent: String) -> CgroupSettings {
        var settings = CgroupSettings(parent: parent)
        settings.instanceLeaves = false
        settings.parentMayBeRoot = true
        return settings
    }

    func cgroup() throws -> (any InstanceCgroup)? {
        try Cgroups.driver(settings: cgroupSettings).open(
            instance: cgroupInstance, app: cgroupApp)
    }

    /// The container's PID 1 among `processes` (its cgroup's): the launcher's child, in the
    /// container's pid namespace; its own child is the app.
    func initPID(among processes: [pid_t]) -> pid_t? {
        processes.first { Process.stateAndParent($0)?.parent == pid }
    }
}

/// A container's status as the runtime spec names them (conmon accepts only these four).
enum ContainerStatus: String {
    case creating, created, running, paused, stopped
}

/// Where containers are kept: `--root` (default `/run/appd-oci`), one folder per id.
struct StateRoot {
    static let defaultPath = "/run/appd-oci"
    var path: String

    func directory(_ id: String) -> String { "\(path)/\(id)" }
    func recordPath(_ id: String) -> String { "\(directory(id))/state.json" }
    func fifoPath(_ id: String) -> String { "\(directory(id))/exec.fifo" }

    /// runc's rule for ids: letters, digits, `_ + - .`, not `.` or `..`, at most 1024 bytes.
    static func validate(_ id: String) throws {
        let allowed = id.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "+"),
                UInt8(ascii: "-"), UInt8(ascii: "."):
                true
            default: false
            }
        }
        guard !id.isEmpty, id != ".", id != "..", id.utf8.count <= 1024, allowed else {
            throw AppdError(
                .badRequest, "invalid container id '\(id)': letters, digits, '_+-.' only")
        }
    }

    /// Makes `path` and any missing parents (the shim's `--root` is `RUNTIME_ROOT/NAMESPACE`).
    func makeRoot() throws {
        var made = ""
        for component in path.split(separator: "/") {
            made += "/\(component)"
            if mkdir(made, 0o700) != 0 && errno != EEXIST {
                throw AppdError.system("cannot create the state root \(path) (at \(made))")
            }
        }
    }

    func load(_ id: String) throws -> ContainerRecord {
        try Self.validate(id)
        let file = recordPath(id)
        guard access(directory(id), F_OK) == 0 else {
            throw AppdError(.notFound, "container does not exist")
        }
        let data = try OCIFiles.read(file, limit: 1 << 20, what: "the container's state")
        do {
            return try JSONDecoder().decode(ContainerRecord.self, from: data)
        } catch {
            throw AppdError(
                .io, "the state of container \(id) (\(file)) is unreadable", cause: .from(error))
        }
    }

    func save(_ record: ContainerRecord) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try OCIFiles.writeAtomically(recordPath(record.id), Array(try encoder.encode(record)))
    }

    /// Holds an exclusive lock on the container's folder while `body` runs: two commands on
    /// one container (a `kill` racing a `delete`) take turns.
    func locked<T>(_ id: String, _ body: () throws -> T) throws -> T {
        let fd = open(directory(id), O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { throw AppdError(.notFound, "container does not exist") }
            throw AppdError.system("cannot open \(directory(id))")
        }
        defer { close(fd) }
        _ = retryingInterrupts { flock(fd, LOCK_EX) }
        return try body()
    }

    func status(of record: ContainerRecord) -> ContainerStatus {
        guard Process.isAlive(record.pid, start: record.pidStart) else { return .stopped }
        if access(fifoPath(record.id), F_OK) == 0 { return .created }
        if let cgroup = try? record.cgroup(), (try? cgroup.isFrozen()) == true { return .paused }
        return .running
    }
}

/// Facts about a host process read from /proc.
enum Process {
    /// The fields of /proc/PID/stat after the command's closing parenthesis (fields[0] is
    /// field 3, the state), nil when the process is gone.
    static func statFields(_ pid: pid_t) -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { return nil }
        return text[text.index(after: close)...].split(separator: " ")
    }

    /// Field 22 of /proc/PID/stat (start time in clock ticks since boot), nil when gone.
    static func startTime(_ pid: pid_t) -> UInt64? {
        guard let fields = statFields(pid), fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }

    /// The state letter (field 3) and the parent (field 4).
    static func stateAndParent(_ pid: pid_t) -> (state: Character, parent: pid_t)? {
        guard let fields = statFields(pid), fields.count > 1, let state = fields[0].first,
            let parent = pid_t(fields[1])
        else { return nil }
        return (state, parent)
    }

    /// Whether `pid` is the process that was started at `start` and has not exited (a
    /// zombie has: its exit status waits for the engine's reaper). One read of its stat.
    static func isAlive(_ pid: pid_t, start: UInt64) -> Bool {
        guard pid > 0, let fields = statFields(pid), fields.count > 19,
            UInt64(fields[19]) == start, let state = fields[0].first
        else {
            return false
        }
        return state != "Z" && state != "X"
    }
}
